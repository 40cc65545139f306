import pytest
from django.core.exceptions import ImproperlyConfigured

from flaskweb.env import database_from_url, env_bool, env_int, env_secret


def test_database_urls_become_django_settings():
    pg = database_from_url("postgres://u:p%40ss@db.example:6543/flask?sslmode=require")
    assert pg == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "flask",
        "USER": "u",
        "PASSWORD": "p@ss",
        "HOST": "db.example",
        "PORT": "6543",
        "OPTIONS": {"sslmode": "require"},
    }
    assert database_from_url("sqlite:///var/x.db")["NAME"] == "var/x.db"
    assert database_from_url("sqlite:////abs/x.db")["NAME"] == "/abs/x.db"
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        database_from_url("mysql://x/y")


def test_booleans_are_strict(monkeypatch):
    monkeypatch.setenv("X_FLAG", "ture")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG"):
        env_bool("X_FLAG", False)
    monkeypatch.setenv("X_FLAG", "Yes")
    assert env_bool("X_FLAG", False) is True
    monkeypatch.setenv("X_NUM", "12a")
    with pytest.raises(ImproperlyConfigured):
        env_int("X_NUM", 1)


def test_secrets_come_from_files_and_are_required_in_production(monkeypatch, tmp_path):
    secret = tmp_path / "s"
    secret.write_text("from-file\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_secret("X_SECRET", required=True) == "from-file"
    monkeypatch.delenv("X_SECRET_FILE")
    monkeypatch.delenv("X_SECRET", raising=False)
    with pytest.raises(ImproperlyConfigured, match="X_SECRET"):
        env_secret("X_SECRET", required=True)


@pytest.mark.slow
def test_production_settings_pass_the_deploy_check(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
        DJANGO_SECRET_KEY="a" * 20 + "-Production-Secret-Key-For-The-Check-0123456789",
        DJANGO_ALLOWED_HOSTS="flaskweb.example.org",
        FLASKWEB_VAR_DIR=str(tmp_path),
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_boot_without_a_secret_key(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_"))
    }
    # production serves a database of its own (DATABASE_URL); `check` does not connect to it
    env.update(
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
        FLASKWEB_VAR_DIR=str(tmp_path),
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


@pytest.mark.slow
def test_the_embedded_default_runs_commands_with_debug_off_on_a_key_of_its_own(tmp_path):
    # given a fresh embedded install: no DATABASE_URL, no DJANGO_DEBUG, no DJANGO_SECRET_KEY
    import os
    import stat
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_"))
    }
    env.update(DJANGO_SETTINGS_MODULE="flaskweb.settings", FLASKWEB_VAR_DIR=str(tmp_path))
    show_key = [
        sys.executable,
        "-c",
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.SECRET_KEY, settings.DEBUG)",
    ]

    # when a command runs twice
    first = subprocess.run(show_key, cwd=REPO, env=env, capture_output=True, text=True)
    second = subprocess.run(show_key, cwd=REPO, env=env, capture_output=True, text=True)
    check = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True
    )

    # then both use one random key kept owner-only in var/, with DEBUG off
    assert first.returncode == 0, first.stderr
    key, debug = first.stdout.split()
    assert debug == "False"
    assert len(key) >= 50 and "insecure" not in key
    assert second.stdout == first.stdout
    assert (tmp_path / "secret_key").read_text().strip() == key
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    assert check.returncode == 0, check.stdout + check.stderr
    # and the file broker keeps its exchange tables in var/, not in the working directory
    assert not (REPO / "control").exists()


def test_the_openapi_schema_is_valid_and_generates_without_a_warning(tmp_path):
    # a view drf-spectacular cannot describe (an untyped field, an enum name collision, a
    # response it has to guess) is a warning, and fails here as it fails in CI
    from django.core.management import call_command

    call_command(
        "spectacular", validate=True, fail_on_warn=True, file=str(tmp_path / "schema.yaml")
    )
    assert "/api/v1/judging/runs/{id}/start/:" in (tmp_path / "schema.yaml").read_text()
