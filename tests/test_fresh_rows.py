"""What a transactional test leaves behind on PostgreSQL (`_FreshRows` in tests/conftest.py,
in place of Django's flush): the rows migrate made, with their ids, and no other row,
whatever the test committed or changed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from annotation.models import Skill
from annotation.services.catalogue import skill_create
from annotation.services.projects import project_create
from tests.conftest import _FreshRows

pytestmark = pytest.mark.postgres_only


def _tables(fresh: _FreshRows) -> dict[str, str | None]:
    """Every table's rows, as a digest (None: empty): what the next test would find."""
    with connection.cursor() as cursor:
        return {table: fresh._digest(cursor, table) for table in fresh.tables}


@pytest.mark.django_db(transaction=True)
def test_a_transactional_tests_rows_go_and_the_migrated_rows_come_back_as_they_were(
    django_user_model,
):
    fresh = _FreshRows.installed
    assert fresh is not None, "on PostgreSQL the flush is replaced"
    # given the rows migrate made: content types, permissions, the built-in catalogue
    before = _tables(fresh)
    assert {t for t, rows in before.items() if rows} == set(fresh.kept)
    assert {"django_content_type", "auth_permission", "annotation_skill"} <= set(fresh.kept)
    # when a test commits rows of its own and changes and deletes migrated ones
    user = django_user_model.objects.create_user("u")
    project = project_create(slug="p", name="P")
    skill_create(project=project, name="Own", criterion="c", anchors=list("abcde"), created_by=user)
    Skill.objects.filter(project=None).update(order=99)
    ContentType.objects.filter(app_label="auth").delete()  # and their permissions
    assert not Permission.objects.filter(content_type__app_label="auth").exists()
    during = _tables(fresh)
    assert during["auth_user"] and during["annotation_project"]
    assert during["annotation_skill"] != before["annotation_skill"]
    # and the database is put back, as the test's teardown does
    fresh.restore()
    # then every table holds what it held before, ids included, and nothing else
    assert _tables(fresh) == before
    assert ContentType.objects.get_for_model(Permission).app_label == "auth"
