"""The prediction-powered estimates on the pages researchers read: the dashboard's section (a
table per skill of one judge, the interval plot, paired differences, ranks), the judge trust
page ("what people would say, estimated with this judge") and the evaluation card (JSON and
Markdown). Figures come from report snapshots whose rows are written here by hand in the
report's shape (docs/PREDICTION_POWERED.md), and once from a real project's report; every
figure shows its n, a row on too few labeled responses says so with the reason, and names
from the data stay text."""

from __future__ import annotations

import json
import zlib

import pytest
from django.urls import reverse

from analytics.cards import selectors as card_selectors
from analytics.cards.markdown import card_markdown, prediction_powered_lines
from analytics.models import SnapshotPart
from analytics.report import chart_data, parts, snapshots
from tests.analytics.snapshot_worker import compute_pending
from tests.analytics.test_cards import report_of, seed_snapshot
from tests.analytics.test_dashboard import Tables, import_scores, score_lines, section

XSS = "<img src=x onerror=alert(1)>"
EVIL_JUDGE = "</script><script>alert(2)</script>"
FEW = "too few: n = 6 (at least 10 labeled responses)"
FEW_ITEMS = "too few: n = 4 (at least 10 labeled items)"


def row(
    judge: str,
    skill: str,
    system: str | None,
    *,
    estimate: float | None = 3.5,
    half: float = 0.1,
    human_half: float = 0.2,
    n: int = 40,
    unlabeled: int = 400,
    method: str = "ppi++",
    judge_mean: float | None = 3.9,
    effective_n: float | None = 212.4,
    lam: float | None = 0.734,
    n_human_na: int = 0,
    too_few: str | None = None,
) -> dict:
    """A row of report["prediction_powered"]: intervals estimate +- half (people only:
    estimate - 0.05 +- human_half)."""
    human = None if estimate is None else estimate - 0.05
    return {
        "judge": judge,
        "skill": skill,
        "system": system,
        "method": method,
        "estimate": estimate,
        "ci_low": None if estimate is None else estimate - half,
        "ci_high": None if estimate is None else estimate + half,
        "se": None if estimate is None else half / 1.959964,
        "human_only_estimate": human,
        "human_only_ci_low": None if human is None else human - human_half,
        "human_only_ci_high": None if human is None else human + human_half,
        "lambda": lam,
        "n_labeled": n,
        "n_unlabeled": unlabeled,
        "effective_n": effective_n,
        "judge_mean": judge_mean,
        "width_ratio": half / human_half,
        "n_human_na": n_human_na,
        "too_few": too_few,
    }


def difference(judge: str, skill: str, a: str, b: str, estimate: float, half: float, **kw) -> dict:
    return {
        "judge": judge,
        "skill": skill,
        "system_a": a,
        "system_b": b,
        "method": "ppi++",
        "estimate": estimate,
        "ci_low": estimate - half,
        "ci_high": estimate + half,
        "human_only_estimate": estimate,
        "human_only_ci_low": estimate - 2 * half,
        "human_only_ci_high": estimate + 2 * half,
        "lambda": 0.5,
        "n_labeled": kw.get("n", 30),
        "n_unlabeled": 300,
        "effective_n": 120.0,
        "too_few": kw.get("too_few"),
    }


def ranks(judge: str, skill: str, systems: list[tuple[str, float, int, int, int, list]]) -> dict:
    return {
        "judge": judge,
        "skill": skill,
        "n_draws": 4000,
        "differences": "all",
        "left_out": [],
        "systems": [
            {
                "system": name,
                "estimate": est,
                "rank": rank,
                "rank_low": low,
                "rank_high": high,
                "rank_probabilities": probs,
            }
            for name, est, rank, low, high, probs in systems
        ],
    }


def figures(judge: str = "J") -> dict:
    """Two skills of judge `judge`: Readability on three systems (one of them too few, one
    with a hostile name, the judge lenient), Factuality by active selection."""
    return {
        "prediction_powered": [
            row(judge, "Readability", None, estimate=3.5, judge_mean=3.9, n=80, n_human_na=3),
            row(judge, "Readability", "sys-a", estimate=3.8, judge_mean=4.1),
            row(judge, "Readability", XSS, estimate=3.2, judge_mean=3.25),
            row(judge, "Readability", "sys-c", estimate=3.6, n=6, too_few=FEW),
            row(judge, "Factuality", None, method="active", estimate=2.5, judge_mean=2.0),
        ],
        "prediction_powered_differences": [
            difference(judge, "Readability", "sys-a", XSS, 0.6, 0.2),
            difference(judge, "Readability", "sys-a", "sys-c", 0.2, 0.3),
            difference(judge, "Readability", XSS, "sys-c", -0.4, 0.1, n=4, too_few=FEW_ITEMS),
        ],
        "prediction_powered_ranks": [
            ranks(
                judge,
                "Readability",
                [
                    ("sys-a", 3.8, 1, 1, 2, [0.9, 0.1, 0.0]),
                    ("sys-c", 3.6, 2, 1, 3, [0.1, 0.8, 0.1]),
                    (XSS, 3.2, 3, 3, 3, [0.0, 0.1, 0.9]),
                ],
            )
        ],
    }


def seed(project, report: dict, *, with_parts: bool = True):
    """A done default snapshot of `report` with the parts the pages read (as the worker
    stores them: analytics.report.parts)."""
    snapshot = seed_snapshot(project, report)
    stored = {
        **parts.trust_parts(report),
        "summary": {"has_rows": True, "skills": [], "judges": [], "resamples": 1000},
    }
    if with_parts:
        stored.update(parts.prediction_powered_parts(report))
    for name, value in stored.items():
        text = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
        SnapshotPart.objects.create(
            snapshot=snapshot, name=name, data=zlib.compress(text), size_bytes=len(text)
        )
    return snapshot


def hand_report(judges=("J",)) -> dict:
    report = report_of(list(judges), trust={j: {} for j in judges})
    for key in ("prediction_powered", "prediction_powered_differences", "prediction_powered_ranks"):
        report[key] = [entry for judge in judges for entry in figures(judge)[key]]
    return report


# --- laid out for the pages (pure) -------------------------------------------------------------


def test_the_parts_hold_one_judges_figures_each():
    report = hand_report(judges=("J", EVIL_JUDGE))

    stored = parts.prediction_powered_parts(report)

    assert stored[parts.PREDICTION_POWERED_JUDGES] == sorted(["J", EVIL_JUDGE])
    first = stored[parts.prediction_powered_part(0)]
    assert first["judge"] == EVIL_JUDGE  # "<" sorts before "J"
    assert first["rows"] == figures(EVIL_JUDGE)["prediction_powered"]
    assert first["differences"] == figures(EVIL_JUDGE)["prediction_powered_differences"]
    assert first["ranks"] == figures(EVIL_JUDGE)["prediction_powered_ranks"]
    assert parts.prediction_powered_parts({}) == {parts.PREDICTION_POWERED_JUDGES: []}


def test_the_skills_are_laid_out_all_systems_first_with_the_clear_differences_first():
    stored = parts.prediction_powered_parts(hand_report())[parts.prediction_powered_part(0)]

    readability, factuality = chart_data.prediction_powered_skills(stored)

    assert [r["label"] for r in readability["rows"]] == ["All systems", "sys-a", XSS, "sys-c"]
    everything, a, hostile, c = readability["rows"]
    assert everything["shown"] and everything["all"] and not everything["active"]
    # the judge alone says 3.9, people would say 3.5 [3.4, 3.6]: 0.4 lenient, outside
    assert everything["bias"] == pytest.approx(0.4) and everything["bias_outside"]
    # 3.25 against 3.2 [3.1, 3.3]: inside the interval
    assert hostile["bias"] == pytest.approx(0.05) and not hostile["bias_outside"]
    assert c["too_few"] == FEW and not c["shown"] and not c["human_shown"]
    assert [(d["system_a"], d["system_b"], d["clear"]) for d in readability["differences"]] == [
        ("sys-a", XSS, "a"),  # 0.6 +- 0.2 excludes 0
        ("sys-a", "sys-c", ""),  # 0.2 +- 0.3 includes it
        (XSS, "sys-c", ""),  # too few: never clear
    ]
    assert readability["clear"] == 1
    ranked = readability["ranks"]["systems"]
    assert [(s["system"], s["p_first"], s["too_few"]) for s in ranked] == [
        ("sys-a", 0.9, ""),
        ("sys-c", 0.1, FEW),  # its estimate is too few: the rank stays, flagged
        (XSS, 0.0, ""),
    ]
    assert ranked[1]["probabilities"] == [
        {"rank": 1, "p": 0.1},
        {"rank": 2, "p": 0.8},
        {"rank": 3, "p": 0.1},
    ]
    assert factuality["active"] and factuality["rows"][0]["method_label"] == (
        "active selection (inverse-probability weighted)"
    )
    # the judge says 2.0, people 2.5 [2.4, 2.6]: strict by 0.5
    assert factuality["rows"][0]["bias"] == pytest.approx(-0.5)
    assert factuality["ranks"] is None and factuality["differences"] == []


def test_the_interval_plot_by_hand():
    # Values drawn: 3.5 [3.4, 3.6] and people 3.45 [3.25, 3.65]; 2.5 alone would widen it,
    # so one skill: the span is 3.25 to 3.65 (0.4), padded by 5 % (0.02) on both sides:
    # x(v) = 14 + (v - 3.23) / 0.44 * 452
    rows = [chart_data._ppi_row(row("J", "S", None, estimate=3.5))]

    plot = chart_data.prediction_powered_plot(rows)

    assert plot is not None
    [drawn] = plot["rows"]
    # 14 + 0.27 / 0.44 * 452 = 291.36; 0.17 -> 188.64; 0.37 -> 394.09; people: 0.22 -> 240,
    # 0.02 -> 34.55, 0.42 -> 445.45 (to one decimal)
    assert drawn["ppi"] == pytest.approx({"x": 291.4, "low": 188.6, "high": 394.1}, abs=0.06)
    assert drawn["human"] == pytest.approx({"x": 240.0, "low": 34.5, "high": 445.5}, abs=0.06)
    # ticks: a step of 0.1 (0.44 / 5 = 0.088, rounded up to 1 x 0.1) from 3.3 to 3.6
    assert [t["label"] for t in plot["ticks"]] == ["3.3", "3.4", "3.5", "3.6"]
    assert plot["ticks"][0]["x"] == round(14 + (3.3 - 3.23) / 0.44 * 452, 1)


def test_a_plot_leaves_out_rows_on_too_few_and_is_none_with_nothing_to_draw():
    few = chart_data._ppi_row(row("J", "S", "b", estimate=9.0, too_few=FEW))
    shown = chart_data._ppi_row(row("J", "S", "a", estimate=3.0, half=0.5, human_half=0.5))

    plot = chart_data.prediction_powered_plot([shown, few])

    assert plot is not None
    assert plot["rows"][1] == {
        "label": "b",
        "all": False,
        "too_few": FEW,
        "estimate": None,
        "ppi": None,
        "human": None,
    }
    assert max(t["x"] for t in plot["ticks"]) <= plot["right"]  # 9.0 did not stretch the axis
    assert chart_data.prediction_powered_plot([few]) is None


@pytest.mark.parametrize(
    ("span", "step"), [(0.44, 0.1), (4.0, 1.0), (0.01, 0.002), (1.2, 0.25), (0.0, 1.0)]
)
def test_tick_steps_are_round(span, step):
    # span / 5 rounded up to 1, 2, 2.5, 5 or 10 times a power of ten (0: a span of 1)
    assert chart_data._tick_step(span) == pytest.approx(step)


# --- the dashboard ----------------------------------------------------------------------------


def section_url(project) -> str:
    return reverse("analytics:report-section", args=[project.slug, "prediction_powered"])


@pytest.mark.django_db
def test_the_section_shows_each_row_with_its_n_and_too_few_with_the_reason(
    project, researcher_client
):
    # given
    seed(project, hand_report())

    # when
    html = section(researcher_client, project, "prediction_powered").content.decode()

    # then: Readability, all systems first; n labeled / N unlabeled beside every figure
    assert "<html" not in html
    tables = Tables(html).tables
    assert tables["ppi-1"][0] == [
        "System",
        "n labeled / N unlabeled",
        "Prediction-powered",
        "People only",
        "Effective n",
        "λ",
    ]
    body = {r[0]: r[1:] for r in tables["ppi-1"][1:]}
    assert list(body) == ["All systems", "sys-a", XSS, "sys-c"]
    assert body["All systems"] == [
        "80 / 400 3 all N/A, left out",
        "3.500 [3.400, 3.600]",
        "3.450 [3.250, 3.650]",
        "worth 212 labels",
        "0.734",
    ]
    assert body["sys-c"] == ["6 / 400", "too few n = 6 (at least 10 labeled responses)"]
    # Factuality: active selection says so in its own column
    assert tables["ppi-2"][0][1] == "Method"
    assert tables["ppi-2"][1][:2] == [
        "All systems",
        "active selection (inverse-probability weighted)",
    ]
    # the interval plot: a row per system, the one on too few data not drawn
    assert html.count('class="ppi-row') == 4 + 1 + 2  # rows, axis; Factuality: row, axis
    assert html.count('class="dot ppi"') == 3 + 1
    assert "too few: n = 6 (at least 10 labeled responses)</span>" in html
    # differences: the clear one first, said in words; one too few
    diffs = tables["ppi-differences-1"][1:]
    assert diffs[0][0:2] == ["sys-a", XSS]
    assert diffs[0][-1] == "A higher: the interval excludes 0"
    assert diffs[1][-1] == "no clear difference: the interval includes 0"
    assert diffs[2][3:] == ["too few n = 4 (at least 10 labeled items)", "—"]
    assert "1</strong> with an interval that excludes 0" in html
    # ranks: rank interval, P(rank 1), every probability; the too-few one greyed
    ranked = tables["ppi-ranks-1"][1:]
    assert ranked[0] == ["sys-a", "3.800", "1", "1–2", "0.900", "1: 0.90 · 2: 0.10 · 3: 0.00"]
    assert ranked[1][1] == "3.600 too few: n = 6 (at least 10 labeled responses)"
    assert ranked[2][3] == "3"  # an interval of one rank
    # names from the data are text
    assert XSS not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.django_db
def test_the_section_shows_one_judge_at_a_time_and_names_stay_text(project, researcher_client):
    # given
    report = hand_report(judges=("J", EVIL_JUDGE))
    report["prediction_powered"] = [
        r if r["judge"] == "J" else {**r, "estimate": r["estimate"] and r["estimate"] - 1}
        for r in report["prediction_powered"]
    ]
    seed(project, report)

    # when
    first = section(researcher_client, project, "prediction_powered").content.decode()
    chosen = section(
        researcher_client, project, "prediction_powered", {"ppi_judge": "J"}
    ).content.decode()
    unknown = section(
        researcher_client, project, "prediction_powered", {"ppi_judge": "nobody"}
    ).content.decode()

    # then: the first by name (the hostile one), as text, and its chooser
    assert EVIL_JUDGE not in first
    assert "data-ppi-judge-shown>&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;<" in first
    assert 'name="ppi_judge"' in first and "2 judges, one at a time." in first
    assert Tables(first).tables["ppi-1"][1][2].startswith("2.500 ")
    assert Tables(chosen).tables["ppi-1"][1][2].startswith("3.500 ")
    assert "data-ppi-judge-shown>J<" in chosen
    assert Tables(unknown).tables["ppi-1"][1][2].startswith("2.500 ")


@pytest.mark.django_db
def test_a_report_made_before_the_estimates_says_to_refresh_it(project, researcher_client):
    seed(project, report_of(["J"], trust={"J": {}}), with_parts=False)

    html = section(researcher_client, project, "prediction_powered").content.decode()

    assert "data-ppi-missing" in html and "refresh it" in html


@pytest.mark.django_db
def test_a_report_without_estimates_says_what_they_need(project, researcher_client):
    seed(project, report_of(["J"], trust={"J": {}}))  # no prediction_powered rows

    html = section(researcher_client, project, "prediction_powered").content.decode()

    assert "data-ppi-empty" in html


@pytest.mark.django_db
def test_inline_sections_include_the_estimates(project, researcher_client):
    seed(project, hand_report())

    page = researcher_client.get(
        reverse("analytics:dashboard", args=[project.slug]), {"inline": "1"}
    )

    html = page.content.decode()
    assert 'id="prediction_powered-title">Prediction-powered estimates<' in html
    assert "ppi-1" in Tables(html).tables


# --- the trust page ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_trust_page_says_what_people_would_say_and_the_judges_bias(project, researcher_client):
    # given
    seed(project, hand_report(judges=("J", EVIL_JUDGE)))

    # when
    page = researcher_client.get(
        reverse("analytics:trust", args=[project.slug]), {"trust_judge": "J"}
    )

    # then
    html = page.content.decode()
    assert "What people would say, estimated with this judge" in html
    tables = Tables(html).tables
    body = {r[0]: r[1:] for r in tables["trust-ppi-1"][1:]}
    assert body["All systems"] == [
        "80 / 400 3 all N/A, left out",
        "3.500 [3.400, 3.600]",
        "3.900",
        "scores 0.400 higher than people would: outside the interval",
        "0.50 ×",
        "worth 212 labels from 80",
    ]
    assert body[XSS][3] == "scores 0.050 higher than people would, within the interval"
    assert body["sys-c"] == ["6 / 400", "too few n = 6 (at least 10 labeled responses)"]
    factuality = tables["trust-ppi-2"][1]
    assert factuality[0] == "All systems active selection (inverse-probability weighted)"
    assert factuality[4] == "scores 0.500 lower than people would: outside the interval"
    assert XSS not in html and EVIL_JUDGE not in html


@pytest.mark.django_db
def test_the_trust_page_of_a_report_made_before_the_estimates_says_so(project, researcher_client):
    seed(project, report_of(["J"], trust={"J": {}}), with_parts=False)

    page = researcher_client.get(
        reverse("analytics:trust", args=[project.slug]), {"trust_judge": "J"}
    )

    assert "data-ppi-missing" in page.content.decode()


# --- the evaluation card ----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_card_carries_the_judges_all_systems_rows(project, researcher_client):
    # given
    snapshot = seed(project, hand_report(judges=("J", EVIL_JUDGE)))

    # when
    card = card_selectors.card_build(project=project, snapshot=snapshot, judge="J")
    response = researcher_client.get(
        reverse("analytics:judge-card-json", args=[project.slug, snapshot.pk]), {"judge": "J"}
    )
    markdown = card_markdown(card)

    # then: one row per skill, all systems together, as the report holds it
    assert (
        card is not None
        and json.loads(response.content)["prediction_powered"] == (card["prediction_powered"])
    )
    assert [(r["skill"], r["method"]) for r in card["prediction_powered"]] == [
        ("Readability", "ppi++"),
        ("Factuality", "active"),
    ]
    expected = dict(figures("J")["prediction_powered"][0])
    del expected["judge"], expected["system"]
    assert card["prediction_powered"][0] == expected
    assert (
        "Readability: the judge alone says 3.90 on average, outside the interval of what"
        " people would say (3.40 to 3.60): read its scores as biased there."
    ) in card["limitations"]
    assert "## Prediction-powered estimates" in markdown
    lines = markdown.splitlines()
    assert (
        "| Readability | PPI++ | 80 | 400 | 3.500 [3.400, 3.600] | 3.450 [3.250, 3.650]"
        " | 212 | 0.734 | 3.900 |"
    ) in lines
    assert (
        "| Factuality | active selection (inverse-probability weighted) | 40 | 400"
        " | 2.500 [2.400, 2.600] | 2.450 [2.250, 2.650] | 212 | 0.734 | 2.000 |"
    ) in lines


def test_the_markdown_says_too_few_with_the_reason_and_escapes_names():
    rows = [
        {**row("J", "*bold* | <b>x</b>", None, n=6, too_few=FEW), "judge": None},
    ]

    lines = prediction_powered_lines(rows)

    assert lines[-1] == (
        "| \\*bold\\* \\| \\<b>x\\</b> | PPI++ | 6 | 400 | too few: n = 6 (at least 10 labeled"
        " responses) | too few | too few | too few | 3.900 |"
    )
    assert prediction_powered_lines(None) == [
        "This snapshot holds no prediction-powered estimates (it was computed before they existed)."
    ]
    assert prediction_powered_lines([]) == [
        "No prediction-powered estimate with this judge in this snapshot."
    ]


@pytest.mark.django_db
def test_a_card_from_a_report_made_before_the_estimates_says_so(project):
    snapshot = seed(project, report_of(["J"]), with_parts=False)

    card = card_selectors.card_build(project=project, snapshot=snapshot, judge="J")

    assert card is not None and card["prediction_powered"] is None
    assert "This snapshot holds no prediction-powered estimates" in card_markdown(card)


# --- from a real report -----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_real_projects_report_renders_on_the_dashboard_the_trust_page_and_the_card(
    project, researcher_client
):
    # given: two judges score 2 systems' answers to 30 items, two people those to 12 of them
    lines = score_lines(items=30).decode().splitlines()
    kept = [
        line
        for line in lines
        if '"rater_kind": "judge"' in line or int(json.loads(line)["item"][1:]) < 12
    ]
    import_scores(project, ("\n".join(kept) + "\n").encode())
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    [done] = compute_pending()
    report = snapshots.snapshot_part(done, "report")
    rows = [r for r in report["prediction_powered"] if r["judge"] == "judge-x"]
    assert rows and all(r["too_few"] is None for r in rows)  # 24 and 12 labeled responses
    assert {(r["n_labeled"], r["n_unlabeled"]) for r in rows} == {(24, 36), (12, 18)}
    assert any(r["lambda"] > 0 for r in rows)  # the judge's scores are used

    # when
    html = section(researcher_client, project, "prediction_powered").content.decode()
    trust = researcher_client.get(
        reverse("analytics:trust", args=[project.slug]), {"trust_judge": "judge-x"}
    ).content.decode()
    card = card_selectors.card_build(project=project, snapshot=done, judge="judge-x")

    # then: every row of the first judge by name, each skill's table all systems first
    tables = Tables(html).tables
    skills = list(dict.fromkeys(r["skill"] for r in rows))
    assert len(skills) == 3
    for k, skill in enumerate(skills, start=1):
        expected = [r for r in rows if r["skill"] == skill]
        shown = tables[f"ppi-{k}"][1:]
        assert [r[0] for r in shown] == ["All systems", "sys-a", "sys-b"]
        for found, r in zip(shown, expected, strict=True):
            assert found[1:] == [
                f"{r['n_labeled']} / {r['n_unlabeled']}",
                f"{r['estimate']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
                f"{r['human_only_estimate']:.3f}"
                f" [{r['human_only_ci_low']:.3f}, {r['human_only_ci_high']:.3f}]",
                f"worth {r['effective_n']:.0f} labels",
                f"{r['lambda']:.3f}",
            ]
        assert f"ppi-ranks-{k}" in tables and f"ppi-differences-{k}" in tables
    trusted = Tables(trust).tables
    assert [len(trusted[f"trust-ppi-{k}"]) for k in (1, 2, 3)] == [1 + 3] * 3
    assert card is not None
    assert card["prediction_powered"] == [
        {k: v for k, v in r.items() if k not in ("judge", "system")}
        for r in rows
        if r["system"] is None
    ]
