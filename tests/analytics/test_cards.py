"""The judge leaderboard across projects and the evaluation cards (analytics/cards/): both
read stored report snapshots only; a user sees only the projects they are a researcher or an
admin of; a card copies the snapshot's figures, names the snapshot, hashes its data the
documented way, escapes every name and text, and is the same bytes when built again."""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from datetime import timedelta
from decimal import Decimal
from html import unescape
from unittest import mock

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from markdown_it import MarkdownIt

from analytics.cards import selectors
from analytics.cards.markdown import card_markdown, md_code, md_fenced, md_heading, md_text
from analytics.cards.views import card_document
from analytics.minimums import too_few
from analytics.models import ReportSnapshot, SnapshotPart, SnapshotStatus
from analytics.report import snapshots
from analytics.report.parts import leaderboard_part
from analytics.report.snapshots import (
    params_are_default,
    report_snapshot_compute,
    snapshot_key,
    snapshot_params,
    snapshot_request,
)
from annotation.models import ProjectRole, Response
from annotation.services.projects import membership_set, project_create
from judging.fingerprints import judge_fingerprint
from judging.models import JudgeConfig, JudgeKind, JudgeRun, RunStatus
from judging.services import (
    judge_config_create,
    judge_response,
    judge_run_create,
    judge_run_start,
    prompt_template_create,
)
from tests.analytics.test_report import scored_project  # noqa: F401 (fixture)
from tests.annotation.test_campaign_selectors import make_dataset
from tests.clients import token_client
from tests.judging.providers import llm_fields

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script> | `x` [a](javascript:alert(2)) *b* _c_ # d"
HOSTILE_MODEL = "evil`model<img src=x onerror=alert(3)>"
TEMPLATE = "Score {skills}.\n```\n</script> ```` still text\n```\n{instruction}\n{response}"


# --- seeding ----------------------------------------------------------------------------------


def _figures(pearson: float, low: float, high: float, n: int) -> dict:
    return {
        "n": n,
        "pearson": pearson,
        "spearman": pearson / 2,
        "kendall": pearson / 3,
        "mae": 0.75,
        "exact": 0.5,
        "within_one": 0.9,
        "ci": {
            "pearson": {"estimate": pearson, "low": low, "high": high},
            "spearman": {"estimate": pearson / 2, "low": low / 2, "high": high / 2},
        },
    }


def report_of(
    judges: list[str], *, trust: dict | None = None, skills=("Factuality",), n: int = 6
) -> dict:
    """A report as the snapshot worker stores it, with figures chosen by hand (`n`
    responses scored by the judge and people, and by two people or more)."""
    report: dict = {
        "project": "x",
        "resamples": 1000,
        "agreement": {
            skill: {
                "n_units": n,
                "n_raters": 3,
                "loo_ceiling": {
                    "pearson": 0.7123456,
                    "spearman": 0.65,
                    "annotators": 3,
                    "units": n,
                },
                "loo_ceiling_ci": {
                    "pearson": {"estimate": 0.7123456, "low": 0.51, "high": 0.83},
                    "spearman": {"estimate": 0.65, "low": 0.4, "high": 0.8},
                },
                "krippendorff_alpha": {"interval": 0.61, "ordinal": 0.6, "nominal": 0.4},
            }
            for skill in skills
        },
        "correlation": {
            judge: {
                skill: {
                    "instance": _figures(0.123456789 + i / 10, -0.41, 0.66, n),
                    "item": {"pearson": 0.2, "spearman": 0.1, "kendall": 0.1, "n": 3},
                    "system": {"pearson": 1.0, "spearman": 1.0, "kendall": 1.0, "n": 2},
                }
                for skill in skills
            }
            for i, judge in enumerate(judges)
        },
        "leaderboard": {},
    }
    if trust is not None:
        report["trust"] = trust
    return report


def seed_snapshot(project, report: dict, *, params=None, as_of=None) -> ReportSnapshot:
    """A done snapshot holding `report` (as report_snapshot_compute stores it)."""
    params = snapshot_params() if params is None else params
    as_of = as_of or timezone.now()
    snapshot = ReportSnapshot.objects.create(
        project=project,
        key=snapshot_key(params),
        params=params,
        is_default=params_are_default(params),
        status=SnapshotStatus.DONE,
        progress=1.0,
        phase="done",
        started_at=as_of,
        finished_at=as_of + timedelta(seconds=2),
        watermark={"as_of": as_of.isoformat()},
    )
    text = json.dumps(report, separators=(",", ":")).encode()
    SnapshotPart.objects.create(
        snapshot=snapshot, name="report", data=zlib.compress(text), size_bytes=len(text)
    )
    small = json.dumps(leaderboard_part(report)).encode()
    SnapshotPart.objects.create(
        snapshot=snapshot, name="leaderboard", data=zlib.compress(small), size_bytes=len(small)
    )
    return snapshot


def baseline_run(judge: JudgeConfig, dataset) -> JudgeRun:
    """A baseline run scored to the end (offline)."""
    run = judge_run_create(judge=judge, dataset=dataset)
    judge_run_start(run=run)
    for response_id in Response.objects.filter(item__dataset=dataset).values_list("pk", flat=True):
        judge_response(run_id=run.pk, response_id=response_id)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    return run


@pytest.fixture
def carded(project, tmp_path):
    """A project with a dataset, a baseline judge with a hostile name (an old run, the
    counted run and a run finished after the snapshot), an LLM judge with a hostile model
    and template text, and a seeded snapshot with trust figures for the baseline."""
    dataset = make_dataset(project, tmp_path, items=3, models=("m1", "m2"))
    baseline = judge_config_create(
        project=project, name=HOSTILE, kind=JudgeKind.BASELINE, baseline="token-f1"
    )
    old, counted = baseline_run(baseline, dataset), baseline_run(baseline, dataset)
    as_of = timezone.now()
    JudgeRun.objects.filter(pk=old.pk).update(cost=Decimal("9"), finished_at=as_of - timedelta(2))
    JudgeRun.objects.filter(pk=counted.pk).update(
        cost=Decimal("0.125"), prompt_tokens=100, completion_tokens=20, finished_at=as_of
    )
    later = baseline_run(baseline, dataset)
    JudgeRun.objects.filter(pk=later.pk).update(finished_at=as_of + timedelta(hours=1))
    template, _ = prompt_template_create(
        project=project, key="fenced", name="# Fenced <b>", user_template=TEMPLATE
    )
    llm = judge_config_create(
        project=project,
        name="llm",
        kind=JudgeKind.LLM,
        **llm_fields("http://127.0.0.1:9/v1"),
        model=HOSTILE_MODEL,
        temperature=0.3,
        samples=3,
        use_reference=False,
        prompt_template=template,
    )
    trust = {
        HOSTILE: {
            "calibration": {"Factuality": {"ece": 0.0831, "map": [[1, 1.5], [2, 2.25]]}},
            "na": {"Factuality": {"agreement": 0.75, "judge_rate": 0.3, "people_rate": 0.05}},
            "probes": {},
            "strata": {"Factuality": [{"stratum": "<i>short</i>", "gap": -0.5}]},
        }
    }
    report = report_of([HOSTILE, "llm"], trust=trust)
    snapshot = seed_snapshot(project, report, as_of=as_of)
    return {
        "project": project,
        "dataset": dataset,
        "baseline": baseline,
        "llm": llm,
        "counted": counted,
        "snapshot": snapshot,
        "report": report,
    }


def card_of(carded, judge=HOSTILE) -> dict:
    card = selectors.card_build(project=carded["project"], snapshot=carded["snapshot"], judge=judge)
    assert card is not None
    return card


# --- the card's content -----------------------------------------------------------------------


def without_flags(value):
    """`value` without the card's small-sample flags (what the snapshot stored)."""
    if isinstance(value, dict):
        return {
            k: without_flags(v)
            for k, v in value.items()
            if k not in ("too_few", "intervals_not_holding")
        }
    if isinstance(value, list):
        return [without_flags(v) for v in value]
    return value


def test_the_card_copies_the_snapshots_figures_and_states_the_snapshot(carded):
    card = card_of(carded)
    report, snapshot = carded["report"], carded["snapshot"]
    assert card["snapshot"]["id"] == snapshot.pk
    assert card["snapshot"]["params"] == snapshot_params()
    assert without_flags(card["correlation"]) == report["correlation"][HOSTILE]
    assert without_flags(card["trust"]) == report["trust"][HOSTILE]
    ceiling = card["human_ceiling"]["Factuality"]
    assert ceiling["loo_ceiling"] == report["agreement"]["Factuality"]["loo_ceiling"]
    assert ceiling["loo_ceiling_ci"] == report["agreement"]["Factuality"]["loo_ceiling_ci"]
    # the counted run only: the latest finished by the snapshot's as_of (not the older
    # one, not the one finished after)
    assert [run["id"] for run in card["runs"]] == [carded["counted"].pk]
    assert card["cost"] == {"total": "0.125000", "prompt_tokens": 100, "completion_tokens": 20}
    assert card["configuration"]["fingerprint"] == judge_fingerprint(carded["baseline"])
    assert card["rubrics"]["Factuality"] == {"version": 1, "source": "built-in"}
    assert card["data"]["items"] == 3 and card["data"]["responses"] == 6
    assert card["data"]["models"] == ["m1", "m2"]
    # the Markdown shows the figures (rounded) with their intervals and the ceiling, on
    # enough responses (on 6, too few: see test_figures_below_their_minimum_say_too_few)
    text = card_document(card, "md").decode()
    assert f"report snapshot {snapshot.pk}" in text
    assert "0.123 [-0.410, 0.660]" not in text
    report = report_of([HOSTILE, "llm"], trust=report["trust"], n=12)
    plenty = seed_snapshot(carded["project"], report, params=snapshot_params(resamples=200))
    card = selectors.card_build(project=carded["project"], snapshot=plenty, judge=HOSTILE)
    text = card_document(card, "md").decode()
    assert "| Factuality | 12 | 0.123 [-0.410, 0.660] |" in text
    assert "| 12 | 0.712 [0.510, 0.830] | 0.650 [0.400, 0.800] |" in text
    assert "### Calibration" in text and "**ece**: 0.083" in text
    assert "### N/A" in text and "### Where the judge fails (strata)" in text


def test_the_llm_judges_card_has_its_template_model_and_k(carded):
    card = card_of(carded, "llm")
    assert card["k"] == 3
    assert card["configuration"]["model"] == HOSTILE_MODEL
    assert card["configuration"]["temperature"] == 0.3
    assert card["prompt_template"]["user_template"] == TEMPLATE
    assert card["runs"] == [] and card["data"]["responses"] == 0
    assert card["trust"] is None


def test_the_dataset_hash_is_the_documented_sha256_and_stable(carded):
    card = card_of(carded)
    rows = (
        Response.objects.filter(item__dataset=carded["dataset"])
        .order_by("pk")
        .values_list("item__content_hash", "pk", "text")
    )
    expected = hashlib.sha256(
        json.dumps([list(r) for r in rows], ensure_ascii=False, separators=(",", ":")).encode()
    ).hexdigest()
    assert card["data"]["dataset_hash"] == expected
    assert card_of(carded)["data"]["dataset_hash"] == expected  # built again
    # a changed response text changes it
    first = Response.objects.filter(item__dataset=carded["dataset"]).order_by("pk").first()
    Response.objects.filter(pk=first.pk).update(text=first.text + " (edited)")
    assert card_of(carded)["data"]["dataset_hash"] != expected


def test_dataset_hash_by_hand():
    # sha256 of '[["h1",2,"b"],["h0",1,"a é"]]' sorted by response id
    text = '[["h0",1,"a é"],["h1",2,"b"]]'
    assert (
        selectors.dataset_hash([(2, "h1", "b"), (1, "h0", "a é")])
        == hashlib.sha256(text.encode("utf-8")).hexdigest()
    )


def test_the_same_snapshot_gives_byte_identical_documents(carded, researcher_client):
    for fmt in ("md", "json"):
        assert card_document(card_of(carded), fmt) == card_document(card_of(carded), fmt)
    url = reverse("analytics:judge-card-json", args=[carded["project"].slug, carded["snapshot"].pk])
    first = researcher_client.get(url, {"judge": HOSTILE}).content
    assert first == researcher_client.get(url, {"judge": HOSTILE}).content
    assert json.loads(first) == json.loads(card_document(card_of(carded), "json"))


def test_hostile_names_and_texts_are_escaped_in_the_markdown(carded):
    html = MarkdownIt("commonmark", {"html": True}).enable("table")
    for judge in (HOSTILE, "llm"):
        text = card_document(card_of(carded, judge), "md").decode()
        rendered = html.render(text)
        assert "<script" not in rendered and "<img" not in rendered and "<i>" not in rendered
        assert "<b>" not in rendered and "javascript:" not in rendered.replace(
            "javascript:alert", ""
        )  # the text stays, as text: never a link
        assert 'href="javascript' not in rendered
        assert "<em>" not in rendered.split("</h1>")[0]
        assert rendered.count("<h1>") == 1  # no name or template line became a heading
    # the title says the hostile name literally
    text = card_document(card_of(carded), "md").decode()
    title = html.render(text.splitlines()[0])
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | `x` [a](javascript:alert(2))" in title
    # the template sits in a fence longer than any backtick run inside it, as it is
    llm = card_document(card_of(carded, "llm"), "md").decode()
    assert "`````text\n" + TEMPLATE + "\n`````" in llm
    rendered = html.render(llm)
    assert "&lt;/script&gt; ```` still text" in rendered


def test_md_text_and_fence_by_hand():
    assert md_text("a*b\n<c> (d) http://e.f &amp;") == "a\\*b \\<c> (d) http://e.f \\&amp;"
    # brackets, braces, pipes and underscores inside words are text where they stand
    assert md_text('{"a_b": [1]} | x & y < 2') == '{"a_b": [1]} | x & y < 2'
    assert md_text("[a](b) _c_ ~d~ `e` \\f \\*") == "[a\\](b) \\_c\\_ \\~d\\~ \\`e\\` \\f \\\\\\*"
    # at the start of a list item, a block marker is escaped too
    assert md_text("1. x", start=True) == "1\\. x"
    assert md_text("  # x", start=True) == "\\# x"
    assert md_text("[x] y", start=True) == "\\[x] y"
    assert md_heading("C# #") == "C# \\#"
    assert md_code("a ` b") == "``a ` b``" and md_code("`x") == "`` `x ``"
    assert md_fenced("x ``` y") == "````text\nx ``` y\n````"


def test_a_card_without_trust_figures_says_so(project, tmp_path):
    dataset = make_dataset(project, tmp_path, items=2, models=("m1",))
    judge = judge_config_create(
        project=project, name="f1", kind=JudgeKind.BASELINE, baseline="token-f1"
    )
    baseline_run(judge, dataset)
    snapshot = seed_snapshot(project, report_of(["f1"]))
    card = selectors.card_build(project=project, snapshot=snapshot, judge="f1")
    assert card is not None and card["trust"] is None
    limits = " ".join(card["limitations"])
    assert (
        "Trust figures not in this snapshot: calibration, strata, na, stochasticity, probes"
        in limits
    )
    assert "Factuality: only 6 responses" in limits
    # an interval of a figure not shown (too few) is not quoted either
    assert "the Pearson interval is wide" not in limits
    assert "the item level rests on 3 items" in limits
    text = card_document(card, "md").decode()
    assert "This snapshot holds no trust figures for this judge." in text


def test_limitations_come_from_the_data(carded):
    limits = card_of(carded)["limitations"]
    assert "Trust figures not in this snapshot: stochasticity." in limits
    assert "No bias probe was run for this judge." in limits
    assert (
        "N/A: the judge and people agree on whether Factuality applies for only 75% of the "
        "responses." in limits
    )
    assert "N/A: the judge says N/A on Factuality for 30% of its scores, people for 5%." in limits


# --- downloads --------------------------------------------------------------------------------


def test_downloads_have_their_content_types_and_filenames(carded, researcher_client):
    slug, pk = carded["project"].slug, carded["snapshot"].pk
    md = researcher_client.get(
        reverse("analytics:judge-card-md", args=[slug, pk]), {"judge": "llm"}
    )
    assert md.status_code == 200
    assert md["Content-Type"] == "text/markdown; charset=utf-8"
    assert md["Content-Disposition"] == f'attachment; filename="card-{slug}-llm-snapshot{pk}.md"'
    js = researcher_client.get(
        reverse("analytics:judge-card-json", args=[slug, pk]), {"judge": HOSTILE}
    )
    assert js["Content-Type"] == "application/json"
    assert re.fullmatch(
        rf'attachment; filename="card-{slug}-[a-z0-9_-]+-snapshot{pk}\.json"',
        js["Content-Disposition"],
    )
    api = token_client(carded["project"].memberships.get().user).get(
        f"/api/v1/projects/{slug}/analytics/snapshots/{pk}/card", {"judge": "llm"}
    )
    assert api.status_code == 200 and api.json()["judge"] == "llm"


def test_the_run_pages_link_goes_to_the_card_of_the_current_snapshot(carded, researcher_client):
    slug = carded["project"].slug
    run_page = researcher_client.get(reverse("judging:run-detail", args=[carded["counted"].pk]))
    link = reverse("analytics:judge-card", args=[slug])
    assert link in run_page.content.decode()
    found = researcher_client.get(link, {"judge": "llm", "format": "json"})
    assert found.status_code == 302
    target = reverse("analytics:judge-card-json", args=[slug, carded["snapshot"].pk])
    assert found["Location"] == f"{target}?judge=llm"


def test_the_trust_pages_card_links_name_the_snapshot_shown(carded):
    slug, pk = carded["project"].slug, carded["snapshot"].pk
    context = {"judge": HOSTILE, "project": carded["project"], "snapshot": carded["snapshot"]}
    html = render_to_string("analytics/report/_trust_card_links.html", context)
    assert reverse("analytics:judge-card-md", args=[slug, pk]) + "?judge=%3Cscript%3E" in html
    assert "<script>" not in html and f"report snapshot {pk}" in html
    # without a snapshot (the run page): the current one
    html = render_to_string(
        "analytics/report/_trust_card_links.html", {**context, "snapshot": None}
    )
    assert reverse("analytics:judge-card", args=[slug]) + "?judge=" in html


def test_cards_are_for_the_projects_staff(
    carded, annotator_client, outsider_client, researcher_client
):
    slug, pk = carded["project"].slug, carded["snapshot"].pk
    url = reverse("analytics:judge-card-md", args=[slug, pk])
    assert annotator_client.get(url, {"judge": "llm"}).status_code == 403
    assert outsider_client.get(url, {"judge": "llm"}).status_code == 404
    assert Client().get(url, {"judge": "llm"}).status_code == 302
    assert researcher_client.get(url, {"judge": "nobody"}).status_code == 404
    assert researcher_client.get(url).status_code == 404
    other = project_create(slug="elsewhere", name="Elsewhere")
    foreign = seed_snapshot(other, report_of(["llm"]))
    assert (
        researcher_client.get(
            reverse("analytics:judge-card-md", args=[slug, foreign.pk]), {"judge": "llm"}
        ).status_code
        == 404
    )


# --- the leaderboard --------------------------------------------------------------------------


@pytest.fixture
def two_projects(django_user_model, tmp_path):
    """Projects A and B, each with the same baseline configuration (another name) and an LLM
    judge only B has; a researcher of A only, a researcher of both, an annotator of A."""
    a = project_create(slug="proj-a", name="Alpha project")
    b = project_create(slug="proj-b", name="Secret Beta project")
    for project, name in ((a, "f1-a"), (b, "f1-b")):
        judge_config_create(
            project=project, name=name, kind=JudgeKind.BASELINE, baseline="token-f1"
        )
    judge_config_create(
        project=b,
        name="beta-only-judge",
        kind=JudgeKind.LLM,
        **llm_fields("http://127.0.0.1:9/v1"),
        model="beta-model",
    )
    seed_snapshot(a, report_of(["f1-a"], skills=("Factuality", "Readability")))
    seed_snapshot(b, report_of(["f1-b", "beta-only-judge"]))
    users = {}
    for username in ("only-a", "both", "ann-a"):
        users[username] = django_user_model.objects.create_user(username, password="pw")
    membership_set(project=a, user=users["only-a"], role=ProjectRole.RESEARCHER)
    membership_set(project=a, user=users["both"], role=ProjectRole.ADMIN)
    membership_set(project=b, user=users["both"], role=ProjectRole.RESEARCHER)
    membership_set(project=a, user=users["ann-a"], role=ProjectRole.ANNOTATOR)
    membership_set(project=b, user=users["only-a"], role=ProjectRole.ANNOTATOR)  # not staff in B
    return a, b, users


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


LEADERBOARD = "/analytics/judges/"
API = "/api/v1/analytics/judge-leaderboard"


def test_a_researcher_of_a_sees_only_a(two_projects):
    a, b, users = two_projects
    page = _client(users["only-a"]).get(LEADERBOARD)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Alpha project" in html and "f1-a" in html
    for secret in ("Secret Beta", "proj-b", "f1-b", "beta-only-judge", "beta-model"):
        assert secret not in html
    data = token_client(users["only-a"]).get(API).json()
    assert {row["project"] for row in data["rows"]} == {"proj-a"}
    assert [c["projects"] for c in data["configurations"]] == [1]
    assert "proj-b" not in json.dumps(data) and "beta" not in json.dumps(data).lower()


def test_a_site_admin_and_a_researcher_of_both_see_both(two_projects, admin_user):
    a, b, users = two_projects
    for user in (admin_user, users["both"]):
        data = token_client(user).get(API).json()
        assert {row["project"] for row in data["rows"]} == {"proj-a", "proj-b"}
        shared = [c for c in data["configurations"] if c["label"] == "baseline token-f1"]
        assert shared and shared[0]["projects"] == 2
    only_shared = token_client(admin_user).get(API, {"shared": "true"}).json()
    assert {row["judge"] for row in only_shared["rows"]} == {"f1-a", "f1-b"}
    row = next(r for r in only_shared["rows"] if r["project"] == "proj-b")
    assert row["pearson"] == {"value": 0.123456789, "low": -0.41, "high": 0.66}
    assert row["human_ceiling"]["pearson"] == {"value": 0.7123456, "low": 0.51, "high": 0.83}
    assert row["n"] == 6 and row["snapshot"] > 0
    # on 6 responses: the numbers for reference, and why they are not shown
    assert row["too_few"] == {
        "correlation": "too few: n = 6 (at least 10 responses)",
        "human_ceiling": "too few: n = 6 (at least 10 responses)",
    }
    page = _client(admin_user).get(LEADERBOARD).content.decode()
    assert "data-too-few" in page and "0.123" not in page


def test_leaderboard_filters_and_htmx(two_projects, admin_user):
    client = _client(admin_user)
    fingerprint = (
        token_client(admin_user).get(API).json()["rows"][0]["configuration"]["fingerprint"]
    )
    data = (
        token_client(admin_user)
        .get(API, {"configuration": fingerprint[:8], "skill": "Readability", "level": "item"})
        .json()
    )
    assert data["level"] == "item"
    assert {(r["project"], r["skill"]) for r in data["rows"]} <= {("proj-a", "Readability")}
    assert token_client(admin_user).get(API, {"level": "nope"}).status_code == 400
    partial = client.get(LEADERBOARD, {"skill": "Factuality"}, HTTP_HX_REQUEST="true")
    body = partial.content.decode()
    assert partial.status_code == 200 and body.lstrip().startswith(
        '<section id="leaderboard-table">'
    )
    assert "<html" not in body


def test_leaderboard_is_for_researchers_and_admins(two_projects, outsider):
    _, _, users = two_projects
    assert _client(users["ann-a"]).get(LEADERBOARD).status_code == 403
    assert _client(outsider).get(LEADERBOARD).status_code == 403
    assert token_client(users["ann-a"]).get(API).status_code == 403
    assert Client().get(LEADERBOARD).status_code == 302
    assert Client().get(API).status_code == 401
    assert _client(users["only-a"]).post(LEADERBOARD).status_code == 405
    # the home page offers it to researchers, not to annotators
    home = reverse("annotation:home")
    assert LEADERBOARD in _client(users["only-a"]).get(home).content.decode()
    assert LEADERBOARD not in _client(users["ann-a"]).get(home).content.decode()


def test_the_leaderboard_never_computes_a_report(two_projects, admin_user):
    with mock.patch.object(snapshots, "project_report", side_effect=AssertionError("computed")):
        assert _client(admin_user).get(LEADERBOARD).status_code == 200


def test_a_project_without_a_finished_report_is_listed_as_such(two_projects, admin_user):
    project_create(slug="proj-c", name="Gamma")
    data = token_client(admin_user).get(API).json()
    assert data["projects_without_report"] == ["proj-c"]


# --- from a snapshot the worker computed ------------------------------------------------------


def test_a_card_and_the_leaderboard_from_a_computed_snapshot(scored_project, researcher):  # noqa: F811
    snapshot, _ = snapshot_request(project=scored_project, params=snapshot_params(resamples=200))
    done = report_snapshot_compute(snapshot_id=snapshot.pk)
    assert done is not None and done.status == SnapshotStatus.DONE
    report = snapshots.snapshot_part(done, "report")
    card = selectors.card_build(project=scored_project, snapshot=done, judge="rouge")
    assert card is not None
    # the figures and their small-sample flags as the report stores them
    assert card["correlation"] == report["correlation"]["rouge"]
    assert card["trust"] == ((report.get("trust") or {}).get("rouge") or None)
    run = JudgeRun.objects.get(judge__name="rouge")
    assert [r["id"] for r in card["runs"]] == [run.pk]
    assert card["data"]["responses"] == 8 and card["data"]["items"] == 4
    for skill, levels in card["correlation"].items():
        assert levels["instance"]["n"] == 8, skill
        assert (
            card["human_ceiling"][skill]["loo_ceiling"] == report["agreement"][skill]["loo_ceiling"]
        )
    assert card_document(card, "md") == card_document(
        selectors.card_build(project=scored_project, snapshot=done, judge="rouge"), "md"
    )
    # not the default params: the leaderboard waits for the default report
    data = token_client(researcher).get(API).json()
    assert data["rows"] == [] and data["projects_without_report"] == [scored_project.slug]


def test_the_leaderboard_reads_the_snapshots_small_part_of_its_own(scored_project, researcher):  # noqa: F811
    # given the default snapshot computed by the worker
    snapshot, _ = snapshot_request(project=scored_project, params=snapshot_params())
    done = report_snapshot_compute(snapshot_id=snapshot.pk)
    report = snapshots.snapshot_part(done, "report")
    part = snapshots.snapshot_part(done, "leaderboard")
    # then it stores the correlations and ceilings, a fraction of the report
    assert part["correlation"] == report["correlation"]
    for skill, figures in part["agreement"].items():
        assert figures["loo_ceiling"] == report["agreement"][skill]["loo_ceiling"]
    sizes = dict(SnapshotPart.objects.filter(snapshot=done).values_list("name", "size_bytes"))
    assert sizes["leaderboard"] < sizes["report"] / 2
    # and the leaderboard shows what that part holds (not re-read from the report)
    SnapshotPart.objects.filter(snapshot=done, name="leaderboard").update(
        data=zlib.compress(json.dumps({**part, "correlation": {}}).encode())
    )
    board = selectors.judge_leaderboard(projects=[scored_project])
    assert board.rows == [] and board.without_snapshot == []
    # a snapshot made before that part existed: the leaderboard reads its report
    SnapshotPart.objects.filter(snapshot=done, name="leaderboard").delete()
    board = selectors.judge_leaderboard(projects=[scored_project])
    assert {row.judge for row in board.rows} == set(report["correlation"]) - {"imported"}


def test_the_leaderboard_reads_two_queries_per_project(
    two_projects, admin_user, django_assert_num_queries
):
    a, b, _ = two_projects
    selectors.judge_leaderboard(projects=[a])  # warm the content types
    with django_assert_num_queries(1 + 2 * 1):
        selectors.judge_leaderboard(projects=[a])
    with django_assert_num_queries(1 + 2 * 2):
        selectors.judge_leaderboard(projects=[a, b])


def test_the_cards_data_follows_the_snapshots_filters(carded):
    project = carded["project"]
    report = carded["report"]
    as_of = timezone.now()
    by_system = seed_snapshot(project, report, params=snapshot_params(systems=["m1"]), as_of=as_of)
    card = selectors.card_build(project=project, snapshot=by_system, judge=HOSTILE)
    assert card["data"]["models"] == ["m1"] and card["data"]["responses"] == 3
    assert any("The snapshot is filtered" in s for s in card["limitations"])
    # make_dataset: even items are History, odd ones Math
    by_domain = seed_snapshot(
        project, report, params=snapshot_params(domains=["Math"]), as_of=as_of
    )
    card = selectors.card_build(project=project, snapshot=by_domain, judge=HOSTILE)
    assert card["data"]["items"] == 1 and card["data"]["responses"] == 2
    assert card["data"]["dataset_hash"] != card_of(carded)["data"]["dataset_hash"]


def _interval(estimate, low, high):
    return {"estimate": estimate, "low": low, "high": high, "resamples": 200}


def test_the_markdown_shows_the_ceiling_and_each_trust_figure_as_tables():
    """Figures in the shapes analytics.trust stores them become one table per figure (not
    nested lists), names escaped; a figure of an unknown shape stays nested, escaped."""
    skill = "Fact*uality"
    card = {
        "judge": "j",
        "project": {"name": "P", "slug": "p"},
        "snapshot": {"id": 7, "finished_at": None, "as_of": None, "params": {}},
        "configuration": None,
        "prompt_template": None,
        "data": {
            "dataset_hash": "0" * 64,
            "hash_definition": "d",
            "source": "imported scores",
            "datasets": ["ds"],
            "items": 2,
            "responses": 4,
            "models": ["m"],
        },
        "rubrics": {},
        "cost": {"total": "0", "prompt_tokens": 0, "completion_tokens": 0},
        "runs": [],
        "k": None,
        "correlation": {},
        "human_ceiling": {
            skill: {
                "n_raters": 3,
                "n_units": 24,
                "krippendorff_alpha": {"nominal": 0.27, "ordinal": 0.73, "interval": 0.74},
                "krippendorff_alpha_ci": {"ordinal": _interval(0.73, 0.53, 0.79)},
                "loo_ceiling": {"pearson": 0.79, "spearman": 0.8, "annotators": 3},
                "loo_ceiling_ci": {"pearson": _interval(0.79, 0.68, 0.86)},
                "mean_pairwise_spearman": {"value": 0.726, "pairs": 3},
            }
        },
        "trust": {
            "calibration": {
                skill: {
                    "n": 24,
                    "offset": _interval(0.194, -0.125, 0.431),
                    "bland_altman": {"bias": 0.194, "loa_low": -1.453, "loa_high": 1.842},
                    "confusion": {
                        "labels": [1, 2, 3, 4, 5, "N/A"],
                        "rows": "judge",
                        "columns": "human consensus",
                        "counts": [[i * 6 + j for j in range(6)] for i in range(6)],
                    },
                    "isotonic": {
                        "mae_before": 0.708,
                        "mae_after": 0.627,
                        "exact_before": 0.333,
                        "exact_after": 0.375,
                        "ci": {"mae_after": _interval(0.627, 0.493, 0.767)},
                    },
                }
            },
            "strata": {
                skill: {
                    "all": {"n": 24, "items": 6, "pearson": 0.74, "spearman": 0.7, "mae": 0.7},
                    "human_spread": {
                        "groups": [{"group": "low", "n": 8, "items": 4, "pearson": 0.9, "mae": 0.4}]
                    },
                    "domain": [{"group": "<b>Coding</b>", "n": 5, "items": 2, "pearson": 0.5}],
                }
            },
            "na": {
                skill: {
                    "responses": 24,
                    "people_scores": 72,
                    "judge_scores": 24,
                    "people_rate": 0.05,
                    "judge_rate": 0.3,
                    "agreement": 0.75,
                    "kappa": 0.2,
                    "kappa_ci": _interval(0.2, -0.1, 0.5),
                }
            },
            "stochasticity": {
                skill: {
                    "judge": {
                        "samples": 3,
                        "responses": 24,
                        "alpha": {"ordinal": 0.81},
                        "unanimous": 0.5,
                    },
                    "people": {"pairs": 10, "alpha": {"ordinal": 0.6}, "exact": 0.7},
                }
            },
            "probes": {
                "runs": [
                    {
                        "run_id": 41,
                        "label": "padded",
                        "pairwise": False,
                        "effect": _interval(0.4, 0.1, 0.7),
                        "n": 24,
                        "items": 6,
                        "cost": "0.02",
                        "texts": ["In other words, ``` the answer above."],
                    }
                ],
                "length": {"partial_r": _interval(0.3, 0.05, 0.5), "n": 24},
            },
            "novel": {skill: {"shape": "<i>unknown</i>"}},
        },
        "limitations": [],
    }
    text = card_markdown(card)
    esc = "Fact\\*uality"
    assert "- **read from**: imported scores" in text
    assert (
        f"| {esc} | 3 | 24 | 0.730 [0.530, 0.790] | 0.740 | 0.270 | 0.790 [0.680, 0.860] |" in text
    )
    assert (
        f"| {esc} | 24 | 0.194 [-0.125, 0.431] | 0.194 | -1.453 to 1.842 |"
        " 0.708 → 0.627 [0.493, 0.767] | 0.333 → 0.375 |"
    ) in text
    # the confusion matrix: rows judge, columns people, N/A last
    assert "|  | 1 | 2 | 3 | 4 | 5 | N/A |" in text
    assert "| N/A | 30 | 31 | 32 | 33 | 34 | 35 |" in text
    assert f"| {esc} | all | all | 24 | 6 | 0.740 | 0.700 | 0.700 |" in text
    # rows below the minimum of a stratum say so instead of their figures
    assert (
        f"| {esc} | people's spread | low | 8 | 4 | too few: n = 8 (at least 10 responses) |"
        " too few | too few |"
    ) in text
    assert f"| {esc} | domain | \\<b>Coding\\</b> | 5 | 2 | too few: n = 5 (at least" in text
    assert f"| {esc} | 24 | 0.050 | 0.300 | 0.750 | 0.200 [-0.100, 0.500] |" in text
    assert f"| {esc} | 3 | 24 | 0.810 | 0.500 | 10 | 0.600 | 0.700 |" in text
    assert "| 41 | padded | score change | 0.400 [0.100, 0.700] | 24 | 6 | 0.02 |" in text
    assert "````text\nIn other words, ``` the answer above.\n````" in text
    assert "partial correlation of the judge's score with response length" in text
    # an unknown figure stays nested, escaped
    assert "### novel" in text and "**shape**: \\<i>unknown\\</i>" in text
    assert "**offset**" not in text  # no nested lists for known figures


def test_an_imported_judges_card_states_the_responses_its_scores_cover(project, tmp_path):
    """An imported judge has no run: its card's data (hash, items, responses, models,
    datasets) is read from its imported scores, and says so."""
    from analytics.models import ImportedScore, RaterKind, ScoreImport
    from annotation.models import Skill

    dataset = make_dataset(project, tmp_path, items=3, models=("m1", "m2"))
    batch = ScoreImport.objects.create(project=project, dataset=dataset, input_sha256="a" * 64)
    skill = Skill.objects.get(project=None, name="Factuality")
    covered = list(
        Response.objects.filter(item__dataset=dataset, model_name="m2").order_by("pk")[:2]
    )
    for response in covered:
        ImportedScore.objects.create(
            batch=batch,
            project=project,
            response=response,
            skill=skill,
            rater="imported judge",
            rater_kind=RaterKind.JUDGE,
            value=3.0,
        )
    snapshot = seed_snapshot(project, report_of(["imported judge"]))
    card = selectors.card_build(project=project, snapshot=snapshot, judge="imported judge")
    assert card is not None and card["configuration"] is None and card["runs"] == []
    data = card["data"]
    assert data["source"] == "imported scores"
    assert (data["items"], data["responses"], data["models"]) == (2, 2, ["m2"])
    assert data["datasets"] == [dataset.name]
    assert data["dataset_hash"] == selectors.dataset_hash(
        [(r.pk, r.item.content_hash, r.text) for r in covered]
    )


def test_limitations_say_one_response_and_one_item_in_the_singular():
    card = {
        "configuration": None,
        "trust": None,
        "human_ceiling": {},
        "snapshot": {"params": snapshot_params(), "resamples": 0},
        "correlation": {"Metacognition": {"instance": {"n": 1}, "item": {"n": 1}}},
    }
    limits = selectors.card_limitations(card)
    assert "Metacognition: only 1 response scored by both the judge and people." in limits
    assert "Metacognition: the item level rests on 1 item." in limits


# --- the Markdown reads cleanly; small samples; the cards page ------------------------------

ORDINARY = "rouge_l [v2] {beta}"


def rendered_text(markdown: str) -> str:
    """What a reader sees of `markdown` rendered (CommonMark with GFM tables and
    strikethrough, markdown-it as the app's pages use it): the text without the tags."""
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_the_markdown_reads_cleanly_with_json_in_code_spans(project, tmp_path):
    """JSON, brackets, braces and underscores are not Markdown in the middle of a line: the
    card writes them as they are (JSON in code spans), so neither the file nor its
    rendering shows a stray backslash."""
    dataset = make_dataset(project, tmp_path, items=2, models=("m_1", "m_2"))
    judge = judge_config_create(
        project=project, name=ORDINARY, kind=JudgeKind.BASELINE, baseline="token-f1"
    )
    baseline_run(judge, dataset)
    snapshot = seed_snapshot(project, report_of([ORDINARY], n=12))
    card = selectors.card_build(project=project, snapshot=snapshot, judge=ORDINARY)
    text = card_document(card, "md").decode()
    # nothing in this card needs an escape where it stands
    assert "\\" not in text
    assert 'Snapshot params: `{"compare": [], "compare_all": false, ' in text
    assert f"# Evaluation card: {ORDINARY} on " in text
    assert "| skills | `[]` |" in text or '| skills | `["' in text or "| skills |" not in text
    # and rendered, the JSON is literal code and the names read as they are
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)
    assert "<code>{&quot;compare&quot;: [], &quot;compare_all&quot;: false, " in html
    seen = rendered_text(text)
    assert "\\" not in seen
    assert f"Evaluation card: {ORDINARY} on" in seen and "m_1, m_2" in seen
    assert "[[item content hash, response id, response text], ...]" in seen


def test_escapes_render_away_and_hostile_json_stays_in_its_code_span(carded):
    for judge in (HOSTILE, "llm"):
        seen = rendered_text(card_document(card_of(carded, judge), "md").decode())
        assert "\\" not in seen, judge
    # a configuration value with a pipe and backticks: one cell, literal JSON
    text = card_markdown(
        {
            **card_of(carded, "llm"),
            "configuration": {"extra": {"stop": ["|", "``"]}, "model": "a|b"},
        }
    )
    assert '| extra | ```{"stop": ["\\|", "``"]}``` |' in text
    assert "| model | a\\|b |" in text
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<td><code>{&quot;stop&quot;: [&quot;|&quot;, &quot;``&quot;]}</code></td>" in html
    assert "<td>a|b</td>" in html


def test_figures_below_their_minimum_say_too_few_with_n_beside_them(carded):
    """analytics/minimums.py: on 6 responses a correlation is not shown (the reason is, in
    the Markdown and in the JSON beside its n); at the minimum it is, with its interval."""
    card = card_of(carded)  # 6 responses scored by the judge and people, 6 by two people
    levels = card["correlation"]["Factuality"]
    assert levels["instance"]["n"] == 6
    six = "too few: n = 6 (at least 10 responses)"
    assert levels["instance"]["too_few"]["pearson"] == six
    assert set(levels["instance"]["too_few"]) >= {"pearson", "spearman", "kendall"}
    assert levels["item"]["too_few"]["pearson"] == too_few("item_level", 3)
    assert levels["system"]["too_few"]["pearson"] == too_few("ranking", 2)
    # the ceiling names the figures it copies only, each with its reason
    ceiling = card["human_ceiling"]["Factuality"]
    assert set(ceiling["too_few"]) == {"krippendorff_alpha", "loo_ceiling"}
    assert ceiling["too_few"]["krippendorff_alpha"] == "too few: n = 6 (at least 10 units)"
    exported = json.loads(card_document(card, "json"))
    assert exported["correlation"]["Factuality"]["instance"]["too_few"]["pearson"] == six
    assert exported["correlation"]["Factuality"]["instance"]["pearson"] == pytest.approx(0.1234568)
    text = card_document(card, "md").decode()
    assert (
        "| Factuality | 6 | too few: n = 6 (at least 10 responses) | too few | too few | 6 |"
        " too few | too few |"
    ) in text
    assert (
        "| Factuality | 3 | 6 | too few: n = 6 (at least 10 units) | too few | too few |"
        " too few: n = 6 (at least 10 responses) | – |"
    ) in text
    assert "| Factuality | 2 | too few: n = 2 (at least 4 systems) | too few | too few |" in text
    assert "-0.410" not in text and "0.510" not in text  # no interval of a figure not shown

    # at the minimum: the figures, their intervals and an empty reason
    report = report_of([HOSTILE], n=10)
    report["correlation"][HOSTILE]["Factuality"]["instance"]["ci"]["spearman"] = {
        "estimate": 0.06,
        "low": 0.2,
        "high": 0.4,
    }
    enough = seed_snapshot(carded["project"], report, params=snapshot_params(resamples=200))
    card = selectors.card_build(project=carded["project"], snapshot=enough, judge=HOSTILE)
    instance = card["correlation"]["Factuality"]["instance"]
    assert instance["too_few"] == {} and card["human_ceiling"]["Factuality"]["too_few"] == {}
    text = card_document(card, "md").decode()
    assert "| Factuality | 10 | 0.123 [-0.410, 0.660] |" in text
    assert "Factuality: the Pearson interval is wide (-0.41 to 0.66)." in card["limitations"]
    # an interval that does not contain its estimate is never shown as one
    assert "| 0.062 (no interval: it does not contain the estimate) |" in text


def test_the_card_page_without_a_judge_lists_the_projects_judges(
    carded, researcher_client, annotator_client, outsider_client
):
    slug, pk = carded["project"].slug, carded["snapshot"].pk
    url = reverse("analytics:judge-card", args=[slug])
    page = researcher_client.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    md = reverse("analytics:judge-card-md", args=[slug, pk])
    js = reverse("analytics:judge-card-json", args=[slug, pk])
    assert f'href="{md}?judge=llm"' in body and f'href="{js}?judge=llm"' in body
    assert f'href="{md}?judge=%3Cscript%3E' in body
    assert "&lt;script&gt;" in body and "<script>alert" not in body
    assert f"report snapshot {pk}" in body and re.search(r"Factuality \(<a [^>]*>n = 6</a>\)", body)
    # the n links to the judge's responses of the skill (docs/ANALYTICS.md)
    items = reverse("analytics:items", args=[slug])
    assert f'href="{items}?from=' in body and "judge=llm&amp;skill=Factuality" in body
    # each link gives that judge's card
    card = researcher_client.get(f"{md}?judge=llm")
    assert card.status_code == 200 and card.content.startswith(b"# Evaluation card: llm")
    # same access as the cards
    assert annotator_client.get(url).status_code == 403
    assert outsider_client.get(url).status_code == 404
    assert Client().get(url).status_code == 302


def test_the_card_page_of_a_project_without_a_report_lists_its_judges(project, researcher_client):
    judge_config_create(project=project, name="f1", kind=JudgeKind.BASELINE, baseline="token-f1")
    page = researcher_client.get(reverse("analytics:judge-card", args=[project.slug]))
    body = page.content.decode()
    assert page.status_code == 200
    assert "no finished report yet" in body and 'data-judge="f1"' in body
