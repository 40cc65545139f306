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
            "--compare",
            nargs=2,
            action="append",
            metavar=("A", "B"),
            help="also compare these two judges on every skill (repeatable); by default each"
            " judge is compared with the skill's best",
        )
        parser.add_argument(
            "--compare-all",
            action="store_true",
            help="compare every two judges (slow with many judges)",
        )
        parser.add_argument(
            "--human",
            choices=["raw", "adjudicated"],
            default="raw",
            help="raw: the annotators' own scores (default); adjudicated: a reviewer's "
            "adjudicated score in place of them where there is one",
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
            compare=[(a, b) for a, b in options["compare"] or []],
            compare_all=options["compare_all"],
            human_scores=options["human"],
        )
        unknown = sorted(
            {name for pair in options["compare"] or [] for name in pair}
            - set(report["correlation"])
        )
        if unknown:
            self.stderr.write(f"no judge named {', '.join(map(repr, unknown))}: not compared")
        self.stdout.write(json.dumps(report, indent=2, sort_keys=False))
