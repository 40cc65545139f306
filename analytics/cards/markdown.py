"""An evaluation card as Markdown (pure; no Django).

**Escaping, by position.** Everything that comes from people or models (judge, model,
project, skill and dataset names, template text, trust figures' keys) renders as itself
under CommonMark with GFM tables and strikethrough, and carries a backslash only where
Markdown would read markup at that very position, so that the file reads cleanly as text
too:
- inline (`md_text`): line breaks, tabs and control characters become spaces; a backslash
  is added before a backtick, `*` and `~` (code spans, emphasis, strikethrough), `_` unless
  inside a word (where it cannot start emphasis), `<` before what could open a tag or an
  autolink, `&` that starts an entity, `]` before `(` or `[` (the only way a link or an
  image forms: the card defines no link references), and a backslash before punctuation;
  braces, brackets elsewhere, `#`, `!`, `|` and `>` in the middle of a line are text;
- at the start of a list item (`start=True`): also a leading block marker (`#`, `>`, `+`,
  `-`, `*`, `[`, `1.`), and leading spaces are dropped;
- in a heading (`md_heading`): also a trailing run of `#` (it would close the heading);
- in a table cell (`_table`): every `|`, code spans included (GFM splits cells first).
Literal JSON goes in code spans (`md_code`) whose backtick run is longer than any inside,
never escaped; template and probe texts in fenced blocks (`md_fenced`) whose fence is longer
than any run of backticks inside.

**Small samples** (docs/SMALL_SAMPLES.md). Every figure has its n beside it (a column of its
table, or "(n = …)"). A figure its group's `too_few` names (analytics/cards/small_samples.py:
the report's one rule) is not shown: its cell gives the reason, "too few: n = 6 (at least 10
responses)", and the row's other cells with the same reason say "too few". An interval that
cannot be read as shown (too few items resampled, degenerate, not containing its estimate)
is not shown either: "no interval:" and why."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from analytics.cards.small_samples import card_flag_small_samples, interval_problem, reason

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_BACKTICKS = re.compile(r"`+")
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ALWAYS = frozenset("`*~")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});")
_LIST_START = re.compile(r"^([#>+\-*\[]|[0-9]{1,9}[.)](?=\s|$))")
_HEADING_CLOSE = re.compile(r"(^|\s)(#+)(\s*)$")

#: The trust figures in the order the card shows them (others follow, by name).
TRUST_ORDER = ("calibration", "strata", "na", "stochasticity", "probes")
TRUST_TITLES = {
    "calibration": "Calibration",
    "strata": "Where the judge fails (strata)",
    "na": "N/A",
    "stochasticity": "Stochasticity",
    "probes": "Bias probes",
}
LEVELS = ("instance", "item", "system")
#: Nested figures deeper than this are shown as JSON text (in a code span).
MAX_DEPTH = 6


def _one_line(value: object) -> str:
    return _CONTROL.sub(" ", str(value).replace("\r\n", " "))


def md_text(value: object, *, start: bool = False) -> str:
    """`value` as inline Markdown text that renders as itself, escaped only where its
    position needs it (module docstring); `start`: it begins a list item."""
    text = _one_line(value)
    forced: set[int] = set()
    if start:
        text = text.lstrip(" ")
        marker = _LIST_START.match(text)
        if marker is not None:
            forced.add(marker.end() - 1)
    entities = {m.start() for m in _ENTITY.finditer(text)}
    out = []
    for i, ch in enumerate(text):
        before = text[i - 1] if i else ""
        after = text[i + 1] if i + 1 < len(text) else ""
        if ch in _ALWAYS or i in forced:
            escape = True
        elif ch == "_":  # inside a word it can neither open nor close emphasis
            escape = not (before.isalnum() and after.isalnum())
        elif ch == "<":  # a tag, a comment or an autolink starts with one of these
            escape = not after or after.isalpha() or after in "/!?"
        elif ch == "&":
            escape = i in entities
        elif ch == "]":
            escape = after in ("(", "[")
        elif ch == "\\":
            escape = not after or after in _ASCII_PUNCTUATION
        else:
            escape = False
        out.append("\\" + ch if escape else ch)
    return "".join(out)


def md_heading(value: object) -> str:
    """`value` as the end of a heading's text: `md_text`, and a trailing run of `#` (which
    would close the heading) escaped."""
    text = md_text(value)
    closing = _HEADING_CLOSE.search(text)
    if closing is None:
        return text
    run = "".join("\\#" for _ in closing.group(2))
    return text[: closing.start(2)] + run + closing.group(3)


def md_code(value: object) -> str:
    """`value` on one line in a code span that nothing inside can close (literal text: no
    escape at all; in a table, `_table` escapes its `|` as GFM asks)."""
    text = _one_line(value)
    if not text:
        return "(empty)"
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    # a space on both sides is stripped when rendered: it keeps a leading or trailing
    # backtick or space of the text itself
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_json(value: object) -> str:
    """A JSON value as literal JSON text in a code span."""
    return md_code(json.dumps(value, ensure_ascii=False, sort_keys=True))


def md_fenced(text: str) -> str:
    """`text` in a fenced code block that nothing inside can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = re.sub(
        r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u2028\u2029]",
        lambda m: "\n" if m.group() in "\u2028\u2029" else " ",
        text,
    )
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    if not body.endswith("\n"):
        body += "\n"
    return f"{fence}text\n{body}{fence}"


def number(value: object, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return md_text(value)


def shown(value: object, ci: object = None, digits: int = 3) -> str:
    """A figure with its interval, "0.412 [0.120, 0.650]"; an interval that cannot be read
    as shown (too few items resampled, degenerate, not containing the figure) is not shown:
    the cell says why (analytics.bootstrap.interval_note)."""
    text = number(value, digits)
    if not isinstance(ci, Mapping) or not isinstance(value, int | float):
        return text
    low, high = ci.get("low"), ci.get("high")
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return text
    problem = interval_problem(value, ci)
    if problem:
        return f"{text} (no interval: {md_text(problem)})"
    return f"{text} [{low:.3f}, {high:.3f}]"


class _Row:
    """The figures of one table row, from their flagged group (analytics/cards/
    small_samples.py). A figure below its kind's minimum is not shown: the row's first cell
    with a reason gives it, the row's others with the same reason say "too few"."""

    def __init__(self) -> None:
        self.said: set[str] = set()

    def too_few(self, group: object, figure: str) -> str:
        """ "" when the figure is shown, else what its cell says instead."""
        found = reason(group, figure)
        if not found:
            return ""
        if found in self.said:
            return "too few"
        self.said.add(found)
        return md_text(found)

    def figure(self, group: object, figure: str, value: object, ci: object = None) -> str:
        return self.too_few(group, figure) or shown(value, ci)

    def estimate(self, group: object, figure: str, found: object) -> str:
        """An interval figure {estimate, low, high} (or a bare number)."""
        if isinstance(found, Mapping):
            return self.figure(group, figure, found.get("estimate"), found)
        return self.figure(group, figure, found)


def _scalar(value: object, *, start: bool = False) -> str:
    if isinstance(value, bool | int | float) or value is None:
        return number(value)
    return md_text(value, start=start)


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def nested(value: object, depth: int = 0) -> list[str]:
    """Any JSON value as nested bullet lines (keys and strings escaped)."""
    pad = "  " * depth
    if depth >= MAX_DEPTH:
        return [f"{pad}- {md_json(value)}"]
    lines: list[str] = []
    if isinstance(value, Mapping):
        if not value:
            return [f"{pad}- (none)"]
        for key, inner in value.items():
            if _is_scalar(inner):
                lines.append(f"{pad}- **{md_text(key)}**: {_scalar(inner)}")
            elif isinstance(inner, list) and all(_is_scalar(v) for v in inner):
                shown_list = ", ".join(_scalar(v) for v in inner) or "(none)"
                lines.append(f"{pad}- **{md_text(key)}**: {shown_list}")
            else:
                lines.append(f"{pad}- **{md_text(key)}**:")
                lines.extend(nested(inner, depth + 1))
        return lines
    if isinstance(value, list):
        if not value:
            return [f"{pad}- (none)"]
        for n, inner in enumerate(value, 1):
            if _is_scalar(inner):
                lines.append(f"{pad}- {_scalar(inner, start=True)}")
            elif isinstance(inner, list) and all(_is_scalar(v) for v in inner):
                lines.append(f"{pad}- {md_json(inner)}")
            else:
                lines.append(f"{pad}- {n}:")
                lines.extend(nested(inner, depth + 1))
        return lines
    return [f"{pad}- {_scalar(value, start=True)}"]


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    """A GFM table; every `|` in a cell is escaped, inside code spans too (GFM splits a
    row into cells before it reads any inline markup)."""

    def line(cells: Iterable[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    head = list(header)
    return [line(head), "|" + "---|" * len(head), *(line(row) for row in rows)]


def card_markdown(card: Mapping[str, Any]) -> str:
    """The card (analytics.cards.selectors.card_build) as a Markdown document."""
    flagged: dict[str, Any] = copy.deepcopy(dict(card))
    card_flag_small_samples(flagged)  # a no-op on a built card: its flags are these
    card = flagged
    out: list[str] = []
    snap = card["snapshot"]
    out.append(
        f"# Evaluation card: {md_text(card['judge'])} on {md_heading(card['project']['name'])}"
    )
    out.append("")
    out.append(
        f"Built from report snapshot {snap['id']} of project {md_text(card['project']['slug'])}"
        f" (computed {snap['finished_at'] or '?'}, scores read as of"
        f" {snap['as_of'] or '?'}). The same snapshot gives the same card."
    )
    out.append("")
    out.append(f"Snapshot params: {md_json(snap['params'])}")
    out.append("")
    out.append(
        "Each figure has its n beside it; below the smallest sample its kind of figure is"
        " shown for, the card says too few and why instead of a number."
    )
    out.append("")

    out.append("## Configuration")
    out.append("")
    config = card["configuration"]
    if config is None:
        out.append("No judge configuration in the project under this name (imported scores).")
    else:
        out.extend(
            _table(
                ["field", "value"],
                [
                    [md_text(key), md_text(value) if isinstance(value, str) else md_json(value)]
                    for key, value in config.items()
                ],
            )
        )
    out.append("")

    out.append("## Prompt template")
    out.append("")
    template = card["prompt_template"]
    if template is None:
        out.append("No prompt template (a baseline metric or imported scores).")
    else:
        out.append(
            f"Template {md_text(template['name'])}: key {md_text(template['key'])},"
            f" version {template['version']}, content hash {md_code(template['content_hash'])},"
            f" {'with' if template['with_reference'] else 'without'} the reference answer."
        )
        out.append("")
        out.append("System prompt:")
        out.append("")
        out.append(md_fenced(template["system_prompt"]))
        out.append("")
        out.append("User message template:")
        out.append("")
        out.append(md_fenced(template["user_template"]))
    out.append("")

    data = card["data"]
    out.append("## Data")
    out.append("")
    out.append(
        f"- **dataset hash**: {md_code(data['dataset_hash'])} ({md_text(data['hash_definition'])})"
    )
    if data.get("source"):
        out.append(f"- **read from**: {md_text(data['source'])}")
    out.append(f"- **datasets**: {', '.join(md_text(d) for d in data['datasets']) or '(none)'}")
    out.append(f"- **items**: {data['items']}")
    out.append(f"- **responses**: {data['responses']}")
    out.append(f"- **models**: {', '.join(md_text(m) for m in data['models']) or '(none)'}")
    out.append("")

    out.append("## Rubric versions")
    out.append("")
    if card["rubrics"]:
        out.extend(
            _table(
                ["skill", "version", "source"],
                [
                    [md_text(skill), number(r["version"]), md_text(r["source"])]
                    for skill, r in card["rubrics"].items()
                ],
            )
        )
    else:
        out.append("(none)")
    out.append("")

    cost = card["cost"]
    out.append("## Runs and cost")
    out.append("")
    out.append(
        f"k = {card['k'] if card['k'] is not None else '–'} samples per response. Total cost"
        f" {md_text(cost['total'])} over {len(card['runs'])} run(s),"
        f" {cost['prompt_tokens']} prompt and {cost['completion_tokens']} completion tokens."
    )
    if card["runs"]:
        out.append("")
        out.extend(
            _table(
                ["run", "dataset", "finished", "judgments", "cost"],
                [
                    [
                        str(run["id"]),
                        md_text(run["dataset"]),
                        md_text(run["finished_at"] or "–"),
                        str(run["judgments"]),
                        md_text(run["cost"]),
                    ]
                    for run in card["runs"]
                ],
            )
        )
    out.append("")

    out.append("## Correlation with people")
    out.append("")
    correlation = card["correlation"] or {}
    ceiling = card["human_ceiling"] or {}
    if not correlation:
        out.append("This judge has no correlation in this snapshot.")
        out.append("")
    for level in LEVELS:
        rows = []
        for skill, levels in correlation.items():
            figures = levels.get(level) or {}
            ci = figures.get("ci") or {}
            row = _Row()
            cells = [md_text(skill), number(figures.get("n"))] + [
                row.figure(figures, name, figures.get(name), ci.get(name))
                for name in ("pearson", "spearman", "kendall")
            ]
            if level == "instance":
                human = ceiling.get(skill) or {}
                loo = human.get("loo_ceiling") or {}
                loo_ci = human.get("loo_ceiling_ci") or {}
                cells.append(number(loo.get("units", human.get("n_units"))))
                cells += [
                    row.figure(human, "loo_ceiling", loo.get(name), loo_ci.get(name))
                    for name in ("pearson", "spearman")
                ]
            rows.append(cells)
        if not rows:
            continue
        header = ["skill", "n", "Pearson", "Spearman", "Kendall τ-b"]
        if level == "instance":
            header += ["human ceiling n", "human ceiling Pearson", "human ceiling Spearman"]
        out.append(f"### {level.capitalize()} level")
        out.append("")
        out.extend(_table(header, rows))
        out.append("")

    out.append("## Human ceiling")
    out.append("")
    if ceiling:
        out.extend(_ceiling_lines(ceiling))
    else:
        out.append("No agreement among people in this snapshot.")
    out.append("")

    out.append("## Prediction-powered estimates")
    out.append("")
    out.extend(prediction_powered_lines(card.get("prediction_powered")))
    out.append("")

    out.append("## Trust figures")
    out.append("")
    trust = card["trust"]
    if not trust:
        out.append("This snapshot holds no trust figures for this judge.")
        out.append("")
    else:
        names = [k for k in TRUST_ORDER if k in trust] + sorted(
            k for k in trust if k not in TRUST_ORDER
        )
        for name in names:
            out.append(f"### {TRUST_TITLES.get(name) or md_heading(name)}")
            out.append("")
            out.extend(_trust_lines(name, trust[name]))
            out.append("")

    out.append("## Known limitations")
    out.append("")
    if card["limitations"]:
        out.extend(f"- {md_text(text, start=True)}" for text in card["limitations"])
    else:
        out.append("None found in the data.")
    out.append("")
    return "\n".join(out)


# --- prediction-powered estimates -------------------------------------------------------------

ACTIVE_METHOD = "active selection (inverse-probability weighted)"


def _interval_text(value: object, low: object, high: object) -> str:
    """ "3.412 [3.301, 3.523]"; the number alone without both bounds."""
    text = number(value)
    if isinstance(value, int | float) and all(isinstance(v, int | float) for v in (low, high)):
        return f"{text} [{low:.3f}, {high:.3f}]"
    return text


def prediction_powered_lines(rows: object) -> list[str]:
    """The card's prediction-powered rows (all systems together, one per skill) as a table;
    a row on too few labeled responses gives the reason instead of its figures."""
    if rows is None:
        return [
            "This snapshot holds no prediction-powered estimates (it was computed before"
            " they existed)."
        ]
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        return nested(rows)
    if not rows:
        return ["No prediction-powered estimate with this judge in this snapshot."]
    table = []
    for r in rows:
        few = r.get("too_few")
        figures = (
            [md_text(few), "too few", "too few", "too few"]
            if few
            else [
                _interval_text(r.get("estimate"), r.get("ci_low"), r.get("ci_high")),
                _interval_text(
                    r.get("human_only_estimate"),
                    r.get("human_only_ci_low"),
                    r.get("human_only_ci_high"),
                ),
                number(r.get("effective_n"), 0),
                number(r.get("lambda")),
            ]
        )
        table.append(
            [
                md_text(r.get("skill", "")),
                ACTIVE_METHOD if r.get("method") == "active" else "PPI++",
                number(r.get("n_labeled")),
                number(r.get("n_unlabeled")),
                *figures,
                number(r.get("judge_mean")),
            ]
        )
    return [
        "What people would say on average (the mean human score over all systems together),"
        " estimated from people's scores on the labeled responses corrected by this judge's"
        " scores on every response (PPI++, Angelopoulos, Duchi & Zrnic 2023): unbiased for"
        " what people would say however biased the judge, beside the people-only estimate on"
        " the labeled responses. 95 % normal-approximation intervals. n labeled: responses"
        " with a human score and the judge's; N unlabeled: the judge's other responses."
        " Effective n: how many human labels a people-only estimate would need for an"
        " interval as narrow. Judge alone: the judge's own mean, the answer without people.",
        "",
        *_table(
            [
                "skill",
                "method",
                "n labeled",
                "N unlabeled",
                "estimate [95 % CI]",
                "people only [95 % CI]",
                "effective n",
                "λ",
                "judge alone",
            ],
            table,
        ),
    ]


# --- the human ceiling and the trust figures as tables ------------------------------------------
#
# Each figure has a known shape (analytics.trust.figures, analytics.trust.probes,
# analytics.report): its table reads it with .get(), so a figure missing from an older
# snapshot shows "–". A figure whose shape is not one of these (a newer snapshot read by
# older code) falls back to nested lines, escaped like everything else.


def _by_skill(value: object, keys: Iterable[str] = ()) -> Mapping[str, Any] | None:
    """`value` if it is a mapping of skill name -> mapping (the trust figures' shape) in
    which, when `keys` are given, some skill has one of them; None otherwise (the caller
    then shows the figure as nested lines)."""
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        return None
    wanted = set(keys)
    if wanted and value and not any(wanted & set(v) for v in value.values()):
        return None
    return value


def _ceiling_lines(ceiling: Mapping[str, Any]) -> list[str]:
    skills = _by_skill(ceiling, ("krippendorff_alpha", "loo_ceiling", "n_raters"))
    if skills is None:
        return nested(ceiling)
    rows = []
    for skill, c in skills.items():
        alpha, alpha_ci = c.get("krippendorff_alpha") or {}, c.get("krippendorff_alpha_ci") or {}
        loo, loo_ci = c.get("loo_ceiling") or {}, c.get("loo_ceiling_ci") or {}
        pairwise = c.get("mean_pairwise_spearman") or {}
        row, alpha_name = _Row(), "krippendorff_alpha"
        rows.append(
            [
                md_text(skill),
                number(c.get("n_raters")),
                number(c.get("n_units")),
                row.figure(c, alpha_name, alpha.get("ordinal"), alpha_ci.get("ordinal")),
                row.figure(c, alpha_name, alpha.get("interval"), alpha_ci.get("interval")),
                row.figure(c, alpha_name, alpha.get("nominal")),
                row.figure(c, "loo_ceiling", loo.get("pearson"), loo_ci.get("pearson")),
                row.figure(c, "mean_pairwise_spearman", pairwise.get("value")),
            ]
        )
    return [
        "Agreement among people on the same responses: Krippendorff's alpha and the"
        " leave-one-annotator-out correlation (each annotator against the mean of the others).",
        "",
        *_table(
            [
                "skill",
                "raters",
                "responses",
                "α ordinal",
                "α interval",
                "α nominal",
                "leave-one-out Pearson",
                "mean pairwise Spearman",
            ],
            rows,
        ),
    ]


def _trust_lines(name: str, figure: object) -> list[str]:
    render = {
        "calibration": _calibration_lines,
        "strata": _strata_lines,
        "na": _na_lines,
        "stochasticity": _stochasticity_lines,
        "probes": _probe_lines,
    }.get(name)
    if render is not None:
        try:
            lines = render(figure)
        except (AttributeError, TypeError, ValueError, KeyError):
            lines = None
        if lines is not None:
            return lines
    return nested(figure)


def _calibration_lines(figure: object) -> list[str] | None:
    skills = _by_skill(figure, ("offset", "bland_altman", "isotonic", "confusion"))
    if skills is None:
        return None
    if not skills:
        return ["(none)"]
    rows = []
    for skill, c in skills.items():
        ba = c.get("bland_altman") or {}
        ba_ci = ba.get("ci") or {}
        iso = c.get("isotonic") or {}
        iso_ci = iso.get("ci") or {}
        row = _Row()
        limits = (
            f"{number(ba.get('loa_low'))} to {number(ba.get('loa_high'))}"
            if ba.get("loa_low") is not None
            else "–"
        )
        rows.append(
            [
                md_text(skill),
                number(c.get("n")),
                row.estimate(c, "offset", c.get("offset")),
                row.figure(c, "bland_altman", ba.get("bias"), ba_ci.get("bias")),
                row.too_few(c, "bland_altman") or limits,
                row.too_few(c, "isotonic")
                or f"{shown(iso.get('mae_before'), iso_ci.get('mae_before'))} →"
                f" {shown(iso.get('mae_after'), iso_ci.get('mae_after'))}",
                row.too_few(c, "isotonic")
                or f"{number(iso.get('exact_before'))} → {number(iso.get('exact_after'))}",
            ]
        )
    lines = [
        "Offset: mean of judge − people (positive: lenient). Bland–Altman: bias and 95 % limits"
        " of agreement. Isotonic: a monotone map judge → people fitted on other folds of items,"
        " its mean absolute error and exact agreement before → after.",
        "",
        *_table(
            [
                "skill",
                "n",
                "offset",
                "bias",
                "limits of agreement",
                "MAE before → after",
                "exact before → after",
            ],
            rows,
        ),
    ]
    for skill, c in skills.items():
        confusion = c.get("confusion") or {}
        labels, counts = confusion.get("labels"), confusion.get("counts")
        if not labels or not counts:
            continue
        heads = ["N/A" if label in (0, None) else number(label) for label in labels]
        lines += [
            "",
            f"Confusion, {md_text(skill)}: rows {md_text(confusion.get('rows', 'people'))},"
            f" columns {md_text(confusion.get('columns', 'judge'))} (counts of responses)",
            "",
            *_table(
                ["", *heads],
                [[heads[i], *(number(v) for v in row)] for i, row in enumerate(counts)],
            ),
        ]
    return lines


def _stratum_row(skill: str, stratum: str, group: Mapping[str, Any]) -> list[str]:
    ci = group.get("ci") or {}
    row = _Row()
    return [
        md_text(skill),
        stratum,
        md_text(group.get("group", "")),
        number(group.get("n")),
        number(group.get("items")),
        row.figure(group, "pearson", group.get("pearson"), ci.get("pearson")),
        row.figure(group, "spearman", group.get("spearman")),
        row.figure(group, "mae", group.get("mae"), ci.get("mae")),
    ]


def _strata_lines(figure: object) -> list[str] | None:
    skills = _by_skill(figure, ("all", "human_spread", "length", "domain", "difficulty"))
    if skills is None:
        return None
    if not skills:
        return ["(none)"]
    rows = []
    for skill, s in skills.items():
        if isinstance(s.get("all"), Mapping):
            rows.append(_stratum_row(skill, "all", {"group": "all", **s["all"]}))
        for stratum, label in (("human_spread", "people's spread"), ("length", "length")):
            for group in (s.get(stratum) or {}).get("groups") or []:
                rows.append(_stratum_row(skill, label, group))
        for stratum in ("domain", "difficulty"):
            for group in s.get(stratum) or []:
                rows.append(_stratum_row(skill, stratum, group))
    return [
        "Quality on parts of the data: terciles of the people's spread (SD) and of response"
        " length, and each domain and difficulty level (Spearman is a point estimate).",
        "",
        *_table(["skill", "by", "group", "n", "items", "Pearson", "Spearman", "MAE"], rows),
    ]


def _na_lines(figure: object) -> list[str] | None:
    skills = _by_skill(figure, ("people_rate", "judge_rate", "agreement", "kappa"))
    if skills is None:
        return None
    if not skills:
        return ["(none)"]
    rows = []
    for skill, f in skills.items():
        row = _Row()
        rows.append(
            [
                md_text(skill),
                number(f.get("responses")),
                row.figure(f, "people_rate", f.get("people_rate")),
                row.figure(f, "judge_rate", f.get("judge_rate")),
                row.figure(f, "agreement", f.get("agreement")),
                row.figure(f, "kappa", f.get("kappa"), f.get("kappa_ci")),
            ]
        )
    return [
        "How often people and the judge mark a skill N/A, and their agreement on whether it"
        " applies (share of responses, Cohen's κ).",
        "",
        *_table(
            ["skill", "responses", "people N/A rate", "judge N/A rate", "agreement", "κ"], rows
        ),
    ]


def _stochasticity_lines(figure: object) -> list[str] | None:
    skills = _by_skill(figure, ("judge", "people"))
    if skills is None:
        return None
    if not skills:
        return ["No judge run with several samples per response, and no hidden repeats."]
    rows = []
    for skill, s in skills.items():
        judge = s.get("judge") or {}
        people = s.get("people") or {}
        row = _Row()
        rows.append(
            [
                md_text(skill),
                number(judge.get("samples")),
                number(judge.get("responses")),
                row.figure(
                    judge,
                    "alpha",
                    (judge.get("alpha") or {}).get("ordinal"),
                    (judge.get("alpha_ci") or {}).get("ordinal"),
                ),
                row.figure(judge, "unanimous", judge.get("unanimous"), judge.get("unanimous_ci")),
                number(people.get("pairs")),
                row.figure(
                    people,
                    "alpha",
                    (people.get("alpha") or {}).get("ordinal"),
                    (people.get("alpha_ci") or {}).get("ordinal"),
                ),
                row.figure(people, "exact", people.get("exact"), people.get("exact_ci")),
            ]
        )
    return [
        "The judge's samples of one response as raters (α ordinal, share unanimous) beside"
        " people's hidden repeats (first score against the repeat).",
        "",
        *_table(
            [
                "skill",
                "samples",
                "responses",
                "judge α",
                "unanimous",
                "repeats",
                "people's retest α",
                "people exact",
            ],
            rows,
        ),
    ]


def _probe_lines(figure: object) -> list[str] | None:
    if figure is None:
        return ["No bias probe run for this judge."]
    if not isinstance(figure, Mapping):
        return None
    lines: list[str] = []
    runs = figure.get("runs") or []
    if runs:
        rows = []
        for run in runs:
            name = "flip_rate" if run.get("pairwise") else "effect"
            rows.append(
                [
                    number(run.get("run_id")),
                    md_text(run.get("label") or run.get("probe") or ""),
                    "flip rate" if run.get("pairwise") else "score change",
                    _Row().estimate(run, name, run.get(name)),
                    number(run.get("n")),
                    number(run.get("items")),
                    md_text(run.get("cost", "")),
                ]
            )
        lines += _table(["run", "probe", "effect", "value", "n", "items", "cost"], rows)
        for run in runs:
            texts = run.get("texts") or []
            if isinstance(texts, Mapping):
                texts = list(texts.values())
            for text in texts:
                lines += [
                    "",
                    f"Probe text of run {number(run.get('run_id'))}:",
                    "",
                    md_fenced(str(text)),
                ]
    length = figure.get("length")
    if isinstance(length, Mapping):
        n = length.get("n")
        lines += [
            "",
            f"- **length**: partial correlation of the judge's score with response length,"
            f" people's score held: {_Row().estimate(length, 'partial_r', length.get('partial_r'))}"
            f" (n = {number(n)})",
        ]
    own = figure.get("self_preference")
    if isinstance(own, Mapping):
        lines += [
            "",
            f"- **self-preference** (family {md_text(own.get('family', ''))}): judge − people"
            f" on its own family's responses minus on the others:"
            f" {_Row().estimate(own, 'difference', own.get('difference'))}"
            f" (n = {number(own.get('own'))} own, {number(own.get('other'))} other)",
        ]
    return lines or ["No bias probe run for this judge."]
