"""Every API operation the client calls, in one table.

The client sends requests only through these entries (`Client._call`), and refuses to send
a query parameter or body field an entry does not declare, so the table is the whole of
what the client depends on. The project's test suite walks it against the OpenAPI schema
the server serves (tests/test_python_client.py): each (method, path) must exist, with
these query parameters and body fields, and each response field read must be documented.

`reads` names the response fields the client reads: `a` a top-level key, `a.b` a key of
the object under `a`, `a[].b` a key of each item of the list under `a`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Media = Literal["json", "multipart"]


@dataclass(frozen=True)
class Endpoint:
    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str  # as in the schema: "/api/v1/exports/{id}/"
    ok: tuple[int, ...] = (200,)
    query: tuple[str, ...] = ()
    body: tuple[str, ...] = ()
    media: Media | None = None
    reads: tuple[str, ...] = ()
    # safe to send again after a 503 (a read, or a write the server makes idempotent)
    idempotent: bool = False
    # the answer is a file, not JSON
    binary: bool = False


PAGE = ("limit", "offset")
LIST_READS = ("count", "next", "results")

UPLOAD_READS = (
    "id",
    "status",
    "dataset",
    "dataset_name",
    "rows_read",
    "items_created",
    "responses_created",
    "problem_count",
    "problems",
    "error",
    "progress",
)
RUN_READS = ("id", "status", "total", "finished", "percent", "failed", "parse_failed", "error")
EXPORT_READS = ("id", "status", "rows", "error", "format", "kind")
SCORE_IMPORT_READS = (
    "id",
    "status",
    "progress.done",
    "progress.total",
    "progress.phase",
    "problems",
    "problem_count",
    "error",
    "batch",
    "result",
)
# the columns of a judge run's scores (GET runs/{id}/scores/), in the DataFrame's order
SCORE_COLUMNS = (
    "response",
    "item",
    "model_name",
    "skill",
    "samples",
    "na",
    "mean",
    "median",
    "min",
    "max",
    "stdev",
)
SCORE_DTYPES = {
    "response": "Int64",
    "samples": "Int64",
    "na": "Int64",
    "mean": "Float64",
    "median": "Float64",
    "min": "Int64",
    "max": "Int64",
    "stdev": "Float64",
}
REPORT_FILTERS = (
    "skill",
    "judge",
    "system",
    "domain",
    "difficulty",
    "resamples",
    "breakdowns",
    "human",
)

ENDPOINTS: dict[str, Endpoint] = {
    "projects": Endpoint(
        "GET", "/api/v1/annotation/projects/", query=PAGE, reads=LIST_READS, idempotent=True
    ),
    "project_create": Endpoint(
        "POST",
        "/api/v1/annotation/projects/",
        ok=(201,),
        body=("slug", "name", "description"),
        media="json",
        reads=("slug", "name"),
    ),
    "datasets": Endpoint(
        "GET",
        "/api/v1/annotation/projects/{slug}/datasets/",
        query=PAGE,
        reads=(*LIST_READS, "results[].id", "results[].name", "results[].item_count"),
        idempotent=True,
    ),
    "upload_create": Endpoint(
        "POST",
        "/api/v1/annotation/uploads/",
        ok=(202,),
        body=("project", "dataset", "files", "format", "model"),
        media="multipart",
        reads=UPLOAD_READS,
    ),
    "upload": Endpoint(
        "GET", "/api/v1/annotation/uploads/{id}/", reads=UPLOAD_READS, idempotent=True
    ),
    "campaign_create": Endpoint(
        "POST",
        "/api/v1/annotation/projects/{slug}/campaigns/",
        ok=(201,),
        body=(
            "name",
            "dataset",
            "model_names",
            "skill_mode",
            "fixed_skills",
            "overlap",
            "show_reference",
            "annotators",
            "groups",
            "quota_per_annotator",
            "lease_seconds",
            "instructions",
            "mode",
        ),
        media="json",
        reads=("id", "status", "name"),
    ),
    "campaign": Endpoint(
        "GET",
        "/api/v1/annotation/campaigns/{id}/",
        reads=("id", "status", "name"),
        idempotent=True,
    ),
    # activating again only adds tasks for new responses: safe to repeat
    "campaign_activate": Endpoint(
        "POST",
        "/api/v1/annotation/campaigns/{id}/activate/",
        reads=("tasks_created", "campaign", "campaign.id", "campaign.status"),
        idempotent=True,
    ),
    "judge_create": Endpoint(
        "POST",
        "/api/v1/judging/projects/{slug}/judges/create/",
        ok=(201,),
        body=(
            "name",
            "kind",
            "baseline",
            "provider",
            "base_url",
            "model",
            "temperature",
            "max_tokens",
            "samples",
            "use_reference",
            "max_attempts",
            "timeout_seconds",
        ),
        media="json",
        reads=("id", "name", "kind"),
    ),
    "run_create": Endpoint(
        "POST",
        "/api/v1/judging/judges/{id}/runs/create/",
        ok=(201,),
        body=("dataset", "campaign", "budget"),
        media="json",
        reads=RUN_READS,
    ),
    "run_start": Endpoint(
        "POST",
        "/api/v1/judging/runs/{id}/start/",
        body=("budget",),
        media="json",
        reads=RUN_READS,
    ),
    "run": Endpoint("GET", "/api/v1/judging/runs/{id}/", reads=RUN_READS, idempotent=True),
    "run_scores": Endpoint(
        "GET",
        "/api/v1/judging/runs/{id}/scores/",
        query=("after", "limit"),
        reads=("next_after", "results", *(f"results[].{c}" for c in SCORE_COLUMNS)),
        idempotent=True,
    ),
    # the report's body is documented as a free-form object (docs/ANALYTICS.md, "Keys");
    # the keys the client reads are checked against a live answer in the tests
    "report": Endpoint(
        "GET",
        "/api/v1/projects/{slug}/analytics/report",
        ok=(200, 202),
        query=REPORT_FILTERS,
        idempotent=True,
    ),
    "report_snapshot": Endpoint(
        "GET",
        "/api/v1/projects/{slug}/analytics/snapshots/{snapshot_id}",
        idempotent=True,
    ),
    "export_create": Endpoint(
        "POST",
        "/api/v1/projects/{slug}/exports/",
        ok=(201,),
        body=("kind", "format", "skill", "rater_kind", "judge", "campaign", "dataset", "system"),
        media="json",
        reads=EXPORT_READS,
    ),
    "export": Endpoint("GET", "/api/v1/exports/{id}/", reads=EXPORT_READS, idempotent=True),
    "export_download": Endpoint(
        "GET", "/api/v1/exports/{id}/download/", idempotent=True, binary=True
    ),
    "scores_import": Endpoint(
        "POST",
        "/api/v1/projects/{slug}/scores/import/",
        ok=(202,),
        body=("files", "dataset", "scale", "judge_scale"),
        media="multipart",
        reads=SCORE_IMPORT_READS,
    ),
    "score_import": Endpoint(
        "GET", "/api/v1/score-import-jobs/{id}/", reads=SCORE_IMPORT_READS, idempotent=True
    ),
}
