"""An evaluation card as Markdown (pure; no Django). Everything that comes from people or
models (judge, model, project, skill and dataset names, template text, trust figures' keys)
is escaped: inline text loses its line breaks and control characters and backslash-escapes
every character that can start markup in the middle of a line (CommonMark allows escaping
any ASCII punctuation): emphasis, code spans, links and images, raw HTML and autolinks in
angle brackets, entities, table cells and strikethrough (`ESCAPED`). Such text never starts
a line in the card, so the line-start markers (`#`, `-`, `+`, `1.`) need no escape. Template
text sits in a fenced block whose fence is longer than any run of backticks inside it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

ESCAPED = frozenset("\\`*_{}[]<>#|~!&")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029]")
_BACKTICKS = re.compile(r"`+")
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
#: Nested figures deeper than this are shown as JSON text (escaped).
MAX_DEPTH = 6


def md_escape(value: object) -> str:
    """`value` as inline Markdown text that renders as itself."""
    text = _CONTROL.sub(" ", str(value).replace("\r\n", " ").replace("\n", " ").replace("\t", " "))
    return "".join("\\" + ch if ch in ESCAPED else ch for ch in text)


def md_fenced(text: str) -> str:
    """`text` in a fenced code block that nothing inside can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = _CONTROL.sub(lambda m: "\n" if m.group() in "\u2028\u2029" else " ", text)
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
    return md_escape(value)


def interval(figure: Mapping[str, Any] | None) -> str:
    """ "[low, high]" of a report interval, "" where there is none."""
    if not figure:
        return ""
    low, high = figure.get("low"), figure.get("high")
    if low is None or high is None:
        return ""
    return f" [{low:.3f}, {high:.3f}]"


def _scalar(value: object) -> str:
    if isinstance(value, bool | int | float) or value is None:
        return number(value)
    return md_escape(value)


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def nested(value: object, depth: int = 0) -> list[str]:
    """Any JSON value as nested bullet lines (keys and strings escaped)."""
    pad = "  " * depth
    if depth >= MAX_DEPTH:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        return [f"{pad}- {md_escape(text)}"]
    lines: list[str] = []
    if isinstance(value, Mapping):
        if not value:
            return [f"{pad}- (none)"]
        for key, inner in value.items():
            if _is_scalar(inner):
                lines.append(f"{pad}- **{md_escape(key)}**: {_scalar(inner)}")
            elif isinstance(inner, list) and all(_is_scalar(v) for v in inner):
                shown = ", ".join(_scalar(v) for v in inner) or "(none)"
                lines.append(f"{pad}- **{md_escape(key)}**: {shown}")
            else:
                lines.append(f"{pad}- **{md_escape(key)}**:")
                lines.extend(nested(inner, depth + 1))
        return lines
    if isinstance(value, list):
        if not value:
            return [f"{pad}- (none)"]
        for n, inner in enumerate(value, 1):
            if _is_scalar(inner):
                lines.append(f"{pad}- {_scalar(inner)}")
            elif isinstance(inner, list) and all(_is_scalar(v) for v in inner):
                lines.append(f"{pad}- [{', '.join(_scalar(v) for v in inner)}]")
            else:
                lines.append(f"{pad}- {n}:")
                lines.extend(nested(inner, depth + 1))
        return lines
    return [f"{pad}- {_scalar(value)}"]


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def card_markdown(card: Mapping[str, Any]) -> str:
    """The card (analytics.cards.selectors.card_build) as a Markdown document."""
    out: list[str] = []
    snap = card["snapshot"]
    out.append(
        f"# Evaluation card: {md_escape(card['judge'])} on {md_escape(card['project']['name'])}"
    )
    out.append("")
    out.append(
        f"Built from report snapshot {snap['id']} of project {md_escape(card['project']['slug'])}"
        f" (computed {snap['finished_at'] or '?'}, scores read as of"
        f" {snap['as_of'] or '?'}). The same snapshot gives the same card."
    )
    out.append("")
    out.append(f"Snapshot params: {md_escape(json.dumps(snap['params'], sort_keys=True))}")
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
                    [md_escape(key), md_escape(value)]
                    if isinstance(value, str)
                    else [md_escape(key), md_escape(json.dumps(value, sort_keys=True))]
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
            f"Template {md_escape(template['name'])}: key {md_escape(template['key'])},"
            f" version {template['version']}, content hash `{template['content_hash']}`,"
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
        f"- **dataset hash**: `{data['dataset_hash']}` ({md_escape(data['hash_definition'])})"
    )
    if data.get("source"):
        out.append(f"- **read from**: {md_escape(data['source'])}")
    out.append(f"- **datasets**: {', '.join(md_escape(d) for d in data['datasets']) or '(none)'}")
    out.append(f"- **items**: {data['items']}")
    out.append(f"- **responses**: {data['responses']}")
    out.append(f"- **models**: {', '.join(md_escape(m) for m in data['models']) or '(none)'}")
    out.append("")

    out.append("## Rubric versions")
    out.append("")
    if card["rubrics"]:
        out.extend(
            _table(
                ["skill", "version", "source"],
                [
                    [md_escape(skill), number(r["version"]), md_escape(r["source"])]
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
        f" {cost['total']} over {len(card['runs'])} run(s),"
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
                        md_escape(run["dataset"]),
                        run["finished_at"] or "–",
                        str(run["judgments"]),
                        run["cost"],
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
            row = [
                md_escape(skill),
                number(figures.get("n")),
                number(figures.get("pearson")) + interval(ci.get("pearson")),
                number(figures.get("spearman")) + interval(ci.get("spearman")),
                number(figures.get("kendall")) + interval(ci.get("kendall")),
            ]
            if level == "instance":
                human = ceiling.get(skill) or {}
                loo = human.get("loo_ceiling") or {}
                loo_ci = human.get("loo_ceiling_ci") or {}
                row.append(number(loo.get("pearson")) + interval(loo_ci.get("pearson")))
                row.append(number(loo.get("spearman")) + interval(loo_ci.get("spearman")))
            rows.append(row)
        if not rows:
            continue
        header = ["skill", "n", "Pearson", "Spearman", "Kendall τ-b"]
        if level == "instance":
            header += ["human ceiling Pearson", "human ceiling Spearman"]
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
            out.append(f"### {TRUST_TITLES.get(name) or md_escape(name)}")
            out.append("")
            out.extend(_trust_lines(name, trust[name]))
            out.append("")

    out.append("## Known limitations")
    out.append("")
    if card["limitations"]:
        out.extend(f"- {md_escape(text)}" for text in card["limitations"])
    else:
        out.append("None found in the data.")
    out.append("")
    return "\n".join(out)


# --- the human ceiling and the trust figures as tables ------------------------------------------
#
# Each figure has a known shape (analytics.trust.figures, analytics.trust.probes,
# analytics.report): its table reads it with .get(), so a figure missing from an older
# snapshot shows "–". A figure whose shape is not one of these (a newer snapshot read by
# older code) falls back to nested lines, escaped like everything else.


def _ci(figure: Mapping[str, Any] | None) -> str:
    """An interval figure {estimate, low, high} as "estimate [low, high]"."""
    if not isinstance(figure, Mapping):
        return number(figure)
    return number(figure.get("estimate")) + interval(figure)


def _with_ci(value: object, figure: object) -> str:
    return number(value) + (interval(figure) if isinstance(figure, Mapping) else "")


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
        rows.append(
            [
                md_escape(skill),
                number(c.get("n_raters")),
                number(c.get("n_units")),
                _with_ci(alpha.get("ordinal"), alpha_ci.get("ordinal")),
                _with_ci(alpha.get("interval"), alpha_ci.get("interval")),
                number(alpha.get("nominal")),
                _with_ci(loo.get("pearson"), loo_ci.get("pearson")),
                number(pairwise.get("value")),
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
        limits = (
            f"{number(ba.get('loa_low'))} to {number(ba.get('loa_high'))}"
            if ba.get("loa_low") is not None
            else "–"
        )
        rows.append(
            [
                md_escape(skill),
                number(c.get("n")),
                _ci(c.get("offset")),
                _with_ci(ba.get("bias"), ba_ci.get("bias")),
                limits,
                f"{_with_ci(iso.get('mae_before'), iso_ci.get('mae_before'))} →"
                f" {_with_ci(iso.get('mae_after'), iso_ci.get('mae_after'))}",
                f"{number(iso.get('exact_before'))} → {number(iso.get('exact_after'))}",
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
        shown = ["N/A" if label in (0, None) else number(label) for label in labels]
        lines += [
            "",
            f"Confusion, {md_escape(skill)}: rows {md_escape(confusion.get('rows', 'people'))},"
            f" columns {md_escape(confusion.get('columns', 'judge'))}",
            "",
            *_table(
                ["", *shown],
                [[shown[i], *(number(v) for v in row)] for i, row in enumerate(counts)],
            ),
        ]
    return lines


def _stratum_row(skill: str, stratum: str, group: Mapping[str, Any]) -> list[str]:
    ci = group.get("ci") or {}
    return [
        md_escape(skill),
        stratum,
        md_escape(group.get("group", "")),
        number(group.get("n")),
        number(group.get("items")),
        _with_ci(group.get("pearson"), ci.get("pearson")),
        number(group.get("spearman")),
        _with_ci(group.get("mae"), ci.get("mae")),
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
    rows = [
        [
            md_escape(skill),
            number(n.get("responses")),
            number(n.get("people_rate")),
            number(n.get("judge_rate")),
            number(n.get("agreement")),
            _with_ci(n.get("kappa"), n.get("kappa_ci")),
        ]
        for skill, n in skills.items()
    ]
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
        rows.append(
            [
                md_escape(skill),
                number(judge.get("samples")),
                number(judge.get("responses")),
                _with_ci(
                    (judge.get("alpha") or {}).get("ordinal"),
                    (judge.get("alpha_ci") or {}).get("ordinal"),
                ),
                _with_ci(judge.get("unanimous"), judge.get("unanimous_ci")),
                number(people.get("pairs")),
                _with_ci(
                    (people.get("alpha") or {}).get("ordinal"),
                    (people.get("alpha_ci") or {}).get("ordinal"),
                ),
                _with_ci(people.get("exact"), people.get("exact_ci")),
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
            effect = run.get("flip_rate") if run.get("pairwise") else run.get("effect")
            rows.append(
                [
                    number(run.get("run_id")),
                    md_escape(run.get("label") or run.get("probe") or ""),
                    "flip rate" if run.get("pairwise") else "score change",
                    _ci(effect),
                    number(run.get("n")),
                    number(run.get("items")),
                    md_escape(run.get("cost", "")),
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
        lines += [
            "",
            f"- **length**: partial correlation of the judge's score with response length,"
            f" people's score held: {_ci(length.get('partial_r'))} (n = {number(length.get('n'))})",
        ]
    own = figure.get("self_preference")
    if isinstance(own, Mapping):
        lines += [
            "",
            f"- **self-preference** (family {md_escape(own.get('family', ''))}): judge − people"
            f" on its own family's responses minus on the others: {_ci(own.get('difference'))}"
            f" ({number(own.get('own'))} own, {number(own.get('other'))} other)",
        ]
    return lines or ["No bias probe run for this judge."]
