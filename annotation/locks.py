"""Row locks of the assignment workflow, in one place so the lock order is the same everywhere.

Invariants these locks protect (all also backed by CHECK/UNIQUE constraints):
- a normal task never has more than `overlap` leases holding a slot (assigned <= overlap);
- a task's accepted submissions never exceed its slots (submitted <= assigned), so once a
  task is complete it has exactly `overlap` accepted scores per skill;
- an annotator never gets the same task twice (UNIQUE task, annotator, kind);
- an annotator holds at most one active lease per campaign (partial UNIQUE index).

Lock order: an Assignment row before its Task row. The claim (fixed SQL in
services/hot_path_postgres.py) locks a single Task, first with SKIP LOCKED; only when that
finds nothing does it wait, for one Task row at a time, holding no row lock while it
waits. Its new lease may wait on the one-lease index for the same annotator's other claim,
which holds no lock the first one needs. Submit (one statement there too: it takes
the assignment, then counts the task), skip and expire lock an assignment, then its task.
"""

from __future__ import annotations

from annotation.models import Assignment, Task


def assignment_lock(*, assignment_id: int) -> Assignment:
    return Assignment.objects.select_for_update().get(pk=assignment_id)


def task_lock(*, task_id: int) -> Task:
    return Task.objects.select_for_update().get(pk=task_id)
