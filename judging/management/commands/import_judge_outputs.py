"""python manage.py import_judge_outputs FILE [FILE ...] --project SLUG --dataset NAME ..."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project
from annotation.selectors import dataset_list_for_project
from judging.output_imports.services import (
    FLASK_REVIEW,
    FORMATS,
    JudgeOutputImportRejected,
    JudgeOutputImportResult,
    judge_outputs_import,
)


class Command(BaseCommand):
    help = (
        "Import judge outputs made elsewhere (FLASK review files, or long tables with one "
        "score a row) into a dataset as named judges. Everything is checked first: on any "
        "problem every problem is printed, nothing is written and the exit status is 2. "
        "Importing the same bytes again as the same judge writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--dataset", required=True, help="name of the project's dataset")
        parser.add_argument(
            "--judge",
            default="",
            help="judge name (required for flask-review); for long tables, import only this "
            "rater's rows (default: every rater becomes a judge)",
        )
        parser.add_argument(
            "--format", choices=FORMATS, default="", help="skip detection from the content"
        )
        parser.add_argument(
            "--model",
            default="",
            help=f"{FLASK_REVIEW} only: the judged model of lines without model_id (default: "
            "the file name without _review, e.g. chatgpt_review.jsonl -> chatgpt)",
        )

    def handle(self, *args, **opts):
        paths = [Path(f) for f in opts["files"]]
        for path in paths:
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"project {opts['project']!r} does not exist")
        dataset = dataset_list_for_project(project=project).filter(name=opts["dataset"]).first()
        if dataset is None:
            raise CommandError(f"project {project.slug!r} has no dataset {opts['dataset']!r}")
        try:
            with ExitStack() as stack:  # read as streams, in process: memory stays flat
                result = judge_outputs_import(
                    project=project,
                    dataset=dataset,
                    files=[(path.name, stack.enter_context(path.open("rb"))) for path in paths],
                    fmt=opts["format"],
                    judge_name=opts["judge"],
                    model=opts["model"],
                    problem_limit=None,  # every problem is printed
                )
        except JudgeOutputImportRejected as exc:
            for problem in exc.problems:
                self.stderr.write(str(problem))
            self.stderr.write(f"rejected: {exc}")
            sys.exit(2)
        self._report(project, dataset, result)

    def _report(self, project, dataset, result: JudgeOutputImportResult) -> None:
        out = self.stdout
        out.write(
            f"judge outputs into {project.slug}/{dataset.name} ({result.format}, "
            f"input sha256 {result.input_sha256[:12]}):"
        )
        for imported in result.runs:
            run = imported.run
            if imported.already_imported:
                out.write(
                    f"  judge {run.judge.name!r}: already imported as run {run.pk}; nothing written"
                )
                continue
            out.write(
                f"  judge {run.judge.name!r}: run {run.pk}, {imported.judgments} judgments "
                f"({run.done} scored, {run.parse_failed} without readable scores), "
                f"{imported.scores} scores"
            )
        if result.human_rows:
            out.write(f"  human rows ignored: {result.human_rows}")
        if result.other_rater_rows:
            out.write(f"  rows of other raters ignored: {result.other_rater_rows}")
