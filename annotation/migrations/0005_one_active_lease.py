from django.conf import settings
from django.db import migrations, models
from django.db.models import Count, F


def expire_extra_leases(apps, schema_editor):
    """Before the constraint: where an annotator holds several active leases in a campaign
    (possible only from a race the old advisory lock did not cover), keep the newest and
    expire the others, freeing their slots as lease expiry does."""
    Assignment = apps.get_model("annotation", "Assignment")
    Task = apps.get_model("annotation", "Task")
    doubled = (
        Assignment.objects.filter(status="active")
        .values("campaign_id", "annotator_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    for pair in doubled:
        leases = Assignment.objects.filter(
            status="active", campaign_id=pair["campaign_id"], annotator_id=pair["annotator_id"]
        ).order_by("-id")
        for lease in list(leases.select_related("task"))[1:]:
            Assignment.objects.filter(pk=lease.pk).update(status="expired")
            if lease.kind == "normal" and lease.task.kind == "normal":
                Task.objects.filter(pk=lease.task_id).update(assigned=F("assigned") - 1)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0004_campaigns"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # elidable: it only fixes rows that exist before it; a fresh database has none, so the
        # squashed migration (annotation 0001_squashed_0014) leaves it out.
        migrations.RunPython(expire_extra_leases, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name="assignment",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "active")),
                fields=("campaign", "annotator"),
                name="assignment_one_active_lease",
            ),
        ),
    ]
