"""The participants' page path reads with fixed SQL (issue 33): the assignment with its
campaign and task, the session and the signed-in user, and the remembered skill rows.
Each must give what the ORM and Django's own backends give; this file runs on SQLite too
(scripts/test_suite.py SQLITE_TESTS), whose text datetimes and integer booleans need the
converters."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore as DjangoSessionStore
from django.contrib.sessions.models import Session
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from annotation.annotate.selectors import assignment_get_for_annotator
from annotation.models import Assignment, Campaign, Task
from annotation.selectors import TaskSkill
from annotation.services.assignments import assignment_claim_next
from annotation.templatetags import scoring
from flaskweb import auth_backend
from flaskweb.db import ModelRow
from flaskweb.sessions import SessionStore
from tests.annotation.test_annotate_views import HX, build_campaign, build_dataset


def _fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


@pytest.fixture
def claimed(project, tmp_path, annotator):
    dataset = build_dataset(project, tmp_path, texts=["First answer.", "Second answer."])
    campaign = build_campaign(
        project,
        dataset,
        annotators=[annotator],
        gold_feedback=True,
    )
    # values of every kind the converters handle: a decimal, JSON, booleans, datetimes
    Campaign.objects.filter(pk=campaign.pk).update(
        hourly_wage=Decimal("12.50"), quality_rules={"min_seconds": 3}, break_every=7
    )
    assignment = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert assignment is not None
    return assignment


def test_the_assignment_read_equals_the_orm_read_field_by_field(claimed, annotator):
    read = assignment_get_for_annotator(user=annotator, assignment_id=claimed.pk)
    orm = Assignment.objects.select_related("campaign", "task").get(pk=claimed.pk)
    assert _fields(read) == _fields(orm)
    assert _fields(read.campaign) == _fields(orm.campaign)
    assert _fields(read.task) == _fields(orm.task)
    # the types the ORM gives, on either database: aware datetimes, bools, Decimal, JSON
    assert read.created_at.tzinfo is not None and read.campaign.updated_at.tzinfo is not None
    assert read.campaign.gold_feedback is True and read.task.b_left in (True, False)
    assert read.campaign.hourly_wage == Decimal("12.50")
    assert read.campaign.quality_rules == orm.campaign.quality_rules
    assert isinstance(read.campaign.model_names, list)
    # the instances are as from the database: saving updates, never inserts
    assert not read._state.adding and not read.campaign._state.adding
    # response and item load on first use (a card redrawn with an error)
    assert read.task.response.item.instruction == orm.task.response.item.instruction


def test_someone_elses_assignment_is_not_found(claimed, outsider):
    with pytest.raises(Assignment.DoesNotExist):
        assignment_get_for_annotator(user=outsider, assignment_id=claimed.pk)
    with pytest.raises(Assignment.DoesNotExist):
        assignment_get_for_annotator(user=claimed.annotator, assignment_id=claimed.pk + 10**6)


def test_a_model_row_refuses_a_row_of_the_wrong_length(db):
    row = ModelRow(Task, "t")
    with pytest.raises(ValueError, match="values for"):
        row.instance([1, 2, 3])
    assert row.columns.startswith("t.") and len(row) == len(Task._meta.concrete_fields)


# --- the session and the signed-in user ------------------------------------------------------


def test_the_session_store_reads_what_djangos_reads(db):
    django_store = DjangoSessionStore()
    django_store["answer"] = {"a": [1, 2]}
    django_store.save()
    ours = SessionStore(session_key=django_store.session_key)
    assert ours["answer"] == {"a": [1, 2]}
    assert ours.session_key == django_store.session_key


@pytest.mark.parametrize("how", ["unknown", "expired"])
def test_a_session_that_reads_nothing_starts_empty_and_drops_its_key(db, how):
    store = SessionStore()
    store["x"] = 1
    store.save()
    key = store.session_key
    if how == "expired":
        Session.objects.filter(session_key=key).update(expire_date=timezone.now())
    else:
        key = key[:-4] + "zzzz"
    again = SessionStore(session_key=key)
    assert again.get("x") is None
    assert again.session_key is None  # as Django's: a new key if anything is stored


def _signed_in_client(user, backend_path: str) -> Client:
    """A session as login() writes it, under `backend_path` (a session from before the
    upgrade records Django's ModelBackend)."""
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = backend_path
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    client = Client()
    client.cookies["sessionid"] = store.session_key
    return client


@pytest.mark.parametrize("path", [auth_backend.PATH, auth_backend.EARLIER_PATH])
def test_a_session_signs_in_under_the_backend_and_under_djangos_earlier_one(annotator, path):
    client = _signed_in_client(annotator, path)
    page = client.get(reverse("annotation:my-campaigns"))
    assert page.status_code == 200
    assert annotator.username in page.content.decode()


def test_a_deactivated_user_or_a_changed_password_signs_the_session_out(annotator):
    client = _signed_in_client(annotator, auth_backend.PATH)
    assert client.get(reverse("annotation:my-campaigns")).status_code == 200
    annotator.is_active = False
    annotator.save()
    assert client.get(reverse("annotation:my-campaigns")).status_code == 302  # to sign-in
    annotator.is_active = True
    annotator.save()
    assert client.get(reverse("annotation:my-campaigns")).status_code == 200
    annotator.set_password("another-long-passphrase-42")
    annotator.save()
    assert client.get(reverse("annotation:my-campaigns")).status_code == 302


def test_the_backend_reads_every_column_of_the_user(annotator):
    user = auth_backend.ModelBackend().get_user(annotator.pk)
    assert user is not None and _fields(user) == _fields(
        type(annotator).objects.get(pk=annotator.pk)
    )
    assert auth_backend.ModelBackend().get_user(annotator.pk + 10**6) is None


# --- remembered skill rows --------------------------------------------------------------------

SKILL = TaskSkill(
    skill_id=7,
    name="Factuality <b>",
    rubric_id=3,
    criterion="Is it true? & sourced",
    anchors=["wrong", "mostly wrong", "mixed", "mostly right", "right"],
    checklist=["names the year"],
)


def _direct(row: dict, n: int, total: int) -> str:
    return render_to_string(
        scoring.ROW_TEMPLATE,
        {"skill": row["skill"], "row": row, "n": n, "total": total, "max_rationale": 2000},
    )


@pytest.mark.parametrize("language", ["en", "es", "ar"])
def test_a_remembered_row_is_the_row_the_template_renders(language):
    scoring._fresh_row.cache_clear()
    row = {"skill": SKILL, "value": "", "rationale": ""}
    with translation.override(language):
        first = scoring.skill_row(row, 2, 3, 2000)
        again = scoring.skill_row(row, 2, 3, 2000)
        assert first == again == _direct(row, 2, 3)
    assert scoring._fresh_row.cache_info().hits == 1
    assert "Factuality &lt;b&gt;" in first and "&amp; sourced" in first  # escaped
    with translation.override("es"):
        assert "Puntuación de Factuality" in scoring.skill_row(row, 2, 3, 2000)


def test_each_input_of_a_row_is_in_its_key():
    scoring._fresh_row.cache_clear()
    row = {"skill": SKILL, "value": "", "rationale": ""}
    base = scoring.skill_row(row, 1, 3, 2000)
    assert scoring.skill_row(row, 2, 3, 2000) != base  # position
    assert scoring.skill_row(row, 1, 2, 2000) != base  # total
    assert scoring.skill_row(row, 1, 3, 100) != base  # rationale limit
    for change in (
        {"name": "Other"},
        {"criterion": "Other"},
        {"anchors": ["a", "b", "c", "d", "e"]},
        {"checklist": []},
        {"skill_id": 8},
    ):
        other = {**row, "skill": TaskSkill(**{**SKILL.__dict__, **change})}
        assert scoring.skill_row(other, 1, 3, 2000) == _direct(other, 1, 3) != base
    with translation.override("es"):
        assert scoring.skill_row(row, 1, 3, 2000) != base  # language


def test_an_answered_row_is_rendered_with_its_answers_and_not_remembered():
    scoring._fresh_row.cache_clear()
    row = {"skill": SKILL, "value": "4", "rationale": "my <reason>"}
    html = scoring.skill_row(row, 1, 3, 2000)
    assert html == _direct(row, 1, 3)
    assert 'value="4" checked' in html and "my &lt;reason&gt;" in html
    assert scoring._fresh_row.cache_info().currsize == 0


def test_the_card_served_after_a_submit_carries_the_rows(claimed, annotator):
    client = Client()
    client.force_login(annotator)
    card = client.get(reverse("annotation:annotate", args=[claimed.campaign_id]), headers=HX)
    html = card.content.decode()
    assert html.count("data-skill-row") == 3
    assert 'data-position="Skill 1 of 3: ' in html and 'data-position="Skill 3 of 3: ' in html
