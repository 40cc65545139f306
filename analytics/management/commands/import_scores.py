"""python manage.py import_scores FILE [FILE ...] --project SLUG [--dataset NAME] ..."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analytics.imports.services import (
    DEFAULT_DATASET,
    ImportResult,
    ScoreImportRejected,
    scores_import,
)


class Command(BaseCommand):
    help = (
        "Import scores in long format (CSV or JSONL, one row per score: item, system, rater, "
        "rater_kind, skill, score) for agreement and human-judge analyses. Missing items, "
        "responses and skills are created. Everything is checked first: on any problem every "
        "problem is printed, nothing is written and the exit status is 2. The same bytes "
        "imported into the same project again write nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument(
            "--create-project", action="store_true", help="create the project if it is missing"
        )
        parser.add_argument(
            "--dataset",
            default=DEFAULT_DATASET,
            help=f"the dataset whose items the rows score (default: {DEFAULT_DATASET!r}; "
            "created if missing)",
        )
        parser.add_argument(
            "--scale",
            action="append",
            default=[],
            metavar="SKILL=MIN:MAX[:continuous]",
            help="the scale of a skill (SKILL '*' = every skill); default: integers 1 to 5",
        )
        parser.add_argument(
            "--judge-scale",
            choices=["skill", "raw"],
            default="skill",
            help="raw: judge rows may hold any finite number (a metric's own value); "
            "skill (default): judge rows follow the skill's scale like human rows",
        )

    def handle(self, *args, **opts):
        paths = [Path(f) for f in opts["files"]]
        for path in paths:
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        try:
            with ExitStack() as stack:
                files = [(p.name, stack.enter_context(p.open("rb"))) for p in paths]
                result = scores_import(
                    project_slug=opts["project"],
                    files=files,
                    dataset_name=opts["dataset"],
                    scales=opts["scale"],
                    judge_scale_raw=opts["judge_scale"] == "raw",
                    create_project=opts["create_project"],
                    problem_limit=None,  # every problem is printed
                )
        except ScoreImportRejected as exc:
            for problem in exc.problems:
                self.stderr.write(str(problem))
            self.stderr.write(f"rejected: {exc}")
            sys.exit(2)
        self._report(result)

    def _report(self, result: ImportResult) -> None:
        out, batch = self.stdout, result.batch
        if result.project_created:
            out.write(f"created project {batch.project.slug!r}")
        if result.already_imported:
            out.write(
                f"already imported: these bytes are score import {batch.pk} of "
                f"{batch.created_at:%Y-%m-%d %H:%M}; nothing was written"
            )
            return
        s = batch.summary
        out.write(
            f"score import {batch.pk} into {batch.project.slug}/{batch.dataset.name} "
            f"(input sha256 {batch.input_sha256[:12]}):"
        )
        for f in batch.files:
            out.write(f"  {f['name']} [{f['format']}]: {f['rows']} rows")
        out.write(
            f"  scores: {batch.scores_created} new "
            f"({s['scores']['human']} human, {s['scores']['judge']} judge; "
            f"{s['na']['human'] + s['na']['judge']} N/A), "
            f"{batch.scores_unchanged} already stored with the same value"
        )
        out.write(f"  raters: {s['raters']['human']} human, {s['raters']['judge']} judge")
        created = [
            f"dataset {batch.dataset.name!r}" if result.dataset_created else "",
            f"{batch.items_created} items" if batch.items_created else "",
            f"{batch.responses_created} responses" if batch.responses_created else "",
            f"skills {', '.join(result.skills_created)}" if result.skills_created else "",
        ]
        if any(created):
            out.write(f"  created: {', '.join(c for c in created if c)}")
        if s.get("texts_filled"):
            out.write(f"  empty stored texts filled in: {s['texts_filled']}")
        scales = batch.scales
        for name, scale in scales["skills"].items():
            kind = "continuous" if scale["continuous"] else "integers"
            out.write(f"  scale of {name}: {scale['low']:g} to {scale['high']:g} ({kind})")
        if scales["judge_scale"] == "raw":
            out.write("  judge rows: raw values, not checked against the scales")
