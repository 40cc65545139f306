"""python manage.py import_preferences FILE --project SLUG [--dataset NAME] [--format csv|jsonl]"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analytics.imports.preferences import PreferenceImportRejected, preferences_import
from annotation.selectors import project_get_by_slug


class Command(BaseCommand):
    help = (
        "Import preference labels in long format (CSV or JSONL, one row per label: item, "
        "model_a, model_b, rater, choice, and optionally dataset, campaign, shown_order, "
        "skill, strength, rationale, time_on_task_ms), as the preference export writes them. "
        "Everything is checked first: on any problem every problem is printed, nothing is "
        "written and the exit status is 2. The same bytes imported again write nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", metavar="FILE")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument(
            "--dataset", default="", help="the dataset of rows whose dataset column is empty"
        )
        parser.add_argument(
            "--format", choices=["csv", "jsonl"], default="", help="default: from the suffix"
        )

    def handle(self, *args, **opts):
        path = Path(opts["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        project = project_get_by_slug(slug=opts["project"])
        if project is None:
            raise CommandError(f"no project {opts['project']!r}")
        try:
            with path.open("rb") as stream:
                result = preferences_import(
                    project=project,
                    data=stream,
                    name=path.name,
                    fmt=opts["format"],
                    dataset=opts["dataset"],
                )
        except PreferenceImportRejected as exc:
            for line in exc.lines:
                self.stderr.write(line)
            self.stderr.write(f"rejected: {exc}; nothing was written")
            sys.exit(2)
        batch = result.batch
        if result.already_imported:
            self.stdout.write(
                f"already imported: these bytes are preference import {batch.pk}; "
                "nothing was written"
            )
            return
        self.stdout.write(
            f"preference import {batch.pk} into {project.slug}: {batch.rows_read} rows, "
            f"{batch.labels_created} new labels, {batch.labels_unchanged} already stored"
        )
