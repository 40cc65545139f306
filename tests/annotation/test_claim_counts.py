"""The counts the claim policy reads (a quota, the gold and repeat cadence) come with the
claim state (annotation/services/hot_path.py, CLAIM_STATE): no statement of their own, the
same figures as counting the rows, and on PostgreSQL a claim statement that keeps its
generic plan (the separate quota count was planned afresh on every run)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Assignment, AssignmentStatus, Campaign, TaskKind
from annotation.services.assignments import _hot_path, assignment_claim_next, human_score_submit
from flaskweb.db import is_postgres
from tests.annotation.test_assignments import full_scores, make_dataset


@pytest.fixture
def campaign(project, tmp_path, annotator):
    """Three items by two models: six tasks, K = 2, the annotator in the pool."""
    made = campaign_create(
        project=project,
        dataset=make_dataset(project, tmp_path),
        name="C",
        overlap=2,
        annotators=[annotator],
        lease_seconds=60,
    )
    assert campaign_activate(campaign=made) == 6
    return made


def _state(campaign, annotator, *, decided=False):
    """The claim state as the backend's claim reads it (the claim goes on to a lease when
    may_claim holds)."""
    state, _ = _hot_path().claim(
        campaign_id=campaign.pk,
        annotator_id=annotator.pk,
        now=timezone.now(),
        decided=decided,
        routing=False,
    )
    return state


def _submitted_normal(campaign, annotator) -> int:
    return Assignment.objects.filter(
        campaign=campaign,
        annotator=annotator,
        status=AssignmentStatus.SUBMITTED,
        kind="normal",
        task__kind=TaskKind.NORMAL,
    ).count()


def _work(campaign, annotator, times: int) -> None:
    for _ in range(times):
        lease = assignment_claim_next(campaign=campaign, annotator=annotator)
        assert lease is not None
        human_score_submit(assignment_id=lease.pk, annotator=annotator, scores=full_scores(lease))


def test_a_quota_campaign_counts_the_submitted_tasks_in_the_claim_state(campaign, annotator):
    Campaign.objects.filter(pk=campaign.pk).update(quota_per_annotator=3)
    for done in range(3):
        state = _state(campaign, annotator)
        assert (state.submitted_normal, state.served) == (done, None)
        assert state.submitted_normal == _submitted_normal(campaign, annotator)
        _work(campaign, annotator, 1)
    assert _state(campaign, annotator).submitted_normal == 3
    assert assignment_claim_next(campaign=campaign, annotator=annotator) is None  # quota met
    # an open lease is counted as served, not as submitted
    Campaign.objects.filter(pk=campaign.pk).update(quota_per_annotator=None, gold_rate=0.5)
    lease = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert lease is not None
    state = _state(campaign, annotator)
    assert (state.submitted_normal, state.served) == (None, 4)
    assert state.served == Assignment.objects.filter(campaign=campaign, annotator=annotator).count()


def test_the_counts_are_read_only_when_the_settings_ask_and_not_when_decided(
    campaign,
    annotator,
):
    _work(campaign, annotator, 1)
    plain = _state(campaign, annotator)  # a plain campaign: nothing counted (and a lease)
    assert (plain.submitted_normal, plain.served, plain.may_claim) == (None, None, True)
    Campaign.objects.filter(pk=campaign.pk).update(quota_per_annotator=5, repeat_rate=0.5)
    state = _state(campaign, annotator)  # 1 submitted, 1 held
    assert (state.submitted_normal, state.served, state.may_claim) == (1, 2, False)
    decided = _state(campaign, annotator, decided=True)
    assert (decided.submitted_normal, decided.served) == (None, None)


def test_a_claim_on_a_quota_campaign_runs_no_count_of_its_own(campaign, annotator):
    Campaign.objects.filter(pk=campaign.pk).update(quota_per_annotator=5)
    _work(campaign, annotator, 1)
    with CaptureQueriesContext(connection) as counted:
        assert assignment_claim_next(campaign=campaign, annotator=annotator) is not None
    statements = [q["sql"] for q in counted.captured_queries if "SAVEPOINT" not in q["sql"].upper()]
    # PostgreSQL: the claim state (with the count), then the decided claim; SQLite: each
    # claim's state, slot and lease (the second's state only, the first stops at may_claim)
    assert len(statements) == (2 if is_postgres() else 4), statements
    assert not any(s.lstrip().upper().startswith("SELECT COUNT(*)") for s in statements)


@pytest.mark.postgres_only
@pytest.mark.skipif(not is_postgres(), reason="plan cache: PostgreSQL only")
def test_the_claim_on_a_quota_campaign_keeps_a_generic_plan(campaign, annotator):
    Campaign.objects.filter(pk=campaign.pk).update(quota_per_annotator=100, gold_rate=0.5)
    _work(campaign, annotator, 1)
    # psycopg prepares a statement at its sixth run on a connection; PostgreSQL then plans
    # the first five runs of the prepared statement for their parameters, and from the sixth
    # keeps the generic plan unless the custom ones cost less (as the separate count's did)
    for _ in range(14):
        state = _state(campaign, annotator)
        assert (state.submitted_normal, state.served, state.may_claim) == (1, 1, False)
    for _ in range(14):  # the first takes a lease; the others find it
        state = _state(campaign, annotator, decided=True)
        assert (state.submitted_normal, state.served) == (None, None)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement LIKE '%%SELECT COUNT(*)%%', generic_plans, custom_plans "
            "FROM pg_prepared_statements WHERE statement LIKE '%%AS submitted_normal%%' "
            "AND statement LIKE '%%INSERT INTO%%' ORDER BY 1"
        )
        plans = cursor.fetchall()
    assert [counting for counting, _, _ in plans] == [False, True], plans  # decided, counting
    assert all(generic >= 1 and custom <= 5 for _, generic, custom in plans), plans
