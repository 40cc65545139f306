"""The test databases are copies of one migrated template (tests/db_template.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotation.models import Skill
from tests import db_template


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_this_database_holds_every_migration_and_a_copy_is_of_the_current_template(
    _cloned_test_db,
):
    # given the databases on the server
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", ["%\\_tpl\\_%"])
        templates = [row[0] for row in cursor.fetchall()]
    # then the tests do not run on a template
    assert connection.settings_dict["NAME"] not in templates
    if _cloned_test_db:  # copied in this run (always with --create-db, as in CI)
        # from the template named after the code as it is
        assert [t for t in templates if t.endswith("_tpl_" + db_template.digest())], templates
    # and the database holds every migration and the catalogue they seed
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    assert Skill.objects.filter(project__isnull=True).count() == 12


def test_the_template_depends_on_every_migration_and_the_code_they_import():
    files = set(db_template.inputs())
    for app in ("annotation", "judging", "analytics", "auth", "contenttypes", "authtoken"):
        folder = Path(apps.get_app_config(app).path) / "migrations"
        assert set(folder.glob("0*.py")) <= files, app
        assert set(folder.glob("0*.py")), app
    # the built-in catalogue's data migration imports the project's text of it
    assert db_template.REPO / "annotation" / "catalogue_text.py" in files


def test_a_changed_file_names_another_template(tmp_path):
    # given two files and the template they name
    one, two = tmp_path / "0001_initial.py", tmp_path / "0002_more.py"
    one.write_text("operations = []\n")
    two.write_text("operations = []\n")
    before = db_template.digest([one, two])
    assert db_template.digest([one, two]) == before  # the same files, the same name
    # when one of them changes, then the name does
    two.write_text("operations = [1]\n")
    assert db_template.digest([one, two]) != before
