"""The notebook client (clients/python, `flaskweb_client`): its endpoint table against the
OpenAPI schema the app serves (drift), its DataFrames and errors, its retries against a
small HTTP server, and the whole researcher's loop against a live server with a Celery
worker process and the local OpenAI-compatible judge server (docs/PYTHON_CLIENT.md)."""

from __future__ import annotations

import ast
import io
import json
import string
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from rest_framework.authtoken.models import Token

from tests.conftest import REPO

CLIENT_DIR = REPO / "clients" / "python"
if str(CLIENT_DIR) not in sys.path:  # `make install` installs it editable; a bare checkout too
    sys.path.insert(0, str(CLIENT_DIR))

import flaskweb_client  # noqa: E402
from flaskweb_client import _frames  # noqa: E402
from flaskweb_client._endpoints import ENDPOINTS, Endpoint  # noqa: E402

MEDIA = {"json": "application/json", "multipart": "multipart/form-data"}


# --- drift: the client's endpoint table against the served schema ---------------------------


@pytest.fixture(scope="module")
def served_schema(django_db_blocker) -> dict:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.content)


def _resolve(schema: dict, node: dict) -> dict:
    """A schema object with its $ref followed and its allOf merged."""
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    if "allOf" in node:
        merged: dict = {"properties": {}}
        for part in node["allOf"]:
            part = _resolve(schema, part)
            merged["properties"].update(part.get("properties", {}))
            merged.update({k: v for k, v in part.items() if k != "properties"})
        return merged
    return node


def _has_field(schema: dict, node: dict, dotted: str) -> bool:
    """Whether the object `node` documents the field `a`, `a.b` or `a[].b`."""
    for part in dotted.split("."):
        node = _resolve(schema, node)
        many = part.endswith("[]")
        name = part.removesuffix("[]")
        found = node.get("properties", {}).get(name)
        if found is None:
            return False
        node = _resolve(schema, found)
        if many:
            if node.get("type") != "array":
                return False
            node = _resolve(schema, node["items"])
    return True


def _drift(schema: dict, name: str, endpoint: Endpoint) -> list[str]:
    problems = []
    item = schema["paths"].get(endpoint.path)
    operation = (item or {}).get(endpoint.method.lower())
    if operation is None:
        return [f"{name}: no {endpoint.method} {endpoint.path} in the schema"]
    parameters = operation.get("parameters", [])
    placeholders = {field for _, field, _, _ in string.Formatter().parse(endpoint.path) if field}
    path_params = {p["name"] for p in parameters if p["in"] == "path"}
    if placeholders != path_params:
        problems.append(f"{name}: path parameters {placeholders} != schema's {path_params}")
    query = {p["name"] for p in parameters if p["in"] == "query"}
    problems += [f"{name}: no query parameter {q!r}" for q in endpoint.query if q not in query]
    if endpoint.body:
        content = operation.get("requestBody", {}).get("content", {})
        media = MEDIA[endpoint.media or "json"]
        if media not in content:
            problems.append(f"{name}: the body is not read as {media}")
        else:
            body = content[media]["schema"]
            problems += [
                f"{name}: no body field {f!r}"
                for f in endpoint.body
                if not _has_field(schema, body, f)
            ]
    for status in endpoint.ok:
        if str(status) not in operation["responses"]:
            problems.append(f"{name}: {status} is not a documented answer")
    for read in endpoint.reads:
        for status in endpoint.ok:
            content = operation["responses"].get(str(status), {}).get("content", {})
            documented = content.get("application/json", {}).get("schema")
            if documented is None or not _has_field(schema, documented, read):
                problems.append(f"{name}: {status} answer documents no {read!r}")
    return problems


def test_every_endpoint_the_client_calls_is_in_the_served_schema(served_schema):
    problems = [p for name, ep in ENDPOINTS.items() for p in _drift(served_schema, name, ep)]
    assert not problems, "\n".join(problems)


def test_the_drift_check_finds_drift(served_schema):
    # a renamed field, a missing path and an undocumented answer field are each found
    upload = ENDPOINTS["upload_create"]
    assert _drift(served_schema, "x", Endpoint("GET", "/api/v1/nowhere/"))
    assert _drift(
        served_schema, "x", Endpoint(upload.method, upload.path, (202,), body=("dataset_nam",))
    )
    run = ENDPOINTS["run"]
    assert _drift(served_schema, "x", Endpoint("GET", run.path, reads=("progress_percent",)))
    assert _drift(served_schema, "x", Endpoint("GET", run.path, reads=("live.nothing",)))
    assert not _drift(served_schema, "x", Endpoint("GET", run.path, reads=("live.eta_seconds",)))


def test_the_client_imports_nothing_of_the_app():
    app = {"django", "rest_framework", "annotation", "judging", "analytics", "flaskweb", "tests"}
    for path in (CLIENT_DIR / "flaskweb_client").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not {n.split(".")[0] for n in names} & app, (path.name, names)


# --- DataFrames -----------------------------------------------------------------------------


def test_an_export_reads_the_same_from_csv_and_jsonl_with_na_missing_and_ints_int64():
    csv_data = (
        b"project,dataset,item,system,skill,rater,rater_kind,score,is_na,rationale,"
        b"time_on_task_ms,created_at,sample\n"
        b"p,D,17,m1,Factuality,ann,human,4,false,,1200,2026-03-01T12:00:00Z,\n"
        b'p,D,17,m1,Readability,ann,human,N/A,true,"fine, ""mostly""",,'
        b"2026-03-01T12:00:00.5Z,\n"
        b"p,D,18,m2,Factuality,J,judge,2,false,=x,35,2026-03-01T12:00:01Z,0\n"
    )
    jsonl_data = "\n".join(
        json.dumps(row)
        for row in [
            {"project": "p", "dataset": "D", "item": "17", "system": "m1", "skill": "Factuality",
             "rater": "ann", "rater_kind": "human", "score": 4, "is_na": False, "rationale": "",
             "time_on_task_ms": 1200, "created_at": "2026-03-01T12:00:00Z", "sample": None},
            {"project": "p", "dataset": "D", "item": "17", "system": "m1",
             "skill": "Readability", "rater": "ann", "rater_kind": "human", "score": "N/A",
             "is_na": True, "rationale": 'fine, "mostly"', "time_on_task_ms": None,
             "created_at": "2026-03-01T12:00:00.5Z", "sample": None},
            {"project": "p", "dataset": "D", "item": "18", "system": "m2", "skill": "Factuality",
             "rater": "J", "rater_kind": "judge", "score": 2, "is_na": False, "rationale": "=x",
             "time_on_task_ms": 35, "created_at": "2026-03-01T12:00:01Z", "sample": 0},
        ]
    ).encode()  # fmt: skip
    from_csv, from_jsonl = _frames.csv_frame(csv_data), _frames.jsonl_frame(jsonl_data)
    pd.testing.assert_frame_equal(from_csv, from_jsonl)
    assert str(from_csv["score"].dtype) == "Int64" and from_csv["score"].isna().tolist() == [
        False,
        True,
        False,
    ]
    assert str(from_csv["time_on_task_ms"].dtype) == "Int64"
    assert str(from_csv["is_na"].dtype) == "boolean"
    assert from_csv["item"].tolist() == ["17", "17", "18"]  # ids stay text
    assert from_csv["rationale"].tolist()[1] == 'fine, "mostly"'
    assert str(from_csv["created_at"].dtype).startswith("datetime64")
    # a score column of N/A only is still a column of numbers
    assert str(_frames.csv_frame(b"item,score,sample\na,N/A,\n")["sample"].dtype) == "Int64"
    assert str(_frames.csv_frame(b"item,score,sample\na,N/A,\n")["score"].dtype) == "Int64"
    # a raw-scale judge's fractions make the column Float64, N/A still missing
    raw = _frames.csv_frame(b"item,score\na,0.25\nb,N/A\nc,3\n")
    assert str(raw["score"].dtype) == "Float64" and raw["score"].isna().tolist()[1]


def test_the_report_frames_carry_n_and_the_too_few_flags():
    report = {
        "agreement": {
            "Factuality": {
                "n_units": 2, "n_raters": 2, "n_scores": 4, "n_na": 0,
                "krippendorff_alpha": {"ordinal": 0.5, "interval": None}, "cohen_kappa": None,
                "krippendorff_alpha_ci": {"ordinal": {"low": 0.1}},
                "too_few": {"krippendorff_alpha": "fewer than 10 units", "icc": None,
                            "fleiss_kappa": "fewer than 10 units", "gwet_ac1": "n = 1"},
            }
        },
        "correlation": {
            "J": {"Factuality": {
                "instance": {"n": 6, "pearson": 0.8, "spearman": 1, "ci": {"pearson": {}},
                             "too_few": {"pearson": "fewer than 10 responses"}},
                "system": {"n": 2, "pearson": None, "too_few": {}},
            }}
        },
    }  # fmt: skip
    agreement = _frames.agreement_frame(report)
    assert (
        agreement.loc[0, "n_units"] == 2 and agreement.loc[0, "krippendorff_alpha.ordinal"] == 0.5
    )
    assert agreement.loc[0, "too_few"] == (
        "krippendorff_alpha, fleiss_kappa: fewer than 10 units; gwet_ac1: n = 1"
    )
    assert not any(c.endswith("_ci") or ".low" in c for c in agreement.columns)
    assert str(agreement["cohen_kappa"].dtype) == "Float64"
    correlation = _frames.correlation_frame(report)
    assert correlation[["judge", "level", "n"]].values.tolist() == [
        ["J", "instance", 6],
        ["J", "system", 2],
    ]
    assert str(correlation["n"].dtype) == "Int64" and str(correlation["spearman"].dtype) == "Int64"
    assert correlation.loc[0, "too_few"] == "pearson: fewer than 10 responses"
    assert pd.isna(correlation.loc[1, "too_few"]) and pd.isna(correlation.loc[1, "pearson"])


# --- errors and retries against a small HTTP server -----------------------------------------


class _Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) of the server's script."""

    def do_GET(self):
        self.server.seen.append((self.command, self.path))
        status, headers, body = self.server.script.pop(0)
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(key, value)
        data = json.dumps(body).encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.script, server.seen = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = flaskweb_client.Client(
        f"http://127.0.0.1:{server.server_port}", token="k", progress=False
    )
    waits: list[float] = []
    client._sleep = waits.append
    yield server, client, waits
    client.close()
    server.shutdown()
    server.server_close()


def test_429_and_503_are_retried_after_retry_after_and_then_raised(scripted):
    server, client, waits = scripted
    busy = {"detail": "the database did not answer", "code": "service_unavailable"}
    run = {"id": 3, "status": "done", "total": 1, "finished": 1}
    server.script = [
        (429, {"Retry-After": "2"}, {"detail": "slow down", "code": "throttled"}),
        (503, {"Retry-After": "1"}, busy),
        (200, {}, run),
    ]
    assert client.run(3) == run and waits == [2.0, 1.0]
    # bounded: after max_retries the error is raised, with the server's fields
    server.script = [(503, {"Retry-After": "1"}, busy)] * 5
    with pytest.raises(flaskweb_client.ServiceUnavailableError) as raised:
        client.run(3)
    assert raised.value.status == 503 and raised.value.code == "service_unavailable"
    assert len(server.seen) == 3 + 5
    # a wait longer than max_retry_wait is not slept through
    server.script = [(429, {"Retry-After": "3600"}, {"detail": "later", "code": "throttled"})]
    with pytest.raises(flaskweb_client.RateLimitedError):
        client.run(3)
    # a write that may have been done is not repeated after a 503
    server.script = [(503, {"Retry-After": "1"}, busy)]
    with pytest.raises(flaskweb_client.ServiceUnavailableError, match="read before you repeat"):
        client.create_run(1, dataset=2)
    assert server.seen[-1] == ("POST", "/api/v1/judging/judges/1/runs/create/")


def test_errors_carry_the_servers_fields_and_a_failed_job_its_problems(scripted):
    server, client, _ = scripted
    server.script = [
        (409, {}, {"detail": "only a done run", "code": "run_state", "status": "running"}),
        (202, {}, {"id": 9, "status": "pending"}),
        (200, {}, {"id": 9, "status": "running", "progress": {"phase": "checking"}}),
        (200, {}, {"id": 9, "status": "rejected", "error": "", "problem_count": 2,
                   "problems": [{"file": "s.csv", "line": 3, "field": "score",
                                 "code": "out_of_range", "message": "9 is not 1-5"}]}),
    ]  # fmt: skip
    with pytest.raises(flaskweb_client.ConflictError) as raised:
        client.start_run(5, wait=False)
    assert raised.value.body["status"] == "running" and isinstance(
        raised.value, flaskweb_client.ClientError
    )
    frame = pd.DataFrame({"item": ["a"], "system": ["m"], "rater": ["r"], "rater_kind": ["human"],
                          "skill": ["Factuality"], "score": [9]})  # fmt: skip
    with pytest.raises(flaskweb_client.JobFailedError) as failed:
        client.push_scores("p", frame)
    assert failed.value.problem_count == 2 and "s.csv:3: score: 9 is not 1-5" in str(failed.value)
    with pytest.raises(ValueError, match="takes no colour"):
        client.create_judge("p", name="J", colour="red")


# --- the whole loop against a live server ----------------------------------------------------

SKILLS = ["Factuality", "Comprehension", "Readability"]


def _dataset() -> bytes:
    rows = [
        {
            "id": f"q{i}",
            "instruction": f"Name a colour that starts with letter {letter}.",
            "reference": f"A colour starting with {letter}.",
            "skills": SKILLS,
            "domains": ["History"],
            "difficulty": 1 + i % 5,
            "responses": [{"model": m, "text": f"{m} answers {letter}"} for m in ("m1", "m2")],
        }
        for i, letter in enumerate("BGRWYOPT")
    ]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@pytest.mark.slow
def test_a_researcher_runs_the_whole_loop_from_a_notebook(
    live_server, celery_worker_process, admin_user, tmp_path
):
    from devtools.openai_server import FakeOpenAIServer
    from tests.judging.providers import provider_for

    token = Token.objects.create(user=admin_user).key
    client = flaskweb_client.Client(live_server.url, token=token, progress=False)
    with FakeOpenAIServer(style="json") as judge_server:
        provider = provider_for(judge_server.url)

        # a project and a dataset, uploaded and waited for (from a file on disk)
        project = client.create_project("nb", name="Notebook study")
        path = tmp_path / "items.jsonl"
        path.write_bytes(_dataset())
        upload = client.upload_dataset(project, path, dataset="Colours")
        assert upload["status"] == "succeeded" and upload["items_created"] == 8
        assert client.datasets("nb")[["id", "name", "item_count"]].values.tolist() == [
            [upload["dataset"], "Colours", 8]
        ]

        # a campaign, created and activated
        campaign = client.create_campaign(project, name="Pilot", dataset=upload["dataset"])
        activated = client.activate_campaign(campaign)
        assert activated["campaign"]["status"] == "active" and activated["tasks_created"] > 0

        # a judge run on the local OpenAI-compatible server, followed to the end
        judge = client.create_judge(
            project, name="Fake judge", provider=provider.name, model="fake-judge",
            use_reference=False,
        )  # fmt: skip
        run = client.create_run(judge, dataset=upload["dataset"])
        done = client.start_run(run)
        assert done["status"] == "done" and done["finished"] == done["total"] == 16
        scores = client.scores(run)
        assert len(scores) == 16 * 3 and set(scores["skill"]) == set(SKILLS)
        assert str(scores["min"].dtype) == "Int64" and str(scores["samples"].dtype) == "Int64"
        # one sample each: no spread, a missing value in a float column
        assert str(scores["stdev"].dtype) == "Float64" and scores["stdev"].isna().all()

    # scores made elsewhere pushed in: one person's, with an N/A
    people = scores[["item", "model_name", "skill", "mean"]].rename(
        columns={"model_name": "system"}
    )
    people = people.assign(rater="ext-rater", rater_kind="human")
    people["score"] = pd.array(
        [pd.NA if pd.isna(m) else int(6 - round(m)) for m in people["mean"]], dtype="Int64"
    )
    people.loc[0, "score"] = pd.NA
    imported = client.push_scores(project, people.drop(columns="mean"), dataset="Colours")
    assert imported["status"] == "succeeded" and imported["batch"]["scores_created"] == 48

    # the export, as CSV and as JSONL, reads the same; N/A is missing, ints Int64
    long_csv = client.export(project, format="csv")
    long_jsonl = client.export(project, format="jsonl")
    pd.testing.assert_frame_equal(long_csv, long_jsonl)
    assert len(long_csv) == 48 + 48 and str(long_csv["score"].dtype) == "Int64"
    assert int(long_csv["score"].isna().sum()) == 1 == int(long_csv["is_na"].sum())
    # as Parquet, the same scores with the server's types: nullable ints, N/A missing
    long_parquet = client.export(project, format="parquet")
    # the Hugging Face layout, as the zip's bytes: the card and the human and judge splits
    with zipfile.ZipFile(
        io.BytesIO(client.export_file(project, kind="hf_dataset", format="zip"))
    ) as z:
        names = {name.split("/", 1)[1] for name in z.namelist()}  # under one folder
    assert {"README.md", "data/human-00000-of-00001.parquet"} <= names
    assert "data/judge-00000-of-00001.parquet" in names
    assert len(long_parquet) == len(long_csv) and str(long_parquet["score"].dtype) == "Int8"
    order = ["rater", "system", "item", "skill"]
    long_csv = long_csv.sort_values(order, ignore_index=True)
    long_parquet = long_parquet.sort_values(order, ignore_index=True)
    assert long_parquet["score"].astype("Int64").equals(long_csv["score"])
    assert long_parquet["is_na"].astype("boolean").equals(long_csv["is_na"].astype("boolean"))

    # the report, computed by the worker, as DataFrames with their n
    report = client.report(project, resamples=0)
    assert {"agreement", "correlation", "snapshot"} <= set(report.raw)
    judged = report.correlation[report.correlation["judge"] == "Fake judge"]
    assert set(judged["skill"]) == set(SKILLS) and set(judged["level"]) == {
        "instance",
        "item",
        "system",
    }
    # n: the responses both the judge and the person scored (N/A on either side left out)
    both = people.dropna(subset=["score", "mean"]).groupby("skill").size()
    instance = judged[judged["level"] == "instance"].set_index("skill")["n"]
    assert instance.sort_index().tolist() == both.sort_index().tolist()
    assert sum(instance) < 48  # the N/A
    assert "too_few" in report.correlation.columns
    assert report.snapshot["status"] == "done"

    # errors carry the server's fields
    with pytest.raises(flaskweb_client.BadRequestError) as bad:
        client.create_project("not a slug!")
    assert "slug" in bad.value.fields and bad.value.status == 400
    with pytest.raises(flaskweb_client.NotFoundError):
        client.run(10**9)
    client.close()


@pytest.mark.slow  # a Python process importing pandas: about a second
def test_the_walkthrough_script_answers_help():
    import subprocess

    done = subprocess.run(
        [sys.executable, str(REPO / "docs" / "examples" / "client_walkthrough.py"), "--help"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(CLIENT_DIR), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--token" in done.stdout and "--base-url" in done.stdout


def test_the_package_is_typed_and_versioned():
    assert (CLIENT_DIR / "flaskweb_client" / "py.typed").exists()
    assert flaskweb_client.__version__ == "0.1.0"
    text = (CLIENT_DIR / "pyproject.toml").read_text()
    assert 'name = "flaskweb-client"' in text and 'version = "0.1.0"' in text
    assert Path(CLIENT_DIR / "README.md").exists()
