"""Every staff page (tests/browser/pages_staff.py) has no serious or critical WCAG 2.2 A/AA
violation (axe-core) at 1440 px, on the demo's world (`manage.py seed_demo`: a project with
a dataset, a scored, a pairwise and a crowd-study campaign, a baseline judge, imported pilot
ratings) plus what the seed leaves to workers, made here in this process: the judge run's
judgments, the report snapshot, an export, import jobs, a metadata run, a disagreement
under review. Forms are also sent empty, so their errors are checked too.

One walk in one logged-in page (a site admin, who may open every staff page): the seed takes
a few seconds and a live server per page would take minutes. It records the URL name of
every page it checked and fails when one of STAFF_PAGES was never visited, and it reports
every page's violations at once."""

from __future__ import annotations

import io
from collections import deque
from urllib.parse import urlsplit

import pytest
from celery.app.task import Task as CeleryTask
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import resolve, reverse

from analytics.exports.services import export_job_create, export_job_run
from analytics.imports.jobs import (
    preference_import_job_create,
    preference_import_job_run,
    score_import_job_create,
    score_import_job_run,
)
from analytics.report import snapshots
from analytics.report.views import SECTIONS
from annotation.models import Campaign, Dataset, HumanScore, Project, Response
from annotation.selectors import task_skills
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
)
from judging.models import JudgeConfig, JudgeKind, JudgeRun, Judgment, PromptTemplate, Provider
from judging.services import judge_config_create
from judging.services.metadata import metadata_run_create
from tests.analytics.snapshot_worker import compute_pending
from tests.browser.axe import assert_accessible
from tests.browser.conftest import login
from tests.browser.pages_staff import STAFF_PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LAPTOP = {"width": 1440, "height": 900}
CHARTS_DRAWN = """() => {
  const canvases = [...document.querySelectorAll('canvas[data-chart]')];
  return window.Chart && canvases.length > 0 && canvases.every(c => Chart.getChart(c));
}"""


@pytest.fixture
def inline_tasks(monkeypatch):
    """Celery without a worker: what is sent is queued here and `drain()` runs it in this
    process, as a worker would (a task that sends more work queues it behind)."""
    queued: deque = deque()

    def apply_async(self, args=None, kwargs=None, **options):
        queued.append((self, tuple(args or ()), dict(kwargs or {})))

    monkeypatch.setattr(CeleryTask, "apply_async", apply_async)

    def drain() -> None:
        while queued:
            task, args, kwargs = queued.popleft()
            task.run(*args, **kwargs)

    return drain


def _disagree(campaign: Campaign) -> int:
    """Two demo annotators score the same response at the ends of the scale: the review
    queue then has it. Returns the response's id."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    low, high = User.objects.get(username="annotator1"), User.objects.get(username="annotator2")
    first = assignment_claim_next(campaign=campaign, annotator=low)
    assert first is not None
    skills = task_skills(assignment=first)
    human_score_submit(
        assignment_id=first.pk,
        annotator=low,
        scores=[ScoreInput(s.skill_id, 1, time_ms=900) for s in skills],
        active_ms=9000,
    )
    second = assignment_claim_next(campaign=campaign, annotator=high)
    assert second is not None
    assert second.task.response_id == first.task.response_id  # partly done items first
    human_score_submit(
        assignment_id=second.pk,
        annotator=high,
        scores=[ScoreInput(s.skill_id, 5, time_ms=900) for s in task_skills(assignment=second)],
        active_ms=9000,
    )
    return first.task.response_id


@pytest.fixture
def world(live_server, inline_tasks) -> dict:
    """The demo, its judge run judged, a report, jobs and a disagreement; the ids the walk
    opens."""
    call_command("seed_demo", stdout=io.StringIO())
    inline_tasks()  # the baseline judge's run
    project = Project.objects.get(slug="demo")
    dataset = Dataset.objects.get(project=project, name="Demo set")
    scored = Campaign.objects.get(project=project, name="Demo campaign")
    study = Campaign.objects.get(project=project, name="Demo crowd study")
    admin = project.memberships.get(user__username="admin").user
    response_id = _disagree(scored)
    baseline = JudgeConfig.objects.get(project=project, name="ROUGE-L baseline")
    run = JudgeRun.objects.filter(judge=baseline).get()
    llm = judge_config_create(
        project=project,
        name="Local LLM judge",
        kind=JudgeKind.LLM,
        provider=Provider.objects.get(name="local-fake-judge"),
        base_url="http://127.0.0.1:8089/v1",
        model="fake-judge",
        created_by=admin,
    )
    metadata_run = metadata_run_create(judge=llm, dataset=dataset, created_by=admin)
    pilot = "item,system,rater,rater_kind,skill,score\n"
    first = Response.objects.filter(item__dataset=dataset).order_by("pk")[0]
    skill = first.item.item_skills.select_related("skill").order_by("pk")[0].skill
    pilot += f"{first.item.external_id},{first.model_name},late-rater,human,{skill.name},3\n"
    score_job = score_import_job_create(
        project=project,
        project_slug=project.slug,
        files=[SimpleUploadedFile("late.csv", pilot.encode())],
        dataset_name=dataset.name,
        created_by=admin,
    )
    score_import_job_run(job_id=score_job.pk)
    item = first.item
    models = sorted(item.responses.values_list("model_name", flat=True))[:2]
    prefs = "dataset,item,model_a,model_b,rater,choice\n" + "".join(
        f"{dataset.name},{item.external_id},{models[0]},{models[1]},rater-{n},a\n" for n in range(3)
    )
    preference_job = preference_import_job_create(
        project=project, file=SimpleUploadedFile("prefs.csv", prefs.encode()), created_by=admin
    )
    preference_import_job_run(job_id=preference_job.pk)
    export = export_job_create(
        project=project, kind="long", fmt="csv", filters={}, requested_by=admin, enqueue=False
    )
    export_job_run(job_id=export.pk)
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    compute_pending()
    inline_tasks()
    return {
        "slug": project.slug,
        "dataset": dataset.pk,
        "upload": dataset.uploads.order_by("pk")[0].pk,
        "item": item.pk,
        "skill": skill.pk,
        "scored": scored.pk,
        "study": study.pk,
        "response": response_id,
        "judge": baseline.pk,
        "llm": llm.pk,
        "run": run.pk,
        "judgment": Judgment.objects.filter(run=run).order_by("pk")[0].pk,
        "template": PromptTemplate.objects.order_by("pk")[0].pk,
        "metadata_run": metadata_run.pk,
        "score_job": score_job.pk,
        "preference_job": preference_job.pk,
        "judges": sorted({baseline.name, "Imported LLM judge"}),
        "human_scores": HumanScore.objects.filter(assignment__task__campaign=scored).count(),
    }


def url_name(url: str) -> str:
    match = resolve(urlsplit(url).path)
    return f"{match.namespace}:{match.url_name}" if match.namespace else str(match.url_name)


def test_every_staff_page_passes_axe_at_1440(chromium, live_server, world):
    w = world
    slug = w["slug"]
    context = chromium.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    visited: set[str] = set()
    problems: list[str] = []

    def check(where: str) -> None:
        visited.add(url_name(page.url))
        try:
            assert_accessible(page, where)
        except pytest.fail.Exception as failure:
            problems.append(str(failure))

    def visit(name: str, *args, query: str = "", wait: str = "") -> None:
        page.goto(f"{live_server.url}{reverse(name, args=args)}{query}")
        if wait.startswith("()"):
            page.wait_for_function(wait)
        elif wait:
            page.wait_for_selector(wait, state="attached")
        check(name + query)

    def send_empty(form: str) -> None:
        """Send the page's form as it is, past the browser's own checks of required fields:
        the form comes back with the server's errors (a page, or swapped in by htmx)."""
        page.eval_on_selector(form, "f => { f.noValidate = true; }")
        page.click(f"{form} [type=submit]")
        page.wait_for_selector(f"{form} .errorlist", state="attached")
        check(f"{page.url}: {form} sent empty")

    try:
        login(page, live_server, "admin", "admin-demo")
        # projects, datasets, catalogue, members
        visit("annotation:home")
        visit("annotation:project-create")
        send_empty("#project-form")
        visit("annotation:project-detail", slug)
        visit("annotation:upload-create", slug)
        visit("annotation:upload-detail", w["upload"])
        visit("annotation:dataset-detail", w["dataset"])
        visit("annotation:item-detail", w["item"])
        visit("annotation:skill-add", slug)
        send_empty("form.card")
        visit("annotation:rubric-import", slug)
        visit("annotation:catalogue", query=f"?project={slug}")
        visit("annotation:rubric-edit", w["skill"], query=f"?project={slug}")
        visit("annotation:member-list", slug)
        # campaigns
        visit("annotation:campaign-list", slug)
        visit("annotation:campaign-create", slug)
        send_empty("#campaign-form")
        visit("annotation:campaign-detail", w["scored"])
        visit("annotation:campaign-detail", w["study"])
        visit("annotation:campaign-update", w["scored"])
        visit("annotation:campaign-pace", w["study"])
        visit("annotation:screening", w["study"])
        visit("annotation:review-project", slug)
        visit("annotation:review-queue", w["scored"], wait="[data-queue-entry]")
        visit("annotation:review-response", w["scored"], w["response"])
        visit("annotation:review-settings", w["scored"])
        visit("annotation:review-summary", w["scored"])
        visit("annotation:campaign-study", w["study"])
        visit("annotation:campaign-study-participants", w["study"])
        visit("annotation:campaign-languages", w["study"])
        visit("annotation:campaign-translation", w["study"], "es")
        visit("annotation:metadata-apply-page", w["scored"])
        visit("annotation:metadata-verify-page", w["dataset"], query="?origin=dataset")
        # judging
        visit("judging:judge-list", slug)
        visit("judging:judge-create", slug)
        send_empty("#judge-form")
        visit("judging:judge-detail", w["judge"])
        visit("judging:run-create", w["judge"])
        visit("judging:run-detail", w["run"])
        visit("judging:judgment-detail", w["judgment"])
        visit("judging:template-list", slug)
        visit("judging:template-create", slug)
        send_empty("#template-form")
        visit("judging:template-import", slug)
        visit("judging:template-detail", slug, w["template"])
        visit("judging:families", slug)
        visit("judging:metadata-run-create", w["dataset"])
        visit("judging:metadata-run-detail", w["metadata_run"])
        # analytics
        visit("analytics:dashboard", slug, wait=CHARTS_DRAWN)
        for name in SECTIONS:  # every section, loaded by htmx as it is opened
            page.click(f"details[data-section={name}] > summary")
            page.wait_for_selector(f"[data-section-body={name}]", state="attached")
        page.wait_for_function(CHARTS_DRAWN)
        check("dashboard, every section open")
        visit("analytics:report-section", slug, next(iter(SECTIONS)))
        visit("analytics:dashboard", slug, query="?judge=no-such-judge")  # the filter's error
        visit("analytics:trust", slug)
        visit("analytics:preferences", slug)
        visit("analytics:exports", slug)
        visit("analytics:disagreements", slug)
        visit("analytics:response-scores", slug, w["response"])
        visit("analytics:score-import", slug)
        visit("analytics:score-import-job", slug, w["score_job"])
        visit("analytics:preference-import", slug)
        visit("analytics:preference-import-job", slug, w["preference_job"])
        visit("analytics:judge-leaderboard")
        visit("analytics:judge-card", slug)
        judges = "&".join(f"judge={j}" for j in w["judges"])
        visit("analytics:judge-compare", slug, query=f"?{judges}")
        visit("analytics:metadata-agreement", w["dataset"])
        visit("analytics:active-selection", w["scored"])
        visit("analytics:label-planning", slug)
        visit("analytics:items", slug)
        visit("account-token")
    finally:
        context.close()

    missed = sorted(set(STAFF_PAGES) - visited)
    assert not missed, f"staff pages the walk never checked: {missed}"
    assert not problems, "\n".join(problems)
