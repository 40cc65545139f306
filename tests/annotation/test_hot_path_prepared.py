"""The hot path's fixed SQL is prepared on PostgreSQL (flaskweb/db.py, the setting
DATABASE_PREPARED_STATEMENTS).

Django opens psycopg connections with prepare_threshold=None, which turns preparing off for
every cursor; until settings.py set it, the claim, the submission and the rest were bound on
the server but parsed and planned on every run: planning was 2.4 of the 3.1 ms PostgreSQL
spent per next + submit (bench/README.md, "PostgreSQL per submission"). These tests fail if
the statements stop being prepared, whatever their count.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from annotation.campaigns.services import campaign_activate, campaign_create
from flaskweb.db import fetch_one, is_postgres
from tests.annotation.test_annotate_api import api, claim, make_dataset, scores_for, submit_url

pytestmark = pytest.mark.skipif(not is_postgres(), reason="prepared statements: PostgreSQL only")


def prepared() -> list[str]:
    """The statements prepared on this database session (the test client shares it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_the_setting_turns_preparing_on_for_the_connection(db):
    assert settings.DATABASE_PREPARED_STATEMENTS
    connection.ensure_connection()
    assert connection.connection.prepare_threshold == 5


def test_a_fixed_statement_is_prepared_after_its_fifth_run(db):
    sql = "SELECT %s::integer + 1 AS test_hot_path_prepared"
    for n in range(6):
        assert fetch_one(sql, [n]) == (n + 1,)
    assert any("test_hot_path_prepared" in s for s in prepared())


def test_next_and_submit_run_prepared_statements(db, project, annotator, tmp_path):
    campaign = campaign_create(
        project=project,
        dataset=make_dataset(project, tmp_path, items=4),
        name="C",
        overlap=1,
        annotators=[annotator],
        lease_seconds=60,
    )
    assert campaign_activate(campaign=campaign) == 8
    client = api(annotator)
    for _ in range(7):  # psycopg prepares a statement on its sixth run on a connection
        task = claim(client, campaign)
        done = client.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
        assert done.status_code == 201, done.content
    statements = prepared()

    def has(fragment: str) -> bool:
        return any(fragment in s for s in statements)

    assert has("WITH st AS"), statements  # the claim
    assert has("WITH taken AS"), statements  # the submission's write
    assert has("WHERE t.key = $1"), statements  # the token lookup
    assert has("SELECT a.annotator_id, a.status"), statements  # the submission's read
    assert has("SELECT a.expires_at, c.id"), statements  # the card
