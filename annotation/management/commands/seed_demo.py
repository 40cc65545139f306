"""python manage.py seed_demo — demo users, a demo project and the demo dataset (idempotent)."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from annotation.models import Project, ProjectRole, UploadSource
from annotation.services.catalogue import catalogue_sync_builtins
from annotation.services.imports import FileSpec, dataset_import, dataset_upload_create
from annotation.services.projects import membership_set, project_get_or_create

DEMO_FILE = Path(__file__).resolve().parents[2] / "demo" / "demo_dataset.jsonl"
# Demo-only logins, printed on start; never use these outside a local demo.
DEMO_USERS = [
    ("admin", "admin-demo", ProjectRole.ADMIN, True),
    ("researcher", "researcher-demo", ProjectRole.RESEARCHER, False),
    ("annotator1", "annotator1-demo", ProjectRole.ANNOTATOR, False),
    ("annotator2", "annotator2-demo", ProjectRole.ANNOTATOR, False),
    ("annotator3", "annotator3-demo", ProjectRole.ANNOTATOR, False),
]


class Command(BaseCommand):
    help = "Create demo users, the demo project and import the demo dataset (idempotent)."

    def handle(self, *args, **options):
        catalogue_sync_builtins()
        project, _ = project_get_or_create(slug="demo", name="Demo: everyday assistant tasks")
        if not project.description:
            Project.objects.filter(pk=project.pk).update(
                description="Sixteen instructions of our own writing, each answered by four "
                "fictional systems, to try the whole FLASK loop offline."
            )
        User = get_user_model()
        for username, password, role, is_admin in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.is_staff = user.is_superuser = is_admin
                user.email = f"{username}@demo.invalid"
                user.save()
            membership_set(project=project, user=user, role=role)
        if not project.datasets.filter(name="Demo set").exists():
            upload = dataset_upload_create(
                project=project, dataset_name="Demo set", source=UploadSource.CLI,
                files=[(FileSpec(DEMO_FILE.name), str(DEMO_FILE))],
            )  # fmt: skip
            upload = dataset_import(upload_id=upload.pk)
            self.stdout.write(
                f"demo dataset: {upload.status}, {upload.items_created} items, "
                f"{upload.responses_created} responses"
            )
        self.stdout.write("Demo logins (local demo only):")
        for username, password, role, _ in DEMO_USERS:
            self.stdout.write(f"  {username:<11} / {password:<16} ({role})")
