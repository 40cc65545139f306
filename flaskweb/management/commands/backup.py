"""python manage.py backup — one archive of the database, the media files and the secret key
the app made, consistent while the app serves (docs/SERVING.md "Backups and restores").

SQLite is copied with SQLite's online backup API, PostgreSQL with pg_dump -Fc on an exported
snapshot; the manifest (counts and a checksum of the scores) is read from the same snapshot.
The work is in flaskweb/backup.py.
"""

from __future__ import annotations

import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from flaskweb.backup import (
    BackupError,
    Database,
    backup_check,
    backup_create,
    default_output,
    secret_key_file,
    size_text,
)


class Command(BaseCommand):
    help = (
        "Back up the database (a consistent copy while the app serves), the media files and "
        "the secret key the app made into one archive with a manifest (docs/SERVING.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--output",
            "-o",
            help="the archive to write, or - for standard output (default: "
            "var/backups/flaskweb-backup-<UTC time>.tar); an existing file is never "
            "overwritten",
        )
        parser.add_argument(
            "--verify",
            action="store_true",
            help="read the archive back and check it, as restore --check does",
        )
        parser.add_argument(
            "--quiet", action="store_true", help="print nothing but errors (for cron)"
        )

    def handle(self, *args, **opts):
        to_stdout = opts["output"] == "-"
        if to_stdout and opts["verify"]:
            raise CommandError("--verify reads the archive back: give --output a file name.")
        # with the archive on standard output, messages go to standard error
        out = self.stderr if to_stdout else self.stdout
        quiet = opts["quiet"] or opts["verbosity"] == 0

        def say(message: str) -> None:
            if not quiet:
                out.write(message)

        var_dir = Path(settings.VAR_DIR)
        if to_stdout:
            output = None
        elif opts["output"]:
            output = Path(opts["output"]).absolute()
        else:
            output = default_output(var_dir / "backups", datetime.now(UTC))
        try:
            database = Database.from_settings(connections["default"].settings_dict)
            key_path, key_note = secret_key_file(var_dir)
            result = backup_create(
                database=database,
                media_root=Path(settings.MEDIA_ROOT),
                secret_key_path=key_path,
                output=output,
                stream=sys.stdout.buffer if to_stdout else None,
                say=say,
            )
            say(key_note)
            manifest = result.manifest
            say(
                f"Wrote {result.output}: {size_text(result.bytes)} in {result.seconds:.1f} s "
                f"({len(manifest['counts'])} tables, "
                f"{sum(manifest['counts'].values()):,} rows, "
                f"{manifest['media']['files']:,} media files)."
            )
            if opts["verify"] and output is not None:
                check = backup_check(archive=output, say=say)
                say(f"Checked the archive in {check.seconds:.1f} s: it restores.")
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        except (OSError, sqlite3.Error, psycopg.Error) as exc:
            # a full disk, a lost connection: said in one line, not a traceback
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
