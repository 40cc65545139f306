"""Background import jobs in tests: the request's on-commit enqueue is captured (the tasks'
.delay patched to record the job id), and the worker's part is the task function called
directly with that id, as a worker would."""

from __future__ import annotations

import pytest

from analytics.tasks import preference_import_task, score_import_task
from judging.tasks import judge_output_import_task

TASKS = {
    "score": score_import_task,
    "preference": preference_import_task,
    "judge": judge_output_import_task,
}


class ImportJobs:
    def __init__(self, capture) -> None:
        self.capture = capture
        self.queued: list[tuple[str, int]] = []

    def post(self, client, *args, **kwargs):
        """client.post(...), with the on-commit callbacks of the request run."""
        with self.capture(execute=True):
            return client.post(*args, **kwargs)

    def run(self) -> list[int]:
        """Run every queued job (what the worker does); returns their ids."""
        ran = []
        while self.queued:
            kind, job_id = self.queued.pop(0)
            TASKS[kind](job_id)
            ran.append(job_id)
        return ran


@pytest.fixture(name="import_jobs")
def import_jobs_fixture(monkeypatch, django_capture_on_commit_callbacks) -> ImportJobs:
    jobs = ImportJobs(django_capture_on_commit_callbacks)
    monkeypatch.setattr(
        "analytics.tasks.score_import_task.delay", lambda pk: jobs.queued.append(("score", pk))
    )
    monkeypatch.setattr(
        "analytics.tasks.preference_import_task.delay",
        lambda pk: jobs.queued.append(("preference", pk)),
    )
    monkeypatch.setattr(
        "judging.tasks.judge_output_import_task.delay",
        lambda pk: jobs.queued.append(("judge", pk)),
    )
    return jobs
