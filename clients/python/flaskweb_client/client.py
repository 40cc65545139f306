"""`Client`: the flaskweb REST API from a notebook or a script (docs/PYTHON_CLIENT.md)."""

from __future__ import annotations

import email.utils
import functools
import io
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import pandas as pd

from flaskweb_client import _frames
from flaskweb_client._endpoints import ENDPOINTS, SCORE_COLUMNS, SCORE_DTYPES, Endpoint
from flaskweb_client._errors import (
    FlaskwebError,
    JobFailedError,
    JobTimeoutError,
    ServiceUnavailableError,
    error_for,
)
from flaskweb_client._progress import Progress

__all__ = ["Client", "Report"]

JSON = dict[str, Any]
FileInput = str | os.PathLike[str] | bytes | tuple[str, bytes]
Ref = int | Mapping[str, Any]
ExportFormat = Literal["csv", "jsonl", "parquet", "zip"]

# job statuses (docs/API.md, "Background work")
UPLOAD_DONE, UPLOAD_FAILED = {"succeeded"}, {"failed", "rejected"}
RUN_DONE, RUN_FAILED = {"done"}, {"failed", "cancelled"}
EXPORT_DONE, EXPORT_FAILED = {"done"}, {"failed", "expired"}
SNAPSHOT_DONE, SNAPSHOT_FAILED = {"done"}, {"failed"}
_UNSET: Any = object()


@dataclass
class Report:
    """The analytics report of a project (docs/ANALYTICS.md, "Keys"):

    - `correlation`: one row per judge, skill and level (instance, item, system) with `n`,
      Pearson, Spearman, Kendall and the other figures of that level, and `too_few`: which
      figures rest on too few data to be read, and why (missing: none);
    - `agreement`: one row per skill with `n_units`, `n_raters`, `n_scores`, `n_na`, the
      agreement coefficients (`krippendorff_alpha.ordinal`, ...) and `too_few`;
    - `raw`: the whole report as the server sent it (intervals, leaderboards, breakdowns).
    """

    correlation: pd.DataFrame
    agreement: pd.DataFrame
    raw: JSON = field(repr=False)

    @property
    def snapshot(self) -> JSON:
        """The stored snapshot this report was served from (when, stale or not)."""
        found = self.raw.get("snapshot")
        return found if isinstance(found, dict) else {}


class Client:
    """A signed-in connection to one flaskweb server.

    `token` is an API token (the site's *API token* page, `/account/token/`, or
    `manage.py drf_create_token <username>`); when not given, the `FLASKWEB_TOKEN`
    environment variable. Answers of 429 and 503 are retried after the server's
    `Retry-After` (at most `max_retries` times and `max_retry_wait` seconds a wait); a 503
    to a write that may have been done is raised at once, since the write must be read
    before it is repeated. Other errors raise a `FlaskwebError` subclass at once.
    `progress` turns the progress display of waits on or off by default; waits poll their
    job from every quarter second, backing off to every `poll_max` seconds.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
        progress: bool = True,
        poll_max: float = 2.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        token = token if token is not None else os.environ.get("FLASKWEB_TOKEN", "")
        if not token:
            raise ValueError(
                "give an API token (token=... or the FLASKWEB_TOKEN environment variable)"
            )
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.progress = progress
        self.poll_max = poll_max
        self._sleep: Callable[[float], None] = time.sleep
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={
                "Authorization": f"Token {token}",
                "Accept": "application/json",
                "User-Agent": "flaskweb-client/0.1.0",
            },
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- projects and datasets ------------------------------------------------------------

    def projects(self) -> pd.DataFrame:
        """The projects you may see (site admins: all)."""
        return _frames.frame(self._pages("projects"), ("slug", "name", "description"))

    def create_project(self, slug: str, *, name: str = "", description: str = "") -> JSON:
        """Create a project (site admins only); its slug names it in every other call."""
        return self._call(
            "project_create", body={"slug": slug, "name": name or slug, "description": description}
        )

    def datasets(self, project: str | Mapping[str, Any]) -> pd.DataFrame:
        """The project's datasets: `id`, `name`, `item_count`."""
        rows = self._pages("datasets", slug=_slug(project))
        return _frames.frame(rows, ("id", "name", "item_count"))

    def upload_dataset(
        self,
        project: str | Mapping[str, Any],
        files: FileInput | Sequence[FileInput],
        *,
        dataset: str,
        format: str | None = None,
        model: str | None = None,
        wait: bool = True,
        timeout: float | None = 600.0,
        progress: bool | None = None,
    ) -> JSON:
        """Upload items and responses into the dataset named `dataset` (made when new;
        docs/IMPORT_FORMATS.md). The import runs in the background: with `wait` this
        follows it and returns the finished job (its `dataset` is the dataset's id), and
        raises `JobFailedError` with the import's error or problems when it fails; without,
        it returns the pending job (follow it with `wait_upload`)."""
        body: dict[str, Any] = {"project": _slug(project), "dataset": dataset}
        if format:
            body["format"] = format
        if model:
            body["model"] = model
        job = self._call("upload_create", body=body, files=_files("files", files))
        if not wait:
            return job
        return self.wait_upload(job["id"], timeout=timeout, progress=progress)

    def wait_upload(
        self, upload: Ref, *, timeout: float | None = 600.0, progress: bool | None = None
    ) -> JSON:
        """Follow a dataset upload until it ends; the finished job."""
        upload_id = _id(upload)

        def counts(job: JSON) -> tuple[Any, Any, str]:
            found = job.get("progress") or {}
            return found.get("done"), found.get("total"), found.get("phase") or job["status"]

        return self._wait(
            lambda: self._call("upload", id=upload_id),
            label=f"upload {upload_id}",
            done=UPLOAD_DONE,
            failed=UPLOAD_FAILED,
            counts=counts,
            timeout=timeout,
            progress=progress,
        )

    # --- campaigns ---------------------------------------------------------------------

    def create_campaign(
        self,
        project: str | Mapping[str, Any],
        *,
        name: str,
        dataset: Ref,
        **settings: Any,
    ) -> JSON:
        """Create a draft campaign on one of the project's datasets (by id). `settings` are
        the campaign's fields (docs/CAMPAIGNS.md): `overlap`, `annotators` (usernames),
        `skill_mode`, `fixed_skills` (skill names), `model_names`, `mode`, ..."""
        body = {"name": name, "dataset": _id(dataset), **settings}
        return self._call("campaign_create", slug=_slug(project), body=body)

    def activate_campaign(self, campaign: Ref) -> JSON:
        """Activate a campaign: its tasks are made and its rubrics pinned. Returns
        `{"tasks_created", "campaign"}`; activating again adds tasks for new responses."""
        return self._call("campaign_activate", id=_id(campaign))

    def campaign(self, campaign: Ref) -> JSON:
        """A campaign's settings and live progress."""
        return self._call("campaign", id=_id(campaign))

    # --- judges and runs ----------------------------------------------------------------

    def create_judge(
        self,
        project: str | Mapping[str, Any],
        *,
        name: str,
        kind: str = "llm",
        **settings: Any,
    ) -> JSON:
        """Create a judge. An LLM judge names a `provider` a site admin declared and a
        `model` (docs/JUDGING.md); a baseline judge (`kind="baseline"`) its `baseline`
        (`rouge-l`, ...)."""
        body = {"name": name, "kind": kind, **settings}
        return self._call("judge_create", slug=_slug(project), body=body)

    def create_run(
        self,
        judge: Ref,
        *,
        dataset: Ref | None = None,
        campaign: Ref | None = None,
        budget: str | float | None = None,
    ) -> JSON:
        """A pending run of the judge over a dataset, or over a campaign's responses."""
        body: dict[str, Any] = {}
        if dataset is not None:
            body["dataset"] = _id(dataset)
        if campaign is not None:
            body["campaign"] = _id(campaign)
        if budget is not None:
            body["budget"] = str(budget)
        return self._call("run_create", id=_id(judge), body=body)

    def start_run(
        self,
        run: Ref,
        *,
        budget: str | float | None = _UNSET,
        wait: bool = True,
        timeout: float | None = 3600.0,
        progress: bool | None = None,
    ) -> JSON:
        """Start a pending run (a new `budget` if given; None: no limit). With `wait` it
        follows the run (`follow_run`); without, it returns the running run."""
        body = {} if budget is _UNSET else {"budget": None if budget is None else str(budget)}
        started = self._call("run_start", id=_id(run), body=body)
        if not wait:
            return started
        return self.follow_run(started, timeout=timeout, progress=progress)

    def run(self, run: Ref) -> JSON:
        """A run's status, counts, tokens and cost."""
        return self._call("run", id=_id(run))

    def follow_run(
        self, run: Ref, *, timeout: float | None = 3600.0, progress: bool | None = None
    ) -> JSON:
        """Follow a run until it is done (returned), paused (returned too: its budget ran
        out or someone paused it; resume it on the server) or failed or cancelled
        (`JobFailedError`)."""
        run_id = _id(run)
        return self._wait(
            lambda: self._call("run", id=run_id),
            label=f"judge run {run_id}",
            done=RUN_DONE | {"paused"},
            failed=RUN_FAILED,
            counts=lambda job: (job.get("finished"), job.get("total"), job["status"]),
            timeout=timeout,
            progress=progress,
        )

    def scores(self, run: Ref, *, page_size: int = 500) -> pd.DataFrame:
        """A run's scores, one row per response and skill: `samples`, `na` (samples that
        said N/A), `mean`, `median`, `min`, `max`, `stdev` (missing where every sample said
        N/A, or, for `stdev`, with fewer than two scores)."""
        run_id, rows, after = _id(run), [], None
        while True:
            query: dict[str, Any] = {"limit": page_size}
            if after is not None:
                query["after"] = after
            page = self._call("run_scores", id=run_id, query=query)
            rows += page["results"]
            after = page["next_after"]
            if after is None:
                return _frames.frame(rows, SCORE_COLUMNS, SCORE_DTYPES)

    # --- analytics ---------------------------------------------------------------------

    def report(
        self,
        project: str | Mapping[str, Any],
        *,
        wait: bool = True,
        timeout: float | None = 600.0,
        progress: bool | None = None,
        **filters: Any,
    ) -> Report:
        """The project's analytics report as DataFrames (`Report`). `filters` are the
        report's query parameters: `skill`, `judge`, `system`, `domain` (lists or one
        value), `difficulty`, `resamples` (0 turns the intervals off), `breakdowns`,
        `human`. The server computes a report in the background the first time these
        filters are asked for; with `wait` this follows that computation."""
        slug = _slug(project)
        query = {key: value for key, value in filters.items() if value is not None}
        deadline = None if timeout is None else time.monotonic() + timeout
        for _ in range(20):
            answer = self._call("report", slug=slug, query=query)
            snapshot = answer.get("snapshot") or {}
            if set(answer) - {"snapshot"}:  # 200: the report; 202: only its snapshot
                return Report(
                    correlation=_frames.correlation_frame(answer),
                    agreement=_frames.agreement_frame(answer),
                    raw=answer,
                )
            if not wait:
                raise JobTimeoutError(
                    "the report is being computed; ask again later",
                    code="computing",
                    body=answer,
                )
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            self._wait(
                functools.partial(self._snapshot, slug, snapshot["id"]),
                label=f"report snapshot {snapshot['id']}",
                done=SNAPSHOT_DONE,
                failed=SNAPSHOT_FAILED,
                counts=lambda job: (
                    round(100 * float(job.get("progress") or 0)),
                    100,
                    job.get("phase") or job["status"],
                ),
                timeout=left,
                progress=progress,
            )
        raise JobTimeoutError(
            "the report's snapshot was computed but the report is still not served",
            code="computing",
        )

    def export(
        self,
        project: str | Mapping[str, Any],
        *,
        kind: str = "long",
        format: ExportFormat = "csv",
        timeout: float | None = 600.0,
        progress: bool | None = None,
        **filters: Any,
    ) -> pd.DataFrame:
        """Export the project's scores (docs/EXPORTS.md) and read the file as a DataFrame:
        `kind` long (one row per score), wide, preferences, flask_review or judge_training;
        `filters`: `skill`, `judge`, `system` (lists), `rater_kind`, `campaign`,
        `dataset`. N/A scores are missing values; whole-number columns are `Int64`.
        `format="parquet"` keeps the server's column types as written (needs pyarrow: the
        `parquet` extra)."""
        if format == "zip":
            raise ValueError(
                "a zip export (kind hf_dataset) is files, not a table: use export_file"
            )
        data = self.export_file(
            project, kind=kind, format=format, timeout=timeout, progress=progress, **filters
        )
        if format == "parquet":
            return _frames.parquet_frame(data)

        return _frames.csv_frame(data) if format == "csv" else _frames.jsonl_frame(data)

    def export_file(
        self,
        project: str | Mapping[str, Any],
        *,
        kind: str = "long",
        format: ExportFormat = "csv",
        timeout: float | None = 600.0,
        progress: bool | None = None,
        **filters: Any,
    ) -> bytes:
        """The same export as `export`, as the file's bytes; `kind="hf_dataset",
        format="zip"` is the Hugging Face datasets layout (docs/EXPORTS.md)."""
        if format not in ("csv", "jsonl", "parquet", "zip"):
            raise ValueError(f"format must be csv, jsonl, parquet or zip, not {format!r}")
        body = {"kind": kind, "format": format, **filters}
        job = self._call("export_create", slug=_slug(project), body=body)
        job = self._wait(
            lambda: self._call("export", id=job["id"]),
            label=f"export {job['id']}",
            done=EXPORT_DONE,
            failed=EXPORT_FAILED,
            counts=lambda found: (found.get("rows") or None, None, found["status"]),
            timeout=timeout,
            progress=progress,
        )
        return self._download("export_download", id=job["id"])

    def push_scores(
        self,
        project: str | Mapping[str, Any],
        scores: pd.DataFrame | FileInput | Sequence[FileInput],
        *,
        dataset: str | None = None,
        scale: Sequence[str] = (),
        judge_scale: Literal["skill", "raw"] | None = None,
        wait: bool = True,
        timeout: float | None = 600.0,
        progress: bool | None = None,
    ) -> JSON:
        """Import scores made elsewhere (docs/IMPORT_FORMATS.md, "Long-format scores"): a
        DataFrame with the columns `item`, `system`, `rater`, `rater_kind`, `skill`,
        `score` (missing = N/A), or CSV / JSONL files. `scale`: `SKILL=MIN:MAX[:continuous]`
        declarations. With `wait` this follows the import and returns the finished job; a
        rejected file raises `JobFailedError` with every problem (nothing was written)."""
        if isinstance(scores, pd.DataFrame):
            files = _files("files", ("scores.csv", _scores_csv(scores)))
        else:
            files = _files("files", scores)
        body: dict[str, Any] = {}
        if dataset is not None:
            body["dataset"] = dataset
        if scale:
            body["scale"] = list(scale)
        if judge_scale is not None:
            body["judge_scale"] = judge_scale
        job = self._call("scores_import", slug=_slug(project), body=body, files=files)
        if not wait:
            return job

        def counts(found: JSON) -> tuple[Any, Any, str]:
            step = found.get("progress") or {}
            return step.get("done"), step.get("total"), step.get("phase") or found["status"]

        return self._wait(
            lambda: self._call("score_import", id=job["id"]),
            label=f"score import {job['id']}",
            done={"succeeded"},
            failed={"failed", "rejected"},
            counts=counts,
            timeout=timeout,
            progress=progress,
        )

    def _snapshot(self, slug: str, snapshot_id: int) -> JSON:
        found = self._call("report_snapshot", slug=slug, snapshot_id=snapshot_id)["snapshot"]
        return found if isinstance(found, dict) else {}

    # --- transport -----------------------------------------------------------------------

    def _pages(self, name: str, **path: Any) -> Iterator[JSON]:
        offset = 0
        while True:
            page = self._call(name, query={"limit": 500, "offset": offset}, **path)
            yield from page["results"]
            offset += len(page["results"])
            if not page.get("next") or not page["results"]:
                return

    def _call(
        self,
        name: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        files: list[tuple[str, tuple[str, bytes]]] | None = None,
        **path: Any,
    ) -> JSON:
        """Send the request of the endpoint `name` (flaskweb_client._endpoints); the decoded
        answer. Only what the endpoint declares may be sent."""
        response = self._request(name, query=query, body=body, files=files, **path)
        answer = response.json() if response.content else {}
        if not isinstance(answer, dict):
            raise FlaskwebError(f"{name}: expected a JSON object, got {type(answer).__name__}")
        return answer

    def _download(self, name: str, **path: Any) -> bytes:
        return self._request(name, **path).content

    def _request(
        self,
        name: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        files: list[tuple[str, tuple[str, bytes]]] | None = None,
        **path: Any,
    ) -> httpx.Response:
        endpoint = ENDPOINTS[name]
        query, body = dict(query or {}), dict(body or {})
        unknown = sorted(set(query) - set(endpoint.query)) + sorted(set(body) - set(endpoint.body))
        if files:
            unknown += sorted({part for part, _ in files} - set(endpoint.body))
        if unknown:
            raise ValueError(f"{name} takes no {', '.join(unknown)}")
        url = endpoint.path.format(**{key: _path_value(value) for key, value in path.items()})
        params = [
            (key, _query_value(item))
            for key, value in query.items()
            for item in (value if isinstance(value, list | tuple) else [value])
        ]
        options: dict[str, Any] = {"params": params}
        if endpoint.media == "json":
            options["json"] = body
        elif endpoint.media == "multipart":
            options["data"] = {key: _form_value(value) for key, value in body.items()}
            options["files"] = files or []
        return self._send(endpoint, url, options)

    def _send(self, endpoint: Endpoint, url: str, options: dict[str, Any]) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._http.request(endpoint.method, url, **options)
            except httpx.TransportError as exc:
                if not endpoint.idempotent or attempt >= self.max_retries:
                    raise FlaskwebError(
                        f"no answer from the server: {exc}",
                        code="connection_error",
                        method=endpoint.method,
                        url=url,
                    ) from exc
                self._sleep(_backoff(attempt))
                attempt += 1
                continue
            if response.status_code in endpoint.ok:
                return response
            retryable = response.status_code == 429 or (
                response.status_code == 503 and endpoint.idempotent
            )
            wait = _retry_after(response.headers.get("Retry-After"), attempt)
            if retryable and attempt < self.max_retries and wait <= self.max_retry_wait:
                self._sleep(wait)
                attempt += 1
                continue
            error = error_for(
                response.status_code, _decoded(response), method=endpoint.method, url=url
            )
            if isinstance(error, ServiceUnavailableError) and not endpoint.idempotent:
                error.detail += " (this write may have been done: read before you repeat it)"
                error.args = (error._message(),)
            raise error

    def _wait(
        self,
        fetch: Callable[[], JSON],
        *,
        label: str,
        done: set[str],
        failed: set[str],
        counts: Callable[[JSON], tuple[Any, Any, str]],
        timeout: float | None,
        progress: bool | None,
    ) -> JSON:
        """Poll `fetch` (backing off from a quarter second to `poll_max`) until the job's status
        is in `done` (the job) or `failed` (JobFailedError), or `timeout` seconds pass."""
        shown = Progress(label, enabled=self.progress if progress is None else progress)
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = 0.25
        try:
            while True:
                job = fetch()
                status = job["status"]
                step, total, phase = counts(job)
                if status in done and total is not None:
                    step = total  # a finished job is all done, whatever its last step said
                shown.update(step, total, phase)
                if status in done:
                    return job
                if status in failed:
                    problems = job.get("problems")
                    raise JobFailedError(
                        f"{label} {status}: {job.get('error') or status}",
                        code=status,
                        problems=problems if isinstance(problems, list) else None,
                        problem_count=job.get("problem_count"),
                        body=job,
                    )
                if deadline is not None and time.monotonic() + interval > deadline:
                    raise JobTimeoutError(
                        f"{label} is still {status} after {timeout:g} s; it goes on on the server",
                        code="timeout",
                        body=job,
                    )
                self._sleep(interval)
                interval = min(interval * 1.5, self.poll_max)
        finally:
            shown.close()


def _slug(project: str | Mapping[str, Any]) -> str:
    return str(project["slug"]) if isinstance(project, Mapping) else str(project)


def _id(ref: Ref) -> int:
    return int(ref["id"]) if isinstance(ref, Mapping) else int(ref)


def _path_value(value: Any) -> str:
    from urllib.parse import quote

    return quote(str(value), safe="")


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _form_value(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_query_value(item) for item in value]
    return _query_value(value)


def _files(
    part: str, given: FileInput | Sequence[FileInput]
) -> list[tuple[str, tuple[str, bytes]]]:
    """Multipart file parts from paths, bytes or (filename, bytes) pairs."""
    items: list[FileInput] = []
    if isinstance(given, str | bytes | tuple | os.PathLike):
        items.append(given)
    else:
        items.extend(given)
    found = []
    for item in items:
        if isinstance(item, tuple):
            filename, data = item
        elif isinstance(item, bytes):
            filename, data = "upload.jsonl", item
        else:
            filename, data = Path(item).name, Path(item).read_bytes()
        found.append((part, (filename, data)))
    return found


def _scores_csv(scores: pd.DataFrame) -> bytes:
    """A DataFrame of long-format scores as the importer's CSV: missing scores are N/A."""
    table = scores.copy()
    if "score" in table.columns:
        table["score"] = [
            "N/A" if pd.isna(value) else _number_text(value) for value in table["score"]
        ]
    buffer = io.StringIO()
    table.to_csv(buffer, index=False, lineterminator="\n")
    return buffer.getvalue().encode("utf-8")


def _number_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _decoded(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _backoff(attempt: int) -> float:
    return float(min(2**attempt, 30) * (0.5 + random.random() / 2))


def _retry_after(header: str | None, attempt: int) -> float:
    """Seconds to wait: the Retry-After header (seconds or an HTTP date), else backoff."""
    if header:
        header = header.strip()
        if header.isdigit():
            return float(header)
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            pass
        else:
            return max(when.timestamp() - time.time(), 0.0)
    return _backoff(attempt)
