"""A running run's page and API say what its calls are doing (judging.llm.activity): calls
in flight, the provider's pace, 429s and retries in the last minute, judgments a minute and
the ETA; the sections that depend on its status follow it when it stops (the poll's last
answer carries them), and the metadata run page polls its buttons along with its progress
and stops polling once the run stops."""

from __future__ import annotations

import socket

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from devtools.openai_server import FakeOpenAIServer
from judging import selectors
from judging.llm import activity
from judging.models import JudgeRun, RunStatus
from judging.services import judge_batch, judge_run_create
from judging.services.metadata import metadata_run_create
from judging.tasks import judge_batch_task
from tests.annotation.test_assignments import make_dataset
from tests.judging.test_metadata_runs import demo_dataset
from tests.judging.test_metadata_runs import llm_judge as metadata_judge
from tests.judging.test_metadata_runs import running as metadata_running
from tests.judging.test_runs import llm_judge, response_ids, running

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=3, models=("m1", "m2"))


@pytest.mark.slow  # the 429s' Retry-After: 1 s, and the first judge run of its process
def test_a_running_runs_page_and_api_say_what_its_calls_are_doing_then_stop_saying_it(
    project, dataset, researcher, researcher_client
):
    # given a provider with no declared limit that refuses the first 2 calls (429)
    with FakeOpenAIServer(style="python_dict", fail_first=2, fail_first_kind="http_429") as srv:
        run = running(judge_run_create(judge=llm_judge(project, srv), dataset=dataset))
        ids = response_ids(run)
        # when a batch judges 2 of its 6 responses
        with activity.run_scope(selectors.run_key("judge", run.pk)):
            judge_batch(run_id=run.pk, response_ids=ids[:2])
        url = reverse("judging:run-detail", args=[run.pk])
        page = researcher_client.get(url, **HTMX)
        # then the progress panel, still polling, says what happened in the last minute
        assert page.status_code == 200
        html = page.content.decode()
        assert "<b>0</b> calls in flight" in html
        assert "2 throttled (429)" in html and "2 retried" in html
        assert "no declared limit; learned window" in html
        assert "— judgments a minute" in html and "ETA —" in html
        live = APIClient()
        live.force_authenticate(researcher)
        data = live.get(f"/api/v1/judging/runs/{run.pk}/").json()["live"]
        assert data["in_flight"] == 0
        assert (data["throttled_last_minute"], data["retries_last_minute"]) == (2, 2)
        assert data["judgments_per_minute"] is None and data["eta_seconds"] is None
        assert data["provider"]["requests_per_minute"] is None
        assert data["provider"]["learned_window"] >= 1
        assert '<section class="card" id="run-probes" hx-swap-oob' not in html
        # when the rest is judged and the run is done
        judge_batch(run_id=run.pk, response_ids=ids[2:])
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    page = researcher_client.get(url, **HTMX)
    # then the poll's last answer (286) stops polling, shows no live figures, and brings the
    # probe form along (an out-of-band swap of the section outside the panel)
    assert page.status_code == 286
    html = page.content.decode()
    assert 'id="run-live"' not in html and 'hx-trigger="every 2s"' not in html
    assert '<section class="card" id="run-probes" hx-swap-oob="true">' in html
    assert 'id="probe-form"' in html and "once it is done" not in html
    assert live.get(f"/api/v1/judging/runs/{run.pk}/").json()["live"] is None


def test_a_batch_tasks_calls_are_counted_for_its_run(project, dataset):
    # given a running run; when its batch task runs in this thread (as a worker runs it)
    with FakeOpenAIServer(style="python_dict") as srv:
        run = running(judge_run_create(judge=llm_judge(project, srv), dataset=dataset))
        ids = response_ids(run)
        judge_batch_task(run.pk, ids[0] - 1, ids[-1])
    # then its calls are the run's, named after the task's run_id
    seen = selectors.run_activity(selectors.run_key("judge", run.pk))
    assert seen.calls_last_minute == 6 and seen.judgments_last_minute == 6
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.DONE


def test_the_metadata_run_page_polls_its_buttons_and_stops_once_the_run_stops(
    project, researcher_client
):
    with FakeOpenAIServer(style="json") as srv:
        run = metadata_running(
            metadata_run_create(judge=metadata_judge(project, srv), dataset=demo_dataset(project))
        )
    url = reverse("judging:metadata-run-detail", args=[run.pk])
    # a running run's section polls and carries its Pause button
    page = researcher_client.get(url, **HTMX)
    html = page.content.decode()
    assert page.status_code == 200 and 'hx-trigger="every 2s"' in html
    assert 'value="pause"' in html and 'id="run-live"' in html
    # once it is paused (elsewhere), the next poll stops (286) and swaps in the Resume form,
    # in a section that polls no more
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.PAUSED)
    page = researcher_client.get(url, **HTMX)
    html = page.content.decode()
    assert page.status_code == 286 and 'hx-trigger="every 2s"' not in html
    assert 'value="resume"' in html and 'value="pause"' not in html
    assert 'id="run-live"' not in html


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_running_runs_page_says_so_when_the_store_of_its_figures_does_not_answer(
    project, dataset, researcher, researcher_client, settings
):
    with FakeOpenAIServer(style="python_dict") as srv:
        run = running(judge_run_create(judge=llm_judge(project, srv), dataset=dataset))
    # given the cache's Redis gone
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0",
            "KEY_PREFIX": "gone",
        }
    }
    # then the page still answers, says why the figures are missing, and keeps polling
    page = researcher_client.get(reverse("judging:run-detail", args=[run.pk]), **HTMX)
    html = page.content.decode()
    assert page.status_code == 200 and 'hx-trigger="every 2s"' in html
    assert "cannot be shown just now" in html and "calls in flight" not in html
    api = APIClient()
    api.force_authenticate(researcher)
    answer = api.get(f"/api/v1/judging/runs/{run.pk}/")
    assert answer.status_code == 200 and answer.json()["live"] is None
