"""Judging pages: for each view the happy path, ownership (404 non-members, 403 annotators),
the wrong method (405) and htmx partial vs full page; plus judge and template validation,
the FLASK prompt-file import, the estimate shown before anything starts, starting on commit,
the polling progress panel (286 once settled), pause/resume/cancel, and escaped raw output."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import Response, UploadSource, UploadStatus
from judging import prompts
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    Judgment,
    JudgmentStatus,
    PromptTemplate,
    RunStatus,
    TemplateSource,
)
from judging.services import judge_config_create, judge_run_create, prompt_template_create
from tests.conftest import SHARED_FLASK
from tests.judging.providers import llm_fields, provider_for

HX = {"HX-Request": "true"}
SKILLS = ["Factuality", "Comprehension", "Readability"]
XSS = "<script>alert('judge')</script>"


def make_dataset(project, tmp_path, name="D", items=3, models=("m1", "m2"), reference=False):
    lines = []
    for i in range(items):
        row = {
            "id": f"i{i}",
            "instruction": f"Question {i} of {name}",
            "skills": SKILLS,
            "domains": ["History"],
            "difficulty": 2,
            "responses": [{"model": m, "text": f"{m} says {i}"} for m in models],
        }
        if reference:
            row["reference"] = f"The answer to {i}"
        lines.append(json.dumps(row))
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    upload = dataset_upload_create(
        project=project,
        dataset_name=name,
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


def make_judge(project, name="GPT judge", **extra):
    url = extra.pop("base_url", "http://127.0.0.1:9/v1")
    fields = {
        **llm_fields(url, api_key_env=extra.pop("api_key_env", "OPENAI_API_KEY")),
        "model": "judge-model",
        "use_reference": False,
        "price_per_1k_prompt": Decimal("0.5"),
        "price_per_1k_completion": Decimal("1.5"),
    }
    fields.update(extra)
    return judge_config_create(project=project, name=name, kind=JudgeKind.LLM, **fields)


def set_status(run, status, **extra):
    JudgeRun.objects.filter(pk=run.pk).update(status=status, **extra)
    run.refresh_from_db()
    return run


def add_judgment(run, response, status=JudgmentStatus.PARSE_FAILED, **extra):
    fields = {
        "request": {"model": "judge-model", "messages": [{"role": "user", "content": "hi"}]},
        "raw_output": XSS,
        "error": "no scores found",
        "attempts": 1,
    }
    fields.update(extra)
    return Judgment.objects.create(run=run, response=response, status=status, **fields)


def url(name, *args):
    return reverse(f"judging:{name}", args=args)


def is_full_page(response) -> bool:
    return b"<html" in response.content


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)


@pytest.fixture
def judge(project):
    return make_judge(project)


@pytest.fixture
def run(judge, dataset):
    return judge_run_create(judge=judge, dataset=dataset)


@pytest.fixture
def judgment(run):
    return add_judgment(run, Response.objects.filter(item__dataset=run.dataset).first())


@pytest.fixture
def template(project, researcher):
    row, _ = prompt_template_create(
        project=project,
        key="terse",
        name="Terse",
        user_template="{skills}\n{instruction}\n{response}",
        created_by=researcher,
    )
    return row


@pytest.fixture
def dispatched(monkeypatch):
    """judge_run_dispatch_task.delay, recorded instead of sent to the broker."""
    calls = []
    monkeypatch.setattr(
        "judging.tasks.judge_run_dispatch_task.delay", lambda *args: calls.append(args)
    )
    return calls


# --- the four tests every view gets -------------------------------------------------------------

#: view -> (methods it answers, partial id an htmx request gets)
VIEWS = {
    "judge-list": ("GET", "judge-table"),
    "judge-create": ("GET POST", "judge-form"),
    "judge-detail": ("GET", "run-table"),
    "run-create": ("GET POST", "run-form"),
    "run-detail": ("GET", "run-progress"),
    "run-start": ("POST", "run-progress"),
    "run-pause": ("POST", "run-progress"),
    "run-resume": ("POST", "run-progress"),
    "run-cancel": ("POST", "run-progress"),
    "judgment-detail": ("GET", "judgment-output"),
    "template-list": ("GET", "template-table"),
    "template-create": ("GET POST", "template-form"),
    "template-import": ("GET POST", "import-form"),
    "template-detail": ("GET", "template-preview"),
}


@pytest.fixture
def urls(project, judge, run, judgment, template):
    slug = project.slug
    return {
        "judge-list": url("judge-list", slug),
        "judge-create": url("judge-create", slug),
        "judge-detail": url("judge-detail", judge.pk),
        "run-create": url("run-create", judge.pk),
        "run-detail": url("run-detail", run.pk),
        "run-start": url("run-start", run.pk),
        "run-pause": url("run-pause", run.pk),
        "run-resume": url("run-resume", run.pk),
        "run-cancel": url("run-cancel", run.pk),
        "judgment-detail": url("judgment-detail", judgment.pk),
        "template-list": url("template-list", slug),
        "template-create": url("template-create", slug),
        "template-import": url("template-import", slug),
        "template-detail": url("template-detail", slug, template.pk),
    }


def _call(client, name, target, **kwargs):
    method = VIEWS[name][0].split()[0].lower()
    return getattr(client, method)(target, **kwargs)


@pytest.mark.parametrize("name", VIEWS)
def test_every_judging_page_is_404_for_non_members(outsider_client, urls, name, dispatched):
    assert _call(outsider_client, name, urls[name]).status_code == 404


@pytest.mark.parametrize("name", VIEWS)
def test_every_judging_page_is_403_for_annotators(annotator_client, urls, name, dispatched):
    assert _call(annotator_client, name, urls[name]).status_code == 403


@pytest.mark.parametrize("name", VIEWS)
def test_every_judging_page_refuses_the_wrong_method(researcher_client, urls, name):
    methods = VIEWS[name][0].split()
    wrong = "delete" if "GET" in methods and "POST" in methods else "post"
    if methods == ["POST"]:
        wrong = "get"
    assert getattr(researcher_client, wrong)(urls[name]).status_code == 405


@pytest.mark.parametrize("name", VIEWS)
def test_every_judging_page_answers_htmx_with_its_partial_only(
    researcher_client, urls, name, dispatched
):
    # given the full page (or, for buttons, the redirect a plain form post gets)
    full = _call(researcher_client, name, urls[name])
    hx = _call(researcher_client, name, urls[name], headers=HX)
    # then
    if VIEWS[name][0] == "POST":
        assert full.status_code == 302 and full["Location"] == urls["run-detail"]
    else:
        assert full.status_code == 200 and is_full_page(full)
    assert hx.status_code in (200, 286) and not is_full_page(hx)
    assert f'id="{VIEWS[name][1]}"'.encode() in hx.content


def test_anonymous_visitors_are_sent_to_the_login_page(client, urls):
    response = client.get(urls["judge-list"])
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_project_page_links_to_its_judges(researcher_client, project):
    body = researcher_client.get(reverse("annotation:project-detail", args=[project.slug]))
    assert url("judge-list", project.slug).encode() in body.content


# --- judges ---------------------------------------------------------------------------------------


def judge_data(**extra):
    data = {
        "kind": "llm",
        "name": "Local judge",
        "provider": str(provider_for("http://127.0.0.1:8089/v1", key_env="FLASK_JUDGE_KEY").pk),
        "base_url": "",
        "model": "fake-judge",
        "temperature": "0",
        "max_tokens": "512",
        "extra_params": '{"top_p": 0.9}',
        "timeout_seconds": "30",
        "max_attempts": "3",
        "samples": "2",
        "requests_per_minute": "60",
        "tokens_per_minute": "",
        "price_per_1k_prompt": "0.01",
        "price_per_1k_completion": "0.03",
    }
    data.update(extra)
    return {k: v for k, v in data.items() if v is not None}


def test_the_judge_list_shows_judges_and_recent_runs(researcher_client, project, judge, run):
    response = researcher_client.get(url("judge-list", project.slug))
    body = response.content.decode()
    assert response.status_code == 200
    assert judge.name in body and url("judge-detail", judge.pk) in body
    assert url("run-detail", run.pk) in body and 'data-status="pending"' in body


def _queries(client, target, **kwargs) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(target, **kwargs).status_code in (200, 286)
    return len(ctx.captured_queries)


def test_the_judge_list_reads_a_fixed_number_of_queries(
    researcher_client, project, dataset, judge, run
):
    # given one judge and run, then five more of each
    few = _queries(researcher_client, url("judge-list", project.slug))
    for n in range(5):
        judge_run_create(judge=make_judge(project, name=f"J{n}"), dataset=dataset)
    # then
    assert _queries(researcher_client, url("judge-list", project.slug)) == few


def test_a_researcher_creates_an_llm_judge_and_sees_its_settings(researcher_client, project):
    # when
    response = researcher_client.post(url("judge-create", project.slug), judge_data())
    # then
    judge = JudgeConfig.objects.get(project=project, name="Local judge")
    assert response.status_code == 302 and response["Location"] == url("judge-detail", judge.pk)
    assert judge.kind == JudgeKind.LLM and judge.provider.api_key_env == "FLASK_JUDGE_KEY"
    assert judge.base_url == "http://127.0.0.1:8089/v1"  # the provider's first
    assert judge.extra_params == {"top_p": 0.9} and judge.samples == 2
    assert judge.requests_per_minute == 60 and judge.tokens_per_minute is None
    assert judge.price_per_1k_completion == Decimal("0.03")
    # the reference box was not ticked: the built-in template without the reference answer
    assert judge.prompt_template.key == "flask-no-reference" and not judge.use_reference
    page = researcher_client.get(url("judge-detail", judge.pk)).content.decode()
    assert "fake-judge" in page and "flask-no-reference v" in page
    # where the key is kept is the operator's business: the page does not say
    assert "FLASK_JUDGE_KEY" not in page and "kept on the workers by a site admin" in page


def test_a_baseline_judge_needs_only_its_metric(researcher_client, project):
    data = {"kind": "baseline", "name": "F1", "baseline": "token-f1"}
    response = researcher_client.post(url("judge-create", project.slug), judge_data(**data))
    judge = JudgeConfig.objects.get(name="F1")
    assert response.status_code == 302
    assert (judge.kind, judge.baseline, judge.base_url, judge.samples) == (
        "baseline",
        "token-f1",
        "",
        1,
    )


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"provider": ""}, "provider", "needs a provider"),
        ({"provider": "999999"}, "provider", "Select a valid choice"),
        ({"base_url": "http://evil.example/v1"}, "base_url", "declares these base URLs only"),
        ({"model": ""}, "model", "needs a model name"),
        ({"extra_params": "{top_p: 0.9"}, "extra_params", "Enter a valid JSON"),
        ({"extra_params": "[1, 2]"}, "extra_params", "must be a JSON object"),
        ({"extra_params": '{"model": "other"}'}, "extra_params", "cannot be set here"),
        ({"extra_params": '{"api_key": "x"}'}, "extra_params", "looks like a credential"),
        ({"kind": "baseline", "baseline": ""}, "baseline", "Choose a baseline"),
        ({"temperature": "3"}, "temperature", "less than or equal to 2"),
    ],
)
def test_invalid_judge_settings_are_answered_200_with_the_error(
    researcher_client, project, data, field, message
):
    response = researcher_client.post(url("judge-create", project.slug), judge_data(**data))
    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors[field])
    assert not JudgeConfig.objects.filter(project=project).exists()


def test_a_project_template_must_agree_with_the_reference_setting(
    researcher_client, project, template
):
    data = judge_data(prompt_template=str(template.pk), use_reference="on")
    response = researcher_client.post(url("judge-create", project.slug), data)
    assert "does not use the reference answer" in str(response.context["form"].errors)
    # without the reference, the template is pinned
    data.pop("use_reference")
    researcher_client.post(url("judge-create", project.slug), data)
    assert JudgeConfig.objects.get(name="Local judge").prompt_template == template


def test_a_judge_name_is_unique_in_its_project(researcher_client, project, judge):
    response = researcher_client.post(
        url("judge-create", project.slug), judge_data(name=judge.name)
    )
    assert response.status_code == 200 and "already" in str(response.context["form"].errors)


def test_an_htmx_judge_form_with_errors_swaps_the_form_and_success_redirects_the_page(
    researcher_client, project
):
    bad = researcher_client.post(
        url("judge-create", project.slug), judge_data(model=""), headers=HX
    )
    assert bad.status_code == 200 and not is_full_page(bad) and b'id="judge-form"' in bad.content
    good = researcher_client.post(url("judge-create", project.slug), judge_data(), headers=HX)
    judge = JudgeConfig.objects.get(name="Local judge")
    assert good.status_code == 200 and good["HX-Redirect"] == url("judge-detail", judge.pk)


# --- prompt templates -----------------------------------------------------------------------------


def test_the_template_list_shows_built_in_and_project_templates_with_versions(
    researcher_client, project, template
):
    prompt_template_create(
        project=project,
        key="terse",
        name="Terse",
        user_template="{skills} {instruction} {response}",
    )
    body = researcher_client.get(url("template-list", project.slug)).content.decode()
    assert "flask-no-reference" in body and "flask-reference" in body
    assert '<code>terse</code></td><td class="num">v2</td><td class="num">2</td>' in body


def test_a_custom_template_is_saved_as_a_version_and_unchanged_text_adds_none(
    researcher_client, project
):
    data = {
        "name": "Short review",
        "key": "",
        "system_prompt": "You review {{carefully}}.",
        "user_template": "{skills}\r\n[Q]\r\n{instruction}\r\n[A]\r\n{response}\r\n",
    }
    # when
    first = researcher_client.post(url("template-create", project.slug), data)
    again = researcher_client.post(url("template-create", project.slug), data)
    changed = researcher_client.post(
        url("template-create", project.slug),
        {**data, "user_template": "{skills}{instruction}{response}"},
    )
    # then
    rows = list(PromptTemplate.objects.filter(project=project, key="short-review"))
    assert [r.version for r in rows] == [2, 1]
    v1 = rows[1]
    assert v1.source == TemplateSource.CUSTOM and "\r" not in v1.user_template
    assert (
        v1.content_hash
        == prompts.TemplateText.from_text(
            v1.user_template, key="x", system_prompt=v1.system_prompt
        ).content_hash
    )
    assert first["Location"] == again["Location"] == url("template-detail", project.slug, v1.pk)
    assert changed["Location"] == url("template-detail", project.slug, rows[0].pk)


def test_a_template_with_bad_placeholders_is_answered_200_with_its_line_numbers(
    researcher_client, project
):
    data = {"name": "Bad", "user_template": "{skills}\n{question}\n{response} {0}"}
    response = researcher_client.post(url("template-create", project.slug), data)
    errors = " ".join(response.context["form"].errors["user_template"])
    assert response.status_code == 200
    assert "line 2: unknown placeholder {question} (did you mean {instruction}?)" in errors
    assert "line 3:" in errors
    assert not PromptTemplate.objects.filter(project=project).exists()


def test_a_lone_brace_in_the_system_prompt_is_reported_on_the_system_prompt(
    researcher_client, project
):
    data = {
        "name": "Bad",
        "system_prompt": "Reply in {JSON",
        "user_template": "{skills}{instruction}{response}",
    }
    response = researcher_client.post(url("template-create", project.slug), data, headers=HX)
    assert response.status_code == 200 and not is_full_page(response)
    assert b"line 1: lone &#x27;{&#x27;" in response.content


def test_the_official_flask_prompt_file_imports_as_versioned_templates(researcher_client, project):
    path = SHARED_FLASK / "review_prompt.jsonl"
    if not path.is_file():
        pytest.skip("../shared/data/flask/review_prompt.jsonl is not present")
    # when
    with path.open("rb") as fh:
        response = researcher_client.post(url("template-import", project.slug), {"file": fh})
    with path.open("rb") as fh:
        researcher_client.post(url("template-import", project.slug), {"file": fh})
    # then
    assert response.status_code == 302
    rows = {r.key: r for r in PromptTemplate.objects.filter(project=project)}
    assert set(rows) == {"flask-file-1", "flask-file-2"}
    assert not rows["flask-file-1"].with_reference and rows["flask-file-2"].with_reference
    assert all(r.version == 1 and r.source == TemplateSource.IMPORT for r in rows.values())
    assert "{instruction}" in rows["flask-file-1"].user_template


def _prompt_file(*lines):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("prompt.jsonl", "\n".join(lines).encode())


GOOD_LINE = json.dumps(
    {
        "prompt_id": "lab",
        "system_prompt": "Be fair.",
        "prompt_template": "{skills}\n{question}\n{response}\n{sample_answer}",
    }
)


def test_a_made_up_prompt_file_imports_and_a_changed_one_adds_a_version(researcher_client, project):
    researcher_client.post(url("template-import", project.slug), {"file": _prompt_file(GOOD_LINE)})
    changed = GOOD_LINE.replace("Be fair.", "Be very fair.")
    researcher_client.post(url("template-import", project.slug), {"file": _prompt_file(changed)})
    rows = list(PromptTemplate.objects.filter(project=project, key="flask-file-lab"))
    assert [r.version for r in rows] == [2, 1] and rows[0].with_reference
    assert rows[0].system_prompt == "Be very fair."


def test_a_bad_prompt_file_lists_its_lines_as_errors_and_saves_nothing(researcher_client, project):
    lines = (GOOD_LINE, "{not json", json.dumps({"prompt_id": 2}))
    bad = _prompt_file(*lines)
    response = researcher_client.post(url("template-import", project.slug), {"file": bad})
    errors = response.context["form"].errors["file"]
    assert response.status_code == 200
    assert errors[0].startswith("line 2: not valid JSON")
    assert errors[1].startswith("line 3: missing key(s): system_prompt, prompt_template")
    bad = _prompt_file(*lines)
    hx = researcher_client.post(url("template-import", project.slug), {"file": bad}, headers=HX)
    assert hx.status_code == 200 and not is_full_page(hx)
    assert b"<li>line 2: not valid JSON" in hx.content
    assert not PromptTemplate.objects.filter(project=project).exists()


def test_the_preview_shows_exactly_what_the_judge_gets_for_a_response(
    researcher_client, project, dataset, template
):
    # when
    response = researcher_client.get(url("template-detail", project.slug, template.pk))
    # then the first response's prompt, with its item's skills block, is shown
    body = response.content.decode()
    first = Response.objects.filter(item__dataset=dataset).order_by("pk").first()
    assert f"Response {first.pk} · item i0 · model {first.model_name}" in body
    assert "Skill: Factuality" in body and "Question 0 of D" in body and "m1 says 0" in body
    assert f"response={first.pk + 1}" in body  # the next response, through htmx or a plain link


def test_the_preview_of_a_reference_template_on_items_without_one_says_why(
    researcher_client, project, dataset
):
    builtin = researcher_client.get(url("template-list", project.slug))  # materialises built-ins
    assert builtin.status_code == 200
    ref = PromptTemplate.objects.get(project__isnull=True, key="flask-reference")
    response = researcher_client.get(
        url("template-detail", project.slug, ref.pk), {"dataset": dataset.pk}, headers=HX
    )
    assert b"needs a reference answer and this item has none" in response.content


def test_the_preview_refuses_a_response_of_another_dataset(
    researcher_client, project, dataset, template, tmp_path
):
    other = make_dataset(project, tmp_path, name="Other")
    foreign = Response.objects.filter(item__dataset=other).first()
    response = researcher_client.get(
        url("template-detail", project.slug, template.pk),
        {"dataset": dataset.pk, "response": foreign.pk},
        headers=HX,
    )
    assert b"No such response in this dataset" in response.content


def test_another_projects_template_is_not_found(researcher_client, project, django_user_model):
    from annotation.services.projects import project_create

    other = project_create(slug="other", name="Other")
    row, _ = prompt_template_create(
        project=other, key="x", name="X", user_template="{skills}{instruction}{response}"
    )
    assert researcher_client.get(url("template-detail", project.slug, row.pk)).status_code == 404


# --- runs -----------------------------------------------------------------------------------------


def test_the_estimate_is_shown_before_anything_is_created_or_started(
    researcher_client, judge, dataset, dispatched
):
    # when the dataset is chosen (htmx re-renders the form; a plain GET shows the same)
    response = researcher_client.get(
        url("run-create", judge.pk), {"dataset": dataset.pk}, headers=HX
    )
    full = researcher_client.get(url("run-create", judge.pk), {"dataset": dataset.pk})
    # then
    estimate = full.context["estimate"]
    assert estimate.calls == 6 and estimate.completion_tokens == 6 * judge.max_tokens
    assert (
        estimate.cost
        == (Decimal("0.5") * estimate.prompt_tokens + Decimal("1.5") * estimate.completion_tokens)
        / 1000
    )
    assert b'id="estimate-calls">6<' in response.content
    assert not JudgeRun.objects.exists() and dispatched == []


def test_creating_a_run_leaves_it_pending_with_its_estimate_and_a_start_button(
    researcher_client, judge, dataset, dispatched, django_capture_on_commit_callbacks
):
    # when
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            url("run-create", judge.pk), {"dataset": dataset.pk, "budget": "2.5"}
        )
    # then
    run = JudgeRun.objects.get()
    assert response["Location"] == url("run-detail", run.pk)
    assert run.status == RunStatus.PENDING and run.budget == Decimal("2.5")
    assert run.estimate["calls"] == 6 and dispatched == []
    page = researcher_client.get(url("run-detail", run.pk)).content.decode()
    assert url("run-start", run.pk) in page and ">Start</button>" in page
    assert str(run.estimate["prompt_tokens"]) in page.replace(",", "")


def test_a_campaign_run_scores_the_activated_campaigns_responses(
    researcher_client, project, judge, dataset
):
    # given a draft campaign scoring one of the two models
    campaign = campaign_create(project=project, dataset=dataset, name="C", model_names=["m1"])
    # then a draft cannot be judged (no rubric is pinned yet)
    draft = researcher_client.post(url("run-create", judge.pk), {"campaign": campaign.pk})
    assert "campaign" in draft.context["form"].errors
    # when activated
    campaign_activate(campaign=campaign)
    researcher_client.post(url("run-create", judge.pk), {"campaign": campaign.pk})
    # then
    run = JudgeRun.objects.get()
    assert (run.campaign, run.dataset, run.total) == (campaign, dataset, 3)


def test_a_campaign_of_another_dataset_is_refused(
    researcher_client, project, judge, dataset, tmp_path
):
    other = make_dataset(project, tmp_path, name="Other")
    campaign = campaign_create(project=project, dataset=other, name="C")
    campaign_activate(campaign=campaign)
    data = {"dataset": dataset.pk, "campaign": campaign.pk}
    response = researcher_client.post(url("run-create", judge.pk), data)
    assert response.status_code == 200 and "another dataset" in str(response.context["form"].errors)
    assert not JudgeRun.objects.exists()


def test_a_reference_judge_on_items_without_references_cannot_be_created(
    researcher_client, project, dataset
):
    judge = make_judge(project, name="Ref", use_reference=True)
    response = researcher_client.post(url("run-create", judge.pk), {"dataset": dataset.pk})
    assert response.status_code == 200 and "needs a reference answer" in response.content.decode()
    assert not JudgeRun.objects.exists()


def test_starting_a_run_enqueues_its_dispatch_on_commit(
    researcher_client, run, dispatched, django_capture_on_commit_callbacks
):
    # when
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = researcher_client.post(url("run-start", run.pk), headers=HX)
    # then nothing was sent before the commit, and exactly one dispatch after it
    assert dispatched == [] and len(callbacks) == 1
    callbacks[0]()
    assert dispatched == [(run.pk, 0)]
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.started_at is not None
    assert response.status_code == 200 and b'hx-trigger="every 2s"' in response.content


def test_a_run_can_be_started_only_once(
    researcher_client, run, dispatched, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(url("run-start", run.pk))
        second = researcher_client.post(url("run-start", run.pk), headers=HX)
    assert dispatched == [(run.pk, 0)]
    assert b"A running run cannot be started." in second.content


def test_the_progress_panel_polls_while_the_run_runs(researcher_client, run):
    set_status(run, RunStatus.RUNNING)
    response = researcher_client.get(url("run-detail", run.pk), headers=HX)
    assert response.status_code == 200
    assert b'hx-trigger="every 2s"' in response.content
    assert f'hx-get="{url("run-detail", run.pk)}"'.encode() in response.content


@pytest.mark.parametrize(
    "status", [RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.PAUSED]
)
def test_the_progress_panel_stops_polling_once_the_run_is_settled(researcher_client, run, status):
    set_status(run, status)
    response = researcher_client.get(url("run-detail", run.pk), headers=HX)
    assert response.status_code == 286
    assert b"every 2s" not in response.content
    assert f'data-status="{status}"'.encode() in response.content


def test_the_progress_panel_shows_counts_tokens_and_cost_against_budget(
    researcher_client, run, dataset
):
    # given 6 responses: 2 ok (1 from the cache), 1 partial, 1 unparseable, 1 failed
    responses = list(Response.objects.filter(item__dataset=dataset).order_by("pk"))
    for response, status in zip(
        responses,
        [JudgmentStatus.OK, JudgmentStatus.OK, JudgmentStatus.PARTIAL]
        + [JudgmentStatus.PARSE_FAILED, JudgmentStatus.FAILED],
        strict=False,
    ):
        add_judgment(run, response, status=status)
    set_status(
        run,
        RunStatus.RUNNING,
        done=3,
        parse_failed=1,
        failed=1,
        cached=1,
        prompt_tokens=1234,
        completion_tokens=567,
        cost=Decimal("0.75"),
        budget=Decimal("3"),
    )
    # when
    response = researcher_client.get(url("run-detail", run.pk), headers=HX)
    # then
    body = response.content.decode()
    assert "<b>83%</b> · 5 of 6 judgments" in body
    for count in ("ok 2", "partial 1", "parse failed 1", "failed 1", "from cache 1"):
        assert count in body
    assert "1,234" in body and "567" in body
    assert 'id="run-cost">0.7500<' in body and "(25% used)" in body


def test_polling_the_progress_panel_reads_a_fixed_number_of_queries(
    researcher_client, run, dataset
):
    set_status(run, RunStatus.RUNNING)
    responses = list(Response.objects.filter(item__dataset=dataset))
    add_judgment(run, responses[0])
    one = _queries(researcher_client, url("run-detail", run.pk), headers=HX)
    for response in responses[1:]:
        add_judgment(run, response)
    assert _queries(researcher_client, url("run-detail", run.pk), headers=HX) == one <= 6


def test_pause_resume_with_a_new_budget_and_cancel(
    researcher_client, run, dispatched, django_capture_on_commit_callbacks
):
    # given a run paused by its budget
    set_status(run, RunStatus.PAUSED, budget=Decimal("1"), error="budget reached")
    # when it is resumed with a higher budget
    with django_capture_on_commit_callbacks(execute=True):
        resumed = researcher_client.post(url("run-resume", run.pk), {"budget": "5"}, headers=HX)
    run.refresh_from_db()
    assert (run.status, run.budget, run.error) == (RunStatus.RUNNING, Decimal("5"), "")
    assert b"Run resumed." in resumed.content and dispatched == [(run.pk, 0)]
    # when paused, then cancelled
    researcher_client.post(url("run-pause", run.pk))
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.PAUSED
    researcher_client.post(url("run-cancel", run.pk))
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.finished_at is not None
    # then a cancelled run stays cancelled
    again = researcher_client.post(url("run-resume", run.pk), headers=HX)
    assert b"A cancelled run cannot be resumed." in again.content
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_resuming_without_a_budget_field_keeps_the_budget(
    researcher_client, run, dispatched, django_capture_on_commit_callbacks
):
    set_status(run, RunStatus.PAUSED, budget=Decimal("4"))
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(url("run-resume", run.pk))
    assert JudgeRun.objects.get(pk=run.pk).budget == Decimal("4")


def test_a_run_failed_by_the_health_check_can_be_resumed(
    researcher_client, run, dispatched, django_capture_on_commit_callbacks
):
    set_status(run, RunStatus.FAILED, error="no progress for a long time; resume to go on")
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(url("run-resume", run.pk))
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert dispatched == [(run.pk, 0)]


def test_a_finished_run_cannot_be_paused(researcher_client, run):
    set_status(run, RunStatus.DONE)
    response = researcher_client.post(url("run-pause", run.pk), follow=True)
    assert b"A done run cannot be paused." in response.content
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.DONE


def test_the_run_page_lists_the_latest_problems_with_a_link_to_their_output(
    researcher_client, run, judgment
):
    body = researcher_client.get(url("run-detail", run.pk)).content.decode()
    assert "no scores found" in body and "not parseable" in body
    assert f'hx-get="{url("judgment-detail", judgment.pk)}"' in body
    assert XSS not in body  # the raw output itself is only on the judgment's page


# --- judgments ------------------------------------------------------------------------------------


def test_raw_output_and_request_are_shown_escaped(researcher_client, run, dataset):
    response_row = Response.objects.filter(item__dataset=dataset).first()
    judgment = add_judgment(
        run,
        response_row,
        request={"model": "judge-model", "messages": [{"role": "user", "content": XSS}]},
        latency_ms=1234,
        prompt_tokens=321,
        completion_tokens=45,
        attempts=3,
    )
    # when
    full = researcher_client.get(url("judgment-detail", judgment.pk)).content.decode()
    inline = researcher_client.get(url("judgment-detail", judgment.pk), headers=HX).content
    # then
    assert XSS not in full and XSS.encode() not in inline
    escaped = "&lt;script&gt;alert(&#x27;judge&#x27;)&lt;/script&gt;"
    assert escaped in full and escaped.encode() in inline
    assert "1,234 ms" in full and "321 prompt" in full and "<th>Attempts</th><td>3</td>" in full
    assert "&quot;model&quot;: &quot;judge-model&quot;" in full


def test_a_judgments_scores_and_feedback_are_shown(researcher_client, run, dataset):
    from annotation.selectors import skills_for_response
    from judging.models import JudgeScore

    response_row = Response.objects.filter(item__dataset=dataset).first()
    judgment = add_judgment(run, response_row, status=JudgmentStatus.OK, error="")
    skills = skills_for_response(response=response_row, campaign=None)
    JudgeScore.objects.create(
        judgment=judgment,
        run=run,
        response=response_row,
        skill_id=skills[0].skill_id,
        rubric_id=skills[0].rubric_id,
        score=4,
        feedback="Mostly right <b>here</b>",
    )
    JudgeScore.objects.create(
        judgment=judgment,
        run=run,
        response=response_row,
        skill_id=skills[1].skill_id,
        rubric_id=skills[1].rubric_id,
        score=None,
        is_na=True,
    )
    body = researcher_client.get(url("judgment-detail", judgment.pk)).content.decode()
    assert f'<td>{skills[0].name}</td><td class="num">4' in body
    assert "N/A" in body and "Mostly right &lt;b&gt;here&lt;/b&gt;" in body


# --- admin ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model", [m for m in admin.site._registry if m._meta.app_label == "judging"]
)
def test_every_judging_admin_changelist_renders_for_site_admins(admin_client, model, judgment):
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"
    assert admin_client.get(reverse(name)).status_code == 200


def test_judgments_are_read_only_in_the_admin(admin_client, judgment):
    change = reverse("admin:judging_judgment_change", args=[judgment.pk])
    response = admin_client.post(change, {"raw_output": "edited"})
    judgment.refresh_from_db()
    assert response.status_code == 403 and judgment.raw_output == XSS


def test_a_judge_can_only_be_renamed_in_the_admin(admin_client, judge):
    change = reverse("admin:judging_judgeconfig_change", args=[judge.pk])
    response = admin_client.post(change, {"name": "Renamed", "model": "other-model"})
    judge.refresh_from_db()
    assert response.status_code == 302
    assert (judge.name, judge.model) == ("Renamed", "judge-model")
