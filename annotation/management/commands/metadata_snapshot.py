"""python manage.py metadata_snapshot --project SLUG --dataset NAME"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Dataset
from annotation.services.metadata import metadata_dataset_snapshot


class Command(BaseCommand):
    help = (
        "Record each item's current metadata (domains, ranked skills, difficulty) as its "
        '"dataset" proposal, e.g. the model-made metadata the FLASK release comes with, so '
        "its agreement with what people verify is shown. Items that already hold one keep it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--dataset", required=True, help="dataset name")

    def handle(self, *args, **options):
        dataset = Dataset.objects.filter(
            project__slug=options["project"], name=options["dataset"]
        ).first()
        if dataset is None:
            raise CommandError(
                f"project {options['project']!r} has no dataset {options['dataset']!r}"
            )
        recorded = metadata_dataset_snapshot(dataset=dataset)
        self.stdout.write(f"{recorded} items' own metadata recorded as dataset proposals")
