"""The stall sweep (judging.services.judge_runs_redispatch_stalled): a running run that
recorded nothing for a while gets its missing judgments enqueued again, once per sweep
interval, and the run page says what is waiting. The real killed-worker case is in
tests/judging/test_worker_recovery.py."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from annotation.models import Response
from judging.models import JudgeRun, JudgmentStatus, RunStatus
from judging.services import (
    judge_run_create,
    judge_run_dispatch,
    judge_run_start,
    judge_runs_fail_stale,
    judge_runs_redispatch_stalled,
)
from tests.judging.test_views import (  # noqa: F401 (dataset, judge: fixtures)
    add_judgment,
    dataset,
    judge,
    set_status,
    url,
)


@pytest.fixture
def run(judge, dataset):  # noqa: F811
    return judge_run_create(judge=judge, dataset=dataset)


def age(run, seconds):
    JudgeRun.objects.filter(pk=run.pk).update(
        updated_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_a_stalled_run_is_re_dispatched_once_per_interval(run, django_capture_on_commit_callbacks):
    # given a running run without progress for 15 minutes, and one that progressed just now
    set_status(run, RunStatus.RUNNING)
    age(run, 900)
    lively = set_status(
        JudgeRun.objects.create(judge=run.judge, dataset=run.dataset, total=6), RunStatus.RUNNING
    )
    paused = set_status(
        JudgeRun.objects.create(judge=run.judge, dataset=run.dataset, total=6), RunStatus.PAUSED
    )
    age(paused, 900)
    # when the sweep runs twice in a row
    with (
        mock.patch("judging.tasks.judge_run_dispatch_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        first = judge_runs_redispatch_stalled(older_than_seconds=600)
        second = judge_runs_redispatch_stalled(older_than_seconds=600)
    # then only the stalled run is enqueued again, from the start, missing judgments only
    assert first == [run.pk] and second == []
    delay.assert_called_once_with(run.pk, 0, True)
    run.refresh_from_db()
    assert run.redispatches == 1 and run.redispatched_at is not None
    assert lively.pk not in first and paused.pk not in first


@override_settings(FLASKWEB_JUDGE_BATCH_SIZE=2)
def test_a_re_dispatch_enqueues_only_batches_with_a_response_without_its_judgments(run):
    # given a run whose first two responses are judged (one ok, one failed) and the rest not
    set_status(run, RunStatus.RUNNING)
    responses = list(Response.objects.filter(item__dataset=run.dataset).order_by("pk"))
    assert len(responses) >= 5
    add_judgment(run, responses[0], status=JudgmentStatus.OK)
    add_judgment(run, responses[1], status=JudgmentStatus.FAILED)
    # when the sweep re-dispatches it
    with mock.patch("judging.tasks.judge_batch_task.delay") as delay:
        assert judge_run_dispatch(run_id=run.pk, after_id=0, missing_only=True) is None
    # then the batches (ranges of 2 response ids) that hold a missing response are enqueued,
    # and the complete first batch is not
    ranges = [call.args[1:] for call in delay.call_args_list]
    enqueued = [r.pk for r in responses if any(a < r.pk <= b for a, b in ranges)]
    assert enqueued == [r.pk for r in responses[2:]]
    assert all(call.args[0] == run.pk for call in delay.call_args_list)


def test_a_run_resumed_after_a_long_pause_is_not_taken_for_a_stalled_one(run):
    set_status(run, RunStatus.PAUSED)
    age(run, 10 * 3600)
    assert judge_run_start(run=run)
    assert judge_runs_fail_stale(older_than_seconds=settings.FLASKWEB_JUDGE_STALE_SECONDS) == 0
    assert judge_runs_redispatch_stalled(older_than_seconds=600) == []


def test_the_sweep_runs_every_minute_in_beat():
    entry = settings.CELERY_BEAT_SCHEDULE["judge-runs-redispatch"]
    assert entry["task"] == "judging.tasks.judge_runs_redispatch_task"
    assert entry["schedule"] == 60.0
    # longer than a judge batch launches calls plus a call's default timeout, so slow runs
    # are left alone
    assert settings.FLASKWEB_JUDGE_REDISPATCH_SECONDS > settings.FLASKWEB_JUDGE_TASK_SECONDS + 60


def test_the_run_page_shows_what_is_waiting_and_the_sweeps(researcher_client, run):
    set_status(run, RunStatus.RUNNING, total=6, done=1)
    add_judgment(run, Response.objects.filter(item__dataset=run.dataset).first())
    page = researcher_client.get(url("run-detail", run.pk)).content.decode()
    assert "5 waiting (queued, in flight or retrying)" in page and "stall sweep" not in page
    age(run, 900)
    with mock.patch("judging.tasks.judge_run_dispatch_task.delay"):
        judge_runs_redispatch_stalled(older_than_seconds=600)
    page = researcher_client.get(url("run-detail", run.pk)).content.decode()
    assert "the stall sweep enqueued the missing ones again 1 time," in page


@pytest.mark.parametrize("status", [RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED])
def test_finished_runs_are_never_swept(run, status):
    set_status(run, status)
    age(run, 900)
    assert judge_runs_redispatch_stalled(older_than_seconds=600) == []
