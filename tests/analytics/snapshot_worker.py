"""What the analytics worker does, for tests without a worker process: compute every
pending report snapshot, as `report_snapshot_compute_task` would, between two requests."""

from __future__ import annotations

from analytics.models import ReportSnapshot, SnapshotStatus
from analytics.report.snapshots import report_snapshot_compute


def compute_pending() -> list[ReportSnapshot]:
    """Compute the pending snapshots, oldest first; returns them as they ended."""
    done = []
    for pk in (
        ReportSnapshot.objects.filter(status=SnapshotStatus.PENDING)
        .order_by("pk")
        .values_list("pk", flat=True)
    ):
        found = report_snapshot_compute(snapshot_id=pk)
        if found is not None:
            done.append(found)
    return done


def report_via_api(client, url: str, params=None) -> dict:
    """The API's report for `params`: asked (202), computed by the "worker", served (200).
    Returns the body without its "snapshot" key (what `analytics_report` prints)."""
    first = client.get(url, params or {})
    if first.status_code == 202:
        assert first.json()["snapshot"]["status"] in ("pending", "running")
        compute_pending()
        first = client.get(url, params or {})
    assert first.status_code == 200, first.content[:500]
    body = first.json()
    assert body.pop("snapshot")["status"] == "done"
    return body
