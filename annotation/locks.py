"""Row locks of the assignment workflow, in one place so the lock order is the same everywhere.

Invariants these locks protect (all also backed by CHECK/UNIQUE constraints):
- a normal task never has more than `overlap` leases holding a slot (assigned <= overlap);
- a task's accepted submissions never exceed its slots (submitted <= assigned), so once a
  task is complete it has exactly `overlap` accepted scores per skill;
- an annotator never gets the same task twice (UNIQUE task, annotator, kind).

Lock order: an Assignment row before its Task row. The claim locks a single Task with
SKIP LOCKED and never waits, so it cannot take part in a deadlock; submit and expire lock
an assignment, then its task.
"""

from __future__ import annotations

from django.db.models import QuerySet

from annotation.models import Assignment, Task


def assignment_lock(*, assignment_id: int) -> Assignment:
    return Assignment.objects.select_for_update().get(pk=assignment_id)


def task_lock(*, task_id: int) -> Task:
    return Task.objects.select_for_update().get(pk=task_id)


def open_tasks_skip_locked(queryset: QuerySet[Task]) -> QuerySet[Task]:
    """Claimable tasks, locked without waiting: concurrent claims each get a different row."""
    return queryset.select_for_update(skip_locked=True, of=("self",))
