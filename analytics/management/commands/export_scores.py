"""Export a project's scores to a file or standard output (docs/EXPORTS.md): the same
writer as the export jobs, run here and now."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analytics.exports.services import (
    BINARY_FORMATS,
    ExportOptionsError,
    export_options_clean,
    export_write,
)
from analytics.exports.training import TRAINING_KIND
from analytics.models import ExportFormat, ExportKind, RaterKind
from annotation.selectors import project_get_by_slug


class Command(BaseCommand):
    help = (
        "Export a project's scores: a long table, a wide table, a judge's FLASK reviews, "
        "people's judgments as judge-training tasks, or a Hugging Face datasets layout."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--kind", required=True, choices=ExportKind.values)
        parser.add_argument(
            "--format",
            choices=ExportFormat.values,
            default="",
            help="long, preferences: csv (default), jsonl or parquet; wide: csv or parquet; "
            "flask_review: jsonl or parquet; hf_dataset: zip (Parquet and a dataset card); "
            "parquet and zip need --output",
        )
        parser.add_argument(
            "--judge",
            action="append",
            default=[],
            help="narrow the judges (repeatable); flask_review: the judge",
        )
        parser.add_argument(
            "--skill", action="append", default=[], help="only this skill (repeatable)"
        )
        parser.add_argument("--rater-kind", choices=RaterKind.values, default="")
        parser.add_argument("--campaign", default="", help="a campaign's name")
        parser.add_argument("--dataset", default="", help="a dataset's name")
        parser.add_argument(
            "--system", action="append", default=[], help="only this model (repeatable)"
        )
        parser.add_argument("--run", type=int, help="a judge run id (long, flask_review)")
        parser.add_argument(
            "--training",
            default="",
            help="judge_training options as a JSON object, e.g. "
            '\'{"unit": "item", "pairwise": true}\'',
        )
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def handle(self, *args, **options):
        project = project_get_by_slug(slug=options["project"])
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        filters = {
            "skill": options["skill"],
            "rater_kind": options["rater_kind"],
            "judge": options["judge"],
            "campaign": options["campaign"],
            "dataset": options["dataset"],
            "system": options["system"],
            "run": options["run"],
        }
        if options["kind"] == TRAINING_KIND:
            try:
                filters["training"] = json.loads(options["training"] or "{}")
            except ValueError as exc:
                raise CommandError(f"--training is not JSON: {exc}") from None
        elif options["training"]:
            raise CommandError(f"--training is for --kind {TRAINING_KIND}")
        try:
            export = export_options_clean(
                project=project, kind=options["kind"], fmt=options["format"], filters=filters
            )
        except ExportOptionsError as exc:
            raise CommandError(str(exc)) from None
        output = options["output"]
        if not output and export.fmt in BINARY_FORMATS:
            raise CommandError(f"a {export.fmt} export is binary: write it to a file with --output")
        if not output:
            self.stdout.flush()
            rows = export_write(export, _stdout_bytes(self.stdout))
            self.stdout.flush()
        else:
            rows = _write_file(export, Path(output))
        where = output or "standard output"
        self.stderr.write(f"{rows} rows written to {where}")


def _stdout_bytes(stdout):
    """The process's standard output as bytes; a text stream (call_command's) adapted."""
    buffer = getattr(stdout, "buffer", None)
    return buffer if buffer is not None else _TextAdapter(stdout)


class _TextAdapter:
    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        self.stream.write(data.decode("utf-8"), ending="")


def _write_file(export, path: Path) -> int:
    """Written next to the target and renamed into place: a reader never sees half a file."""
    path = path.resolve()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            rows = export_write(export, out)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return rows
