"""The REST API against its own OpenAPI schema: schemathesis generates requests for every
operation of /api/schema/ (valid and invalid ones) and sends them in-process, with the token
of a site admin, of a project researcher and of an annotator. No answer may be a 5xx, and
every answer must match what the schema documents (status, content type, body).

Path parameters name seeded objects (a project with a dataset, a campaign with a leased
task, a judge, runs in each state, a finished export, a member): always for the admin, most of the
time for the others, so operations get past their 404.
The objects are seeded once for all the fuzzing items (TestSchemaFuzzing, in a transaction
rolled back after them), and each request runs in a savepoint that is rolled back, so every
request sees the same seeded state, and nothing is ever committed: the on-commit task dispatch
(imports, judge runs, exports) never fires, and no broker is needed (docs/API.md).
Each persona's operations are split by path into a few test items (SHARDS), so that
pytest-xdist runs them on different workers.
"""

from __future__ import annotations

import copy
import functools
import gc
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from django.test import Client, override_settings
from django.urls import reverse
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from analytics.active.services import selection_plan_create
from analytics.exports.services import export_job_create, export_job_run
from analytics.imports.preferences import preferences_import
from analytics.imports.services import scores_import
from analytics.models import PreferenceImportJob
from analytics.report.snapshots import snapshot_params, snapshot_request
from annotation.campaigns.services import campaign_activate, campaign_create, gold_task_set
from annotation.models import DatasetUpload, ProjectRole, Response
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from annotation.services.projects import membership_set, project_create
from devtools.openai_server import FakeOpenAIServer
from judging.models import RunStatus
from judging.services import judge_batch, judge_run_create
from tests.annotation.test_assignments import make_dataset
from tests.clients import token_client
from tests.conftest import _ensure_catalogue
from tests.judging.test_runs import llm_judge, response_ids, running
from tests.judging.test_views import make_judge, set_status

#: Generated requests per operation and persona: every operation is fuzzed as each of them
#: (the admin's coverage phase adds its own deterministic cases: each field missing, of the
#: wrong type or out of range, an unexpected method; with API_FUZZ_EXAMPLES also the valid
#: boundary values, which doubled the suite's fuzzing time for no failure found since).
MAX_EXAMPLES = {"admin": 5, "researcher": 5, "annotator": 5}
#: API_FUZZ_EXAMPLES=200 searches deeper, with fresh random data on each run (docs/API.md,
#: tests/README.md).
DEEP = int(os.environ.get("API_FUZZ_EXAMPLES", "0"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
PREFERENCES = b"dataset,item,model_a,model_b,rater,choice\nD,i0,m1,m2,ext,a\n"
IMPORTED = (
    "item,system,rater,rater_kind,skill,score,rationale\n"
    "i0,m1,ext,judge,Factuality,3,\n"
    "i0,m2,ext,judge,Factuality,N/A,\n"
)


class InProcessApp:
    """The project's WSGI handler for in-process calls inside the test's transaction.

    Like Django's test client, it keeps the request signals from closing the database
    connection, which would end the test's transaction (and its savepoints) mid-test."""

    def __init__(self) -> None:
        self.handler = WSGIHandler()

    def __call__(self, environ, start_response):
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = self.handler(environ, start_response)
            body = b"".join(response)
            response.close()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
        return [body]


@dataclass
class Seeded:
    slug: str
    upload: int
    campaign: int
    assignment: int
    judge: int
    done_run: int
    pairwise_run: int
    pending_run: int
    running_run: int
    paused_run: int
    export: int
    member: str
    dataset: int
    item: int
    snapshot: int
    response: int  # scored in the campaign (the review API's adjudication)
    gold_task: int  # a gold task of the campaign, answered by no one
    preference_import_job: int  # succeeded, with its import
    sampled_campaign: int  # a "sampled" draft with an active selection plan, no batch yet
    users: dict[str, int]  # each persona's user
    media: Path  # MEDIA_ROOT of the seeded files (the export)

    def path_parameters(self, path: str) -> dict | None:
        """A real object for the operation's path parameter, or None (generate one)."""
        if "{snapshot_id}" in path:
            return {"slug": self.slug, "snapshot_id": self.snapshot}
        if "{username}" in path:
            return {"slug": self.slug, "username": self.member}
        if "{slug}" in path:
            return {"slug": self.slug}
        if "{task_id}" in path and path.startswith("/api/v1/annotation/campaigns/{id}"):
            return {"id": self.campaign, "task_id": self.gold_task}
        if "{response_id}" in path and path.startswith("/api/v1/annotation/campaigns/{id}"):
            return {"id": self.campaign, "response_id": self.response}
        if "{language}" in path and path.startswith("/api/v1/annotation/campaigns/{id}"):
            return {"id": self.campaign, "language": "es"}
        if path.startswith("/api/v1/annotation/campaigns/{id}"):
            return {"id": self.campaign}
        if path.startswith("/api/v1/campaigns/{id}"):
            return {"id": self.sampled_campaign}
        if path.startswith("/api/v1/annotation/datasets/{id}"):
            return {"id": self.dataset}
        if path.startswith("/api/v1/annotation/items/{id}"):
            return {"id": self.item}
        if path.startswith("/api/v1/annotation/uploads/{id}"):
            return {"id": self.upload}
        if "{campaign_id}" in path:
            return {"campaign_id": self.campaign}
        if "{assignment_id}" in path:
            return {"assignment_id": self.assignment}
        if path.startswith("/api/v1/judging/judges/{id}"):
            return {"id": self.judge}
        if path.startswith("/api/v1/exports/{id}"):
            return {"id": self.export}
        if path.startswith("/api/v1/preference-import-jobs/{id}"):
            return {"id": self.preference_import_job}
        if path.startswith("/api/v1/judging/runs/{id}"):
            action = path.rstrip("/").rsplit("/", 1)[-1]
            run = {
                "pairwise": self.pairwise_run,
                "start": self.pending_run,
                "pause": self.running_run,
                "cancel": self.running_run,
                "resume": self.paused_run,
            }.get(action, self.done_run)
            return {"id": run}
        return None


@pytest.fixture(scope="class")
def seeded(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Seeded]:
    """The seeded objects, made once for the fuzzing items (class TestSchemaFuzzing) in a
    transaction rolled back after the last of them, as a TestCase's setUpTestData. Each item's
    own transaction (the `db` fixture) and each request's savepoint nest inside it, so the
    items see the same objects and change none of them."""
    media = tmp_path_factory.mktemp("fuzz-media")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=media):
        atomic = transaction.atomic()
        atomic._from_testcase = True  # durable services may run inside, as in a TestCase
        atomic.__enter__()
        try:
            _ensure_catalogue()  # an earlier transactional test may have truncated it
            yield _seed(tmp_path_factory.mktemp("fuzz-data"), media)
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def _seed(tmp_path: Path, media: Path) -> Seeded:
    """The personas of tests/conftest.py; two items answered by m1 and m2; a campaign where
    the annotator scored one response and holds a lease on the next; an LLM judge with a
    finished run, a finished pairwise run, and runs pending, running and paused; imported
    judge scores; a finished export."""
    users = get_user_model().objects
    project = project_create(slug="demo-project", name="Demo project")
    admin_user = users.create_user(username="admin", is_staff=True, is_superuser=True)
    researcher = users.create_user(username="rita")
    annotator = users.create_user(username="alice")
    membership_set(project=project, user=researcher, role=ProjectRole.RESEARCHER)
    membership_set(project=project, user=annotator, role=ProjectRole.ANNOTATOR)
    dataset = make_dataset(project, tmp_path, items=2, models=("m1", "m2"))
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=1, annotators=[annotator]
    )
    campaign_activate(campaign=campaign)
    scored = assignment_claim_next(campaign=campaign, annotator=annotator)
    human_score_submit(
        assignment_id=scored.pk,
        annotator=annotator,
        scores=[ScoreInput(s.skill_id, 3) for s in task_skills(assignment=scored)],
        active_ms=5000,
    )
    leased = assignment_claim_next(campaign=campaign, annotator=annotator)
    with FakeOpenAIServer(style="json") as server:
        judge = llm_judge(project, server, name="gpt")
        # each run's responses in one batch: one engine round trip per run
        done = running(judge_run_create(judge=judge, dataset=dataset))
        judge_batch(run_id=done.pk, response_ids=response_ids(done))
        pairwise = running(judge_run_create(judge=judge, dataset=dataset, pairwise_against="m1"))
        m2 = Response.objects.filter(item__dataset=dataset, model_name="m2")
        judge_batch(run_id=pairwise.pk, response_ids=list(m2.values_list("pk", flat=True)))
    scores_import(
        project_slug=project.slug, files=[("ext.csv", IMPORTED.encode())], dataset_name="D"
    )
    export = export_job_create(project=project, kind="long", enqueue=False)
    export_job_run(job_id=export.pk)
    labels = preferences_import(project=project, data=PREFERENCES, name="prefs.csv")
    preference_job = PreferenceImportJob.objects.create(
        project=project,
        status="succeeded",
        batch=labels.batch,
        files=[{"name": "prefs.csv", "stored": "", "bytes": len(PREFERENCES)}],
        result={"already_imported": False, **labels.summary},
    )
    sampled = campaign_create(
        project=project, dataset=dataset, name="S", selection="sampled", annotators=[annotator]
    )
    selection_plan_create(
        campaign=sampled, run_ids=[done.pk], source="calibration", budget=2, batch_size=2
    )
    return Seeded(
        slug=project.slug,
        upload=DatasetUpload.objects.filter(project=project).values_list("pk", flat=True)[0],
        campaign=campaign.pk,
        assignment=leased.pk,
        judge=judge.pk,
        done_run=done.pk,
        pairwise_run=pairwise.pk,
        pending_run=judge_run_create(judge=judge, dataset=dataset).pk,
        running_run=running(judge_run_create(judge=judge, dataset=dataset)).pk,
        paused_run=set_status(judge_run_create(judge=judge, dataset=dataset), RunStatus.PAUSED).pk,
        export=export.pk,
        member=annotator.username,
        dataset=dataset.pk,
        item=dataset.items.order_by("pk").values_list("pk", flat=True)[0],
        snapshot=snapshot_request(project=project, params=snapshot_params(resamples=0))[0].pk,
        response=scored.task.response_id,
        gold_task=gold_task_set(
            campaign=campaign,
            response=leased.task.response,
            scores={s.skill_id: 4 for s in task_skills(assignment=leased)},
        ).pk,
        preference_import_job=preference_job.pk,
        sampled_campaign=sampled.pk,
        users={"admin": admin_user.pk, "researcher": researcher.pk, "annotator": annotator.pk},
        media=media,
    )


#: Each persona's paths in shards of similar cost, separate test items that pytest-xdist runs
#: on different workers. A path goes to the first shard whose pattern matches its start, with
#: all its methods (the coverage phase sends its unexpected DELETE per path); the last pattern
#: matches every path, so a path added to the API is tested without being listed here.
SHARDS = {
    "admin": {
        "projects": r"/api/v1/annotation/projects/",
        "campaign": r"/api/v1/annotation/campaigns/\{id\}/$",
        "campaigns": r"/api/v1/annotation/campaigns/",
        "judging-runs": r"/api/v1/judging/runs/",
        "judging": r"/api/v1/judging/",
        "analytics": r"/api/v1/projects/\{slug\}/analytics/",
        "rest": r"",  # the rest of annotation, exports, imports, and any new path
    },
    "researcher": {"annotation": r"/api/v1/annotation/", "rest": r""},
    "annotator": {"annotation": r"/api/v1/annotation/", "rest": r""},
}


def shard_of(persona: str, path: str) -> str | None:
    """The first of the persona's shards whose pattern matches the start of the path."""
    return next((shard for shard, start in SHARDS[persona].items() if re.match(start, path)), None)


@functools.cache
def served_schema() -> dict:
    """The schema /api/schema/ serves: the same for every persona and shard, so it is fetched
    once per process; each test item builds its schema from a copy."""
    return schemathesis.openapi.from_wsgi("/api/schema/", InProcessApp()).raw_schema


@pytest.fixture(
    params=[(persona, shard) for persona in SHARDS for shard in SHARDS[persona]],
    ids=lambda param: "-".join(param),
)
def api_schema(request, seeded, db):
    """One shard of the schema the app serves, set up to call the app in-process as one
    persona.

    The site admin gets the coverage phase too (boundary values, each field missing or of
    the wrong type, a DELETE to every operation), always on the seeded objects, so that
    every body and query reaches the view's validation. The others get fuzzed requests
    whose path parameters are mostly the seeded objects and sometimes generated (404s)."""
    persona, shard = request.param
    user = get_user_model().objects.get(pk=seeded.users[persona])
    raw = copy.deepcopy(served_schema())
    raw["paths"] = {p: item for p, item in raw["paths"].items() if shard_of(persona, p) == shard}
    # one entry per set of seeded objects, not per path: schemathesis matches each entry
    # against the operation again for every case it generates and checks
    fixed_paths: dict[tuple, list[str]] = {}
    for path in raw["paths"]:
        if (real := seeded.path_parameters(path)) is not None:
            fixed_paths.setdefault(tuple(real.items()), []).append(path)
    fixed = [
        {"include-path": paths, "parameters": {f"path.{k}": v for k, v in real}}
        for real, paths in fixed_paths.items()
    ]
    coverage = {
        "enabled": persona == "admin",
        "unexpected-methods": ["DELETE"],
        "generate-duplicate-query-parameters": False,
        # the suite: the invalid cases (each field missing, of the wrong type or out of
        # range, an unexpected method); a deep run adds the valid boundary values
        "generation": {"mode": "all" if DEEP else "negative"},
    }
    config = schemathesis.Config.from_dict(
        {
            "headers": {"Authorization": f"Token {Token.objects.create(user=user).key}"},
            "generation": {
                "max-examples": DEEP or MAX_EXAMPLES[persona],
                "deterministic": not DEEP,
            },
            "phases": {"coverage": coverage, "stateful": {"enabled": False}},
            "operations": fixed if persona == "admin" else [],
        }
    )
    schema = schemathesis.openapi.from_dict(raw, config=config)
    schema.app, schema.location = InProcessApp(), "/api/schema/"

    @schema.hook("before_generate_path_parameters")
    def real_objects(context, strategy):
        real = seeded.path_parameters(context.operation.path)
        # mostly the seeded objects; sometimes whatever was generated (the 404s)
        return strategy if real is None else st.one_of(st.just(real), st.just(real), strategy)

    # What exists now (Django, the schema, the seeded objects) lives through the whole test:
    # frozen, the cyclic GC no longer walks it again in each of the dozens of full
    # collections that thousands of requests (and their big error bodies) set off.
    gc.freeze()
    with override_settings(MEDIA_ROOT=seeded.media):  # where the seeded export's file is
        yield schema
    gc.unfreeze()


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
class TestSchemaFuzzing:
    """The fuzzing items, in a class so that the objects they share (`seeded`) are made once
    and rolled back after the last of them, before any other test of the module runs."""

    @schema.parametrize()
    @settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def test_no_operation_answers_a_server_error_or_off_its_schema(self, case):
        savepoint = transaction.savepoint()
        try:
            response = case.call()
            case.validate_response(response, checks=_checks_for(response))
        finally:
            transaction.savepoint_rollback(savepoint)


def test_every_path_of_the_schema_falls_into_one_shard_of_each_persona(db):
    paths = served_schema()["paths"]
    for persona, shards in SHARDS.items():
        shard_by_path = {path: shard_of(persona, path) for path in paths}
        assert None not in shard_by_path.values(), (persona, shard_by_path)
        assert set(shard_by_path.values()) == set(shards), persona  # and no shard is empty


def _checks_for(response) -> list:
    """Every check, except on the page Django answers to a path no URL pattern matches (a
    negative id, a slug with a dot): that 404 comes before any API view, as HTML."""
    content_type = response.headers.get("content-type", [""])[0]
    if response.status_code == 404 and content_type.startswith("text/html"):
        return [not_a_server_error]
    return CHECKS


# --- what the fuzzing found, and what it leaves out ---------------------------------------------


_api = token_client


def test_an_upload_without_a_body_is_a_400_not_a_500(admin_user, project):
    # an empty body parses to a plain dict, which has no .dict() (a 500 before)
    response = _api(admin_user).post("/api/v1/annotation/uploads/")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"project", "dataset", "files"}


def test_a_campaign_id_past_the_bigint_range_is_not_found(annotator):
    # the claim's fixed SQL overflowed on it: "bigint out of range" (a 500 before)
    response = _api(annotator).post(f"/api/v1/annotation/campaigns/{2**70}/next/")
    assert response.status_code == 404
    assert response.json() == {"detail": "no such campaign", "code": "not_found"}


def test_query_parameters_are_validated_before_they_reach_the_database(researcher, project):
    # the catalogue looked ?project= up as it came: a NUL character reached PostgreSQL
    # (DataError, a 500 before); the report's filters are validated the same way now
    skills = _api(researcher).get("/api/v1/annotation/skills/", {"project": "a\x00b"})
    report = _api(researcher).get(
        f"/api/v1/projects/{project.slug}/analytics/report", {"skill": "a\x00b", "resamples": 0}
    )
    assert skills.status_code == report.status_code == 400
    assert "project" in skills.json()["fields"] and "skill" in report.json()["fields"]


def test_a_form_with_too_many_fields_is_a_json_400(researcher, project):
    # Django refuses it while DRF parses the body: a 400 from Django, not a 500 of the API
    body = urlencode([("response_ids", "1")] * 1001 + [("campaign", "1"), ("extra", "1")])
    response = _api(researcher).generic(
        "POST",
        f"/api/v1/projects/{project.slug}/reannotation",
        body,
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400 and response.json()["code"] == "bad_request"


def test_a_score_import_made_by_no_one_is_listed_as_the_schema_says(researcher, project):
    # created_by is null for imports made by a command; the schema said string
    scores_import(project_slug=project.slug, files=[("s.csv", IMPORTED.encode())])
    listed = _api(researcher).get(f"/api/v1/projects/{project.slug}/scores/imports/").json()
    assert listed[0]["created_by"] is None
    schema = _api(researcher).get("/api/schema/", {"format": "json"}).json()
    created_by = schema["components"]["schemas"]["AnalyticsScoreImport"]["properties"]
    assert created_by["created_by"]["nullable"] is True


def test_an_export_is_downloaded_whatever_the_client_accepts(researcher, project):
    job = export_job_create(project=project, kind="long", enqueue=False)
    export_job_run(job_id=job.pk)
    response = _api(researcher).get(f"/api/v1/exports/{job.pk}/download/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")


# --- the error shape ----------------------------------------------------------------------------


def test_a_400_names_a_code_and_the_fields_at_fault(researcher, project):
    response = _api(researcher).post(
        f"/api/v1/projects/{project.slug}/exports/", {"kind": "pie"}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    message = (
        "'pie' is not one of long, flask_review, wide, preferences, judge_training, hf_dataset"
    )
    assert body["detail"] == f"kind: {message}" and body["code"] == "invalid"
    assert body["fields"] == {"kind": [message]}


def test_every_refusal_is_json_with_a_code(project, annotator, outsider):
    exports = f"/api/v1/projects/{project.slug}/exports/"
    refusals = {
        "not_authenticated": _api().get(exports),
        "authentication_failed": APIClient(HTTP_AUTHORIZATION="Token nope").get(exports),
        "permission_denied": _api(annotator).get(exports),
        "not_found": _api(outsider).get(exports),
        "method_not_allowed": _api(annotator).delete("/api/v1/annotation/projects/"),
        "unsupported_media_type": _api(annotator).generic(
            "POST", "/api/v1/annotation/assignments/1/skip/", "x", content_type="text/plain"
        ),
    }
    for code, response in refusals.items():
        assert response.json()["code"] == code, (code, response.json())
        assert isinstance(response.json()["detail"], str)


def test_an_unexpected_error_is_a_json_500_without_a_traceback(researcher, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("internal detail")

    monkeypatch.setattr("annotation.projects.apis.selectors.project_list_for_user", broken)
    response = _api(researcher, raise_request_exception=False).get("/api/v1/annotation/projects/")
    assert response.status_code == 500
    assert response.json() == {
        "detail": "the server failed to answer this request",
        "code": "server_error",
    }
    # and Django's test client still re-raises it, as for any other view
    with pytest.raises(RuntimeError, match="internal detail"):
        _api(researcher).get("/api/v1/annotation/projects/")


# --- operations that enqueue work (left to their 400s here: nothing may be enqueued) ----------


def test_what_starts_background_work_refuses_bad_input_before_enqueuing_anything(
    admin_user, researcher, project, tmp_path, django_capture_on_commit_callbacks
):
    # given
    judge = make_judge(project)
    run = judge_run_create(judge=judge, dataset=make_dataset(project, tmp_path, items=1))
    admin, staff = _api(admin_user), _api(researcher)
    bad_file = SimpleUploadedFile("rows.yaml", b"a: 1\n")
    # when
    with django_capture_on_commit_callbacks() as enqueued:
        answers = [
            admin.post(
                "/api/v1/annotation/uploads/",
                {"project": project.slug, "dataset": "X", "files": [bad_file], "format": "yaml"},
                format="multipart",
            ),
            staff.post(
                f"/api/v1/projects/{project.slug}/exports/",
                {"kind": "long", "skill": ["Nope"]},
                format="json",
            ),
            staff.post(f"/api/v1/judging/runs/{run.pk}/start/", {"budget": "-1"}, format="json"),
            staff.post(f"/api/v1/judging/runs/{run.pk}/resume/", {"budget": "x"}, format="json"),
        ]
        labels = staff.post(
            f"/api/v1/projects/{project.slug}/preferences/import/",
            {"format": "xlsx"},
            format="multipart",
        )
    # then
    assert [a.status_code for a in answers] == [400, 400, 400, 400]
    assert labels.status_code == 400 and labels.json()["code"] == "invalid"
    assert {p["field"] for p in labels.json()["problems"]} == {"file", "format"}
    assert all(a.json()["code"] == "invalid" and a.json()["fields"] for a in answers)
    assert enqueued == []
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING


# --- the schema and the docs page ---------------------------------------------------------------


def test_every_operation_is_tagged_secured_and_documents_its_errors(db):
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    operations = [op for ops in schema["paths"].values() for op in ops.values()]
    assert len(operations) >= 30
    error = {"$ref": "#/components/schemas/Error"}
    for op in operations:
        assert op["tags"][0] in {"annotation", "judging", "analytics"}, op["operationId"]
        assert {"tokenAuth": []} in op["security"] and {"cookieAuth": []} in op["security"]
        for code in ("401", "403", "404"):
            assert op["responses"][code]["content"]["application/json"]["schema"] == error
    judgments = schema["paths"]["/api/v1/judging/runs/{id}/judgments/"]["get"]
    assert {"limit", "offset", "status"} <= {p["name"] for p in judgments["parameters"]}
    page = judgments["responses"]["200"]["content"]["application/json"]["schema"]
    assert page == {"$ref": "#/components/schemas/PaginatedJudgingJudgmentList"}


def test_the_docs_page_is_swagger_ui_from_this_site_only(db):
    client = Client()
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    # no CDN, and no inline script (the Content-Security-Policy allows none)
    assert "cdn.jsdelivr.net" not in html and "<script>" not in html
    script = client.get("/api/docs/", {"script": ""})
    assert script["Content-Type"].startswith("application/javascript")
    assert reverse("api-schema") in script.content.decode()
