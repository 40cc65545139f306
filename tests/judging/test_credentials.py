"""Judge credentials are the operator's decision: providers declared by site admins, a key
sent only to its provider's URLs, and a response cache that never crosses projects or
credentials. Driven through the project's local OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from annotation.services.projects import project_create
from devtools.openai_server import FakeOpenAIServer
from flaskweb.management.commands.serve import ADMIN_VARIABLES
from judging.llm.clients import JudgeError
from judging.models import JudgeConfig, JudgeKind, JudgeRun, Judgment, JudgmentStatus, Provider
from judging.services import (
    judge_config_create,
    judge_response,
    judge_run_create,
    judge_run_start,
    provider_problems,
)
from judging.services.providers import provider_api_key
from tests.annotation.test_assignments import make_dataset
from tests.judging.providers import provider_for
from tests.judging.test_runs import response_ids, running

SECRET = "sk-server-secret-value-0123456789"


@pytest.fixture
def server():
    with FakeOpenAIServer(style="json") as srv:
        yield srv


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, sub(tmp_path, "a"), items=2, models=("m1", "m2"))


@pytest.fixture
def other_project(db):
    return project_create(slug="other-project", name="Other project")


def sub(tmp_path, name):
    path = tmp_path / name
    path.mkdir()
    return path


def judge_on(project, provider, name="J", **extra):
    return judge_config_create(
        project=project,
        name=name,
        kind=JudgeKind.LLM,
        provider=provider,
        model="fake-judge",
        use_reference=False,
        **extra,
    )


def judge_all(run):
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
    run.refresh_from_db()
    return run


# --- what a researcher can set --------------------------------------------------------------


def test_a_researcher_cannot_make_a_judge_send_a_server_variable(
    researcher_client, project, dataset, server, monkeypatch
):
    # given a secret in the workers' environment, and a server that accepts only that
    # secret as its key (as an attacker's server would happily log it)
    monkeypatch.setenv("FLASKWEB_PROBE_SECRET", SECRET)
    server.configure(api_key=SECRET)
    provider = provider_for(server.url)  # a keyless local provider
    # when the researcher names the variable in the judge form anyway
    response = researcher_client.post(
        reverse("judging:judge-create", args=[project.slug]),
        {
            "kind": "llm",
            "name": "Probe",
            "provider": provider.pk,
            "model": "fake-judge",
            "api_key_env": "FLASKWEB_PROBE_SECRET",
            "base_url": server.url,
            "temperature": "0",
            "max_tokens": "64",
            "timeout_seconds": "10",
            "max_attempts": "1",
            "samples": "1",
            "price_per_1k_prompt": "0",
            "price_per_1k_completion": "0",
        },
    )
    assert response.status_code == 302
    judge = JudgeConfig.objects.get(name="Probe")
    run = judge_all(running(judge_run_create(judge=judge, dataset=dataset)))
    # then the secret was never sent: the server refused every call as unauthenticated
    assert run.failed == 4 and run.done == 0
    assert all("401" in j.error for j in Judgment.objects.filter(run=run))
    assert not any(f.name == "api_key_env" for f in JudgeConfig._meta.fields)


def test_a_researcher_cannot_point_a_judge_at_a_url_its_provider_does_not_declare(project):
    provider = provider_for("http://127.0.0.1:9/v1", key_env="OPENAI_API_KEY")
    with pytest.raises(ValidationError, match="declares no such base URL"):
        judge_on(project, provider, base_url="http://127.0.0.1:9999/v1")


def test_a_provider_awaiting_approval_cannot_be_used(project, dataset, server):
    provider = provider_for(server.url)
    judge = judge_on(project, provider)
    run = judge_run_create(judge=judge, dataset=dataset)
    Provider.objects.filter(pk=provider.pk).update(approved=False)
    judge.refresh_from_db()
    # no new judge, no start
    with pytest.raises(ValidationError, match="awaits a site admin's approval"):
        judge_on(project, Provider.objects.get(pk=provider.pk), name="J2")
    with pytest.raises(ValidationError, match="awaits a site admin's approval"):
        judge_run_start(run=JudgeRun.objects.get(pk=run.pk))
    # and a run already running makes no call
    run = judge_all(running(run))
    assert run.failed == 4 and server.stats()["completions"] == 0
    assert "awaits a site admin's approval" in Judgment.objects.filter(run=run).first().error


def test_a_provider_offered_to_one_project_is_not_offered_to_another(
    project, other_project, researcher_client
):
    provider = provider_for("http://127.0.0.1:9/v1")
    provider.projects.set([other_project])
    with pytest.raises(ValidationError, match="not offered to this project"):
        judge_on(project, provider)
    page = researcher_client.get(reverse("judging:judge-create", args=[project.slug]))
    assert provider.name not in page.content.decode()
    assert judge_on(other_project, provider).provider == provider


def test_researchers_list_the_providers_offered_to_their_project_without_key_locations(
    researcher_client, project, other_project
):
    offered = provider_for("http://127.0.0.1:9/v1", key_env="FLASKWEB_LISTED_KEY")
    elsewhere = provider_for("http://127.0.0.1:10/v1")
    elsewhere.projects.set([other_project])
    waiting = provider_for("http://127.0.0.1:11/v1")
    Provider.objects.filter(pk=waiting.pk).update(approved=False)
    response = researcher_client.get(f"/api/v1/judging/projects/{project.slug}/providers/")
    assert response.status_code == 200
    rows = response.json()["results"]
    assert [r["name"] for r in rows] == [offered.name]
    assert rows[0]["needs_key"] is True and rows[0]["base_urls"] == ["http://127.0.0.1:9/v1"]
    assert "FLASKWEB_LISTED_KEY" not in response.content.decode()


def test_a_missing_key_is_recorded_without_naming_where_it_is_kept(project, dataset, server):
    judge = judge_on(project, provider_for(server.url, key_env="FLASKWEB_UNSET_KEY_VAR"))
    run = judge_all(running(judge_run_create(judge=judge, dataset=dataset)))
    error = Judgment.objects.filter(run=run).first().error
    assert run.failed == 4 and "not available on the judging workers" in error
    assert "FLASKWEB_UNSET_KEY_VAR" not in error
    assert server.stats()["completions"] == 0


def test_the_key_is_read_from_the_variable_or_the_file_the_admin_declared(
    project, dataset, server, tmp_path
):
    server.configure(api_key=SECRET)
    key_file = tmp_path / "key"
    key_file.write_text(SECRET + "\n")
    judge = judge_on(project, provider_for(server.url, api_key_file=str(key_file)))
    run = judge_all(running(judge_run_create(judge=judge, dataset=dataset)))
    assert run.done == 4 and run.failed == 0
    assert SECRET not in str(list(Judgment.objects.filter(run=run).values()))


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"api_key_env": "DJANGO_SECRET_KEY"}, "api_key_env", "the server's own settings"),
        ({"api_key_env": "DATABASE_URL"}, "api_key_env", "the server's own settings"),
        ({"api_key_env": "REDIS_URL"}, "api_key_env", "the server's own settings"),
        ({"api_key_env": "sk-live-123"}, "api_key_env", "never the key itself"),
        ({"api_key_env": "OPENAI_API_KEY_FILE"}, "api_key_env", "Enter OPENAI_API_KEY"),
        ({"api_key_file": "secrets/key"}, "api_key_file", "absolute path"),
        ({"base_urls": []}, "base_urls", "list of base URLs"),
        ({"base_urls": ["http://10.0.0.5/v1"]}, "base_urls", "private"),
        ({"prices": {"m": {"input": "1"}}}, "prices", "Prices per 1k tokens"),
        ({"prices": {"m": {"prompt": "-1"}}}, "prices", "non-negative"),
    ],
)
def test_provider_settings_are_checked(fields, field, message):
    settings = {
        "base_urls": ["https://api.example.com/v1"],
        "api_key_env": "",
        "api_key_file": "",
        "is_local": False,
        "prices": {},
        **fields,
    }
    assert message in provider_problems(**settings)[field]


#: Where the server reads its own environment: every name read there is its own setting.
SERVER_SOURCES = (
    "flaskweb/settings.py",
    "flaskweb/settings_test.py",
    "flaskweb/celery.py",
    "flaskweb/management/commands/serve.py",
    "gunicorn.conf.py",
    "manage.py",
)
ENV_READ = re.compile(
    r"""(?:\benv_[a-z]+\(|\benviron\.(?:get|setdefault)\(|\benviron\[|\bgetenv\(|\b_int\()"""
    r'\s*"([A-Z][A-Z0-9_]+)"'
)


def server_variables() -> set[str]:
    base = Path(django_settings.BASE_DIR)
    names = set(ADMIN_VARIABLES)
    for source in SERVER_SOURCES:
        names |= set(ENV_READ.findall((base / source).read_text()))
    example = (base / ".env.example").read_text()
    return names | set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", example, re.MULTILINE))


def key_variable_problem(name: str) -> str:
    return provider_problems(
        base_urls=["http://127.0.0.1:8000/v1"],
        api_key_env=name,
        api_key_file="",
        is_local=True,
        prices={},
    ).get("api_key_env", "")


def key_file_problem(path: str) -> str:
    return provider_problems(
        base_urls=["http://127.0.0.1:8000/v1"],
        api_key_env="",
        api_key_file=path,
        is_local=True,
        prices={},
    ).get("api_key_file", "")


def test_no_variable_the_server_reads_can_be_a_providers_key_variable():
    # was: FLASKWEB_*, SECRET_KEY, TEST_*, GUNICORN_* … were accepted as a key's variable
    names = server_variables() | {"SECRET_KEY", "FLASKWEB_PROBE_SECRET", "TEST_ANYTHING"}
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "FLASKWEB_VAR_DIR"} <= names
    accepted = sorted(
        n for n in names if "the server's own settings" not in key_variable_problem(n)
    )
    assert accepted == []
    # and the message says which rule it fell under
    assert key_variable_problem("FLASKWEB_MAX_BODY_BYTES") == (
        "FLASKWEB_MAX_BODY_BYTES is one of the server's own settings (FLASKWEB_* variables are "
        "refused): name the variable that holds this provider's key, e.g. OPENAI_API_KEY."
    )
    assert key_variable_problem("OPENAI_API_KEY") == ""


def test_a_key_file_in_proc_sys_or_dev_is_refused_however_its_path_is_written(tmp_path):
    # was: --key-file /proc/self/environ made the worker's environment the bearer token
    link = tmp_path / "innocent-key"
    link.symlink_to("/proc/self/environ")
    cases = {
        "/proc/self/environ": "/proc/self/environ is under /proc: ",
        "/sys/kernel/notes": "is under /sys",
        "/dev/stdin": "/dev/stdin is under /dev: ",
        "/run/secrets/../../proc/self/environ": "is under /proc (it leads to /proc/self/environ)",
        "//proc/self/environ": "is under /proc",
        str(link): f"{link} is under /proc (it leads to /proc/",
    }
    for path, problem in cases.items():
        assert problem in key_file_problem(path), path
    assert "a secret file of the provider's own" in key_file_problem("/dev/stdin")
    # a file of its own, and a /procedures directory, are fine
    assert key_file_problem("/run/secrets/openai_key") == ""
    assert key_file_problem("/procedures/key") == ""


def test_a_key_file_that_holds_one_of_the_servers_own_secrets_is_refused(tmp_path, monkeypatch):
    secret = tmp_path / "django_secret_key"
    secret.write_text("not-a-provider-key")
    monkeypatch.setenv("DJANGO_SECRET_KEY_FILE", str(secret))
    (tmp_path / "link").symlink_to(secret)
    for path in (str(secret), str(tmp_path / "link"), f"{tmp_path}/x/../django_secret_key"):
        assert key_file_problem(path) == (
            f"{path} is the file of the server's own setting DJANGO_SECRET_KEY_FILE."
        )


def test_a_workers_key_file_is_checked_again_when_the_key_is_read(db, tmp_path, monkeypatch):
    # given a provider saved with a key file that was a symlink to a real secret file
    real = tmp_path / "real-key"
    real.write_text("sk-provider-key\n")
    link = tmp_path / "key"
    link.symlink_to(real)
    provider = provider_for("http://127.0.0.1:9/v1", api_key_file=str(link))
    assert provider_api_key(provider) == "sk-provider-key"
    # when the symlink is pointed at the worker's environment afterwards
    link.unlink()
    link.symlink_to("/proc/self/environ")
    # then the worker reads nothing, and the error does not say where the key is kept
    with pytest.raises(JudgeError) as caught:
        provider_api_key(provider)
    assert caught.value.code == "no_key" and not caught.value.retryable
    assert str(link) not in str(caught.value) and "no key may be read" in str(caught.value)
    # nor through the variable's NAME_FILE twin
    monkeypatch.setenv("PROBE_PROVIDER_KEY_FILE", "/proc/self/environ")
    with pytest.raises(JudgeError, match="no key may be read"):
        provider_api_key(provider_for("http://127.0.0.1:9/v1", key_env="PROBE_PROVIDER_KEY"))


def test_the_providers_price_table_sets_a_new_judges_prices(project):
    provider = provider_for(
        "http://127.0.0.1:9/v1", prices={"fake-judge": {"prompt": "0.5", "completion": "2"}}
    )
    judge = judge_on(project, provider, price_per_1k_prompt=0, price_per_1k_completion=0)
    assert (str(judge.price_per_1k_prompt), str(judge.price_per_1k_completion)) == ("0.5", "2")


# --- the response cache ---------------------------------------------------------------------


def test_a_cached_answer_serves_only_the_project_and_credential_that_paid_for_it(
    project, other_project, dataset, server, tmp_path, monkeypatch
):
    # given two projects judging identical texts with one provider
    monkeypatch.setenv("FLASKWEB_TEST_PROVIDER_KEY", SECRET)
    server.configure(api_key=SECRET)
    provider = provider_for(server.url, key_env="FLASKWEB_TEST_PROVIDER_KEY")
    other_set = make_dataset(other_project, sub(tmp_path, "b"), items=2, models=("m1", "m2"))
    judge_all(running(judge_run_create(judge=judge_on(project, provider), dataset=dataset)))
    assert server.stats()["completions"] == 4
    # when the other project runs the same requests
    run = judge_all(
        running(judge_run_create(judge=judge_on(other_project, provider), dataset=other_set))
    )
    # then it paid for its own answers
    assert run.cached == 0 and run.done == 4 and server.stats()["completions"] == 8
    # and with another credential the first project gets no hit of the old one's either
    monkeypatch.setenv("FLASKWEB_TEST_PROVIDER_KEY", SECRET + "-rotated")
    server.configure(api_key=SECRET + "-rotated")
    rerun = judge_all(
        running(judge_run_create(judge=judge_on(project, provider, name="K"), dataset=dataset))
    )
    assert rerun.cached == 0 and server.stats()["completions"] == 12


def test_a_judge_whose_key_is_missing_never_gets_a_cache_hit(project, dataset, server, monkeypatch):
    monkeypatch.setenv("FLASKWEB_TEST_PROVIDER_KEY", SECRET)
    server.configure(api_key=SECRET)
    provider = provider_for(server.url, key_env="FLASKWEB_TEST_PROVIDER_KEY")
    judge_all(running(judge_run_create(judge=judge_on(project, provider), dataset=dataset)))
    monkeypatch.delenv("FLASKWEB_TEST_PROVIDER_KEY")
    run = judge_all(
        running(judge_run_create(judge=judge_on(project, provider, name="J2"), dataset=dataset))
    )
    assert run.cached == 0 and run.failed == 4
    assert {j.status for j in Judgment.objects.filter(run=run)} == {JudgmentStatus.FAILED}


def test_a_provider_an_admin_lets_share_its_cache_serves_every_project(
    project, other_project, dataset, server, tmp_path
):
    provider = provider_for(server.url, shared_cache=True)
    other_set = make_dataset(other_project, sub(tmp_path, "b"), items=2, models=("m1", "m2"))
    judge_all(running(judge_run_create(judge=judge_on(project, provider), dataset=dataset)))
    run = judge_all(
        running(judge_run_create(judge=judge_on(other_project, provider), dataset=other_set))
    )
    assert run.cached == 4 and server.stats()["completions"] == 4


# --- site admins declare providers ----------------------------------------------------------


def test_only_superusers_see_providers_in_the_admin(client, django_user_model):
    staff = django_user_model.objects.create_user("staffer", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/judging/provider/").status_code == 403
    root = django_user_model.objects.create_superuser("root-admin", password="pw")
    client.force_login(root)
    assert client.get("/admin/judging/provider/").status_code == 200


def test_the_admin_form_refuses_a_server_variable_and_a_private_url(admin_client):
    response = admin_client.post(
        "/admin/judging/provider/add/",
        {
            "name": "evil",
            "base_urls": '["http://192.168.1.10/v1"]',
            "api_key_env": "DJANGO_SECRET_KEY",
            "prices": "{}",
        },
    )
    body = response.content.decode()
    assert response.status_code == 200 and "the server&#x27;s own settings" in body
    assert "private" in body and not Provider.objects.filter(name="evil").exists()


def test_the_command_declares_lists_and_approves_providers(project):
    out = StringIO()
    call_command(
        "judge_provider",
        "local-vllm",
        "--url",
        "http://127.0.0.1:8000/v1",
        "--local",
        "--project",
        project.slug,
        "--price",
        "m=0.1,0.2",
        stdout=out,
    )
    provider = Provider.objects.get(name="local-vllm")
    assert not provider.approved and "not approved" in out.getvalue()
    call_command("judge_provider", "local-vllm", "--approve", stdout=out)
    call_command("judge_provider", "--list", stdout=out)
    provider.refresh_from_db()
    assert provider.approved and provider.prices == {"m": {"prompt": "0.1", "completion": "0.2"}}
    assert "local-vllm: http://127.0.0.1:8000/v1 (approved; local; no key; demo-project)" in (
        out.getvalue()
    )
    with pytest.raises(CommandError, match="loopback"):
        call_command("judge_provider", "public", "--url", "http://127.0.0.1:1/v1", stdout=out)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--key-env", "SECRET_KEY", "--key-env: SECRET_KEY is one of the server's own settings"),
        ("--key-env", "FLASKWEB_VAR_DIR", "(FLASKWEB_* variables are refused)"),
        ("--key-env", "DJANGO_SECRET_KEY", "(DJANGO_* variables are refused)"),
        ("--key-env", "TEST_DATABASE_URL", "(TEST_* variables are refused)"),
        ("--key-file", "/proc/self/environ", "--key-file: /proc/self/environ is under /proc"),
        ("--key-file", "/dev/../proc/1/environ", "is under /proc (it leads to /proc/1/environ)"),
    ],
)
def test_the_command_refuses_server_variables_and_system_files_as_the_key(
    db, option, value, message
):
    url = ["--url", "http://127.0.0.1:8000/v1", "--local", "--approve"]
    with pytest.raises(CommandError) as caught:
        call_command("judge_provider", "probe", *url, option, value, stdout=StringIO())
    assert message in str(caught.value)
    assert not Provider.objects.filter(name="probe").exists()
    # nor can an existing provider be changed to one
    call_command("judge_provider", "probe", *url, "--key-env", "OPENAI_API_KEY", stdout=StringIO())
    with pytest.raises(CommandError, match="the server.s own settings|is under"):
        call_command("judge_provider", "probe", option, value, stdout=StringIO())
    provider = Provider.objects.get(name="probe")
    assert (provider.api_key_env, provider.api_key_file) == ("OPENAI_API_KEY", "")


def test_the_admin_form_refuses_a_flaskweb_variable_and_a_proc_key_file(admin_client):
    fields = {"name": "evil", "base_urls": '["http://127.0.0.1:8000/v1"]', "is_local": "on"}
    for key, value, message in (
        ("api_key_env", "FLASKWEB_PROBE_SECRET", "(FLASKWEB_* variables are refused)"),
        ("api_key_file", "/proc/self/environ", "/proc/self/environ is under /proc"),
    ):
        response = admin_client.post(
            "/admin/judging/provider/add/", {**fields, key: value, "prices": "{}"}
        )
        assert response.status_code == 200 and message in response.content.decode()
    assert not Provider.objects.filter(name="evil").exists()


# --- the migration --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_existing_judges_get_one_unapproved_provider_per_url_and_key_variable():
    executor = MigrationExecutor(connection)
    executor.migrate([("judging", "0002_pairwise")])
    apps = executor.loader.project_state([("judging", "0002_pairwise")]).apps
    Project = apps.get_model("annotation", "Project")
    Judge = apps.get_model("judging", "JudgeConfig")
    project = Project.objects.create(slug="legacy", name="Legacy")
    made = [
        ("a", "https://api.example.com/v1", "OPENAI_API_KEY", 100),
        ("b", "https://api.example.com/v1", "OPENAI_API_KEY", 50),
        ("c", "https://api.example.com/v1", "DJANGO_SECRET_KEY", None),
        ("d", "http://127.0.0.1:8089/v1", "", None),
    ]
    for name, url, env, rpm in made:
        Judge.objects.create(
            project=project,
            name=name,
            kind="llm",
            base_url=url,
            model="m",
            api_key_env=env,
            requests_per_minute=rpm,
        )
    Judge.objects.create(project=project, name="base", kind="baseline", baseline="rouge-l")
    # when
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    # then
    judges = {j.name: j for j in JudgeConfig.objects.select_related("provider")}
    assert judges["a"].provider == judges["b"].provider != judges["c"].provider
    assert judges["base"].provider is None
    assert Provider.objects.count() == 3 and not Provider.objects.filter(approved=True).exists()
    assert judges["a"].provider.requests_per_minute == 50
    assert judges["c"].provider.api_key_env == "DJANGO_SECRET_KEY"  # for an admin to look at
    assert judges["d"].provider.base_urls == ["http://127.0.0.1:8089/v1"]
