"""The migrations: none missing, and each app's squashed migration ends where its old chain does.

A fresh database migrates through the squashed migrations (annotation 0001_squashed_0014,
judging 0001_squashed_0008, analytics 0001_squashed_0007); a deployment that applied some of
the old ones goes on through the old chain. Both must leave the same models behind.
"""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.migrations.loader import MigrationLoader

APPS = ("annotation", "judging", "analytics")


@pytest.mark.django_db
def test_no_model_change_is_missing_a_migration():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit:
        pytest.fail(f"the models have changes no migration makes:\n{out.getvalue()}")


def _end_states(replace_migrations):
    loader = MigrationLoader(None, ignore_no_migrations=True, replace_migrations=replace_migrations)
    state = loader.project_state()
    return loader, {key: model for key, model in state.models.items() if key[0] in APPS}


def test_the_squashed_migrations_end_in_the_state_the_old_chains_end_in():
    # given the graph a fresh database migrates by, and the one of the old migrations
    squashed_loader, squashed = _end_states(replace_migrations=True)
    old_loader, old = _end_states(replace_migrations=False)
    for app in APPS:
        assert [n for n in squashed_loader.graph.leaf_nodes() if n[0] == app] != [
            n for n in old_loader.graph.leaf_nodes() if n[0] == app
        ], f"{app} has no squashed migration in use"

    # then the same models, fields (in the same order: PostgreSQL's columns follow it),
    # options, indexes and constraints
    assert sorted(squashed) == sorted(old)
    for key, model in old.items():
        assert squashed[key] == model, key
        assert list(squashed[key].fields) == list(model.fields), key
