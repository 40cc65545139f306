"""Print a project's analytics report (the same JSON as the API)."""

import json

from django.core.management.base import BaseCommand, CommandError

from analytics.report.selectors import DEFAULT_RESAMPLES, MAX_RESAMPLES, project_report
from annotation.selectors import project_get_by_slug


class Command(BaseCommand):
    help = "Agreement among annotators and human-judge correlation per skill, as JSON."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--format", choices=["json"], default="json")
        parser.add_argument("--skill", action="append", help="only this skill (repeatable)")
        parser.add_argument("--judge", action="append", help="only this judge (repeatable)")
        parser.add_argument("--system", action="append", help="only this model (repeatable)")
        parser.add_argument("--domain", action="append", help="only this domain (repeatable)")
        parser.add_argument("--difficulty", action="append", type=int, choices=range(1, 6))
        parser.add_argument(
            "--no-breakdowns",
            action="store_true",
            help="leave out the per domain/difficulty/system reports",
        )
        parser.add_argument(
            "--resamples",
            type=int,
            default=DEFAULT_RESAMPLES,
            help="bootstrap resamples for the intervals (0: none)",
        )

    def handle(self, *args, **options):
        project = project_get_by_slug(slug=options["project"])
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        if not 0 <= options["resamples"] <= MAX_RESAMPLES:
            raise CommandError(f"--resamples must be 0 to {MAX_RESAMPLES}")
        report = project_report(
            project=project,
            skills=options["skill"],
            judges=options["judge"],
            resamples=options["resamples"],
            systems=options["system"],
            domains=options["domain"],
            difficulties=options["difficulty"],
            with_breakdowns=not options["no_breakdowns"],
        )
        self.stdout.write(json.dumps(report, indent=2, sort_keys=False))
