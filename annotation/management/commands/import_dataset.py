"""python manage.py import_dataset FILE [FILE ...] --project SLUG [--dataset NAME] ..."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.datasets.services import (
    POLICY_PRESETS,
    FileSpec,
    ImportOptionsError,
    dataset_import,
    dataset_upload_create,
    policies_parse,
)
from annotation.models import Project, UploadSource, UploadStatus
from annotation.parsers import FORMATS, PROBLEM_CLASSES
from annotation.services.projects import project_get_or_create

EPILOG = "problem classes (CLASS: allowed actions):\n" + "\n".join(
    f"  {code}: {', '.join(actions)}" + (f"  (accept = {meaning})" if meaning else "")
    for code, (actions, meaning) in PROBLEM_CLASSES.items()
)


class Command(BaseCommand):
    help = (
        "Import dataset files (FLASK evaluation set, FLASK model outputs, generic JSONL/CSV) "
        "into a project's dataset. Atomic: on rejection nothing is written and the exit "
        "status is 2."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = EPILOG
        from argparse import RawDescriptionHelpFormatter

        parser.formatter_class = RawDescriptionHelpFormatter
        return parser

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument(
            "--create-project", action="store_true", help="create the project if missing"
        )
        parser.add_argument("--dataset", help="dataset name (default: the first file's stem)")
        parser.add_argument("--format", choices=FORMATS, help="skip format detection")
        parser.add_argument(
            "--model",
            action="append",
            default=[],
            metavar="[FILE=]NAME",
            help="model name for a model-output file (default: the file name without suffix)",
        )
        parser.add_argument(
            "--on",
            action="append",
            default=[],
            metavar="CLASS=ACTION",
            help="what to do with a problem class: reject (default), skip or accept; "
            "CLASS may be 'all'",
        )
        parser.add_argument(
            "--preset",
            choices=list(POLICY_PRESETS),
            default="",
            help="starting policies: "
            + "; ".join(f"{k}: {v[0]}" for k, v in POLICY_PRESETS.items())
            + " (--on overrides)",
        )
        parser.add_argument("--quiet-problems", action="store_true", help="print counts only")

    def handle(self, *args, **opts):
        paths = [Path(f) for f in opts["files"]]
        for path in paths:
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        try:
            policies = policies_parse(opts["on"], preset=opts["preset"])
        except ImportOptionsError as exc:
            raise CommandError(str(exc)) from None
        models = self._models(opts["model"], paths)
        if opts["create_project"]:
            project, _ = project_get_or_create(slug=opts["project"])
        else:
            project = Project.objects.filter(slug=opts["project"]).first()
            if project is None:
                raise CommandError(
                    f"project {opts['project']!r} does not exist (add --create-project)"
                )
        dataset_name = opts["dataset"] or paths[0].stem
        specs = [
            (FileSpec(path.name, opts["format"] or "", models.get(path.name, "")), str(path))
            for path in paths
        ]
        try:
            upload = dataset_upload_create(
                project=project,
                dataset_name=dataset_name,
                source=UploadSource.CLI,
                files=specs,
                policies=policies,
            )
        except ImportOptionsError as exc:
            raise CommandError(str(exc)) from None
        quiet = opts["quiet_problems"]

        def on_problem(problem, action):
            if not quiet:
                self.stderr.write(f"{action.upper():6} {problem}")

        upload = dataset_import(upload_id=upload.pk, on_problem=on_problem)
        self._report(upload)
        if upload.status == UploadStatus.REJECTED:
            sys.exit(2)
        if upload.status == UploadStatus.FAILED:
            sys.exit(1)

    def _models(self, values: list[str], paths: list[Path]) -> dict[str, str]:
        result: dict[str, str] = {}
        for value in values:
            if "=" in value:
                file_name, name = value.split("=", 1)
                result[Path(file_name).name] = name
            elif len(paths) == 1:
                result[paths[0].name] = value
            else:
                raise CommandError("with several files, name the file: --model FILE=NAME")
        return result

    def _report(self, upload):
        s = upload.summary
        out = self.stdout
        out.write(
            f"import #{upload.pk} into {upload.project.slug}/{upload.dataset_name}: "
            f"{upload.status.upper()}"
        )
        for f in s.get("files", []):
            model = f" model={f['model']}" if f.get("model") else ""
            out.write(
                f"  {f['name']} [{f.get('format', '?')}{model}]: "
                f"{f['items']} item rows, {f['responses']} response rows"
            )
        if upload.status == UploadStatus.SUCCEEDED:
            out.write(
                f"  items: {upload.items_created} new, {upload.items_unchanged} unchanged; "
                f"responses: {upload.responses_created} new, "
                f"{upload.responses_unchanged} unchanged; rows skipped: {upload.rows_skipped}"
            )
            for m in s.get("models", []):
                missing = m["items_without_response"]
                out.write(
                    f"  {m['model']}: {m['responses']} responses"
                    + (f", {missing} items without a response" if missing else "")
                )
        problems = s.get("problems", {})
        if problems:
            out.write(
                f"  problems: {upload.problem_count} "
                + ", ".join(f"{k}={v}" for k, v in sorted(problems.items()))
            )
        if upload.status == UploadStatus.REJECTED:
            out.write(
                "  rejected: nothing was written. Fix the file, or choose per class "
                "with --on CLASS=skip|accept (see --help)."
            )
        if upload.error:
            out.write(f"  error: {upload.error}")
