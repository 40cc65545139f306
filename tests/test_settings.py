import pytest
from django.core.exceptions import ImproperlyConfigured

from flaskweb.env import database_from_url, env_bool, env_int, env_secret


def test_database_urls_become_django_settings():
    pg = database_from_url("postgres://u:p%40ss@db.example:6543/flask?sslmode=require")
    assert pg == {
        "ENGINE": "django.db.backends.postgresql", "NAME": "flask", "USER": "u",
        "PASSWORD": "p@ss", "HOST": "db.example", "PORT": "6543",
        "OPTIONS": {"sslmode": "require"},
    }  # fmt: skip
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
