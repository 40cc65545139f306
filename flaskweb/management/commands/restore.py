"""python manage.py restore ARCHIVE — put a backup made by `manage.py backup` back: the
database (into an empty one, or --force), the media files and the secret key, then compare
the restored database with the archive's manifest (row counts, scores checksum) and fail on
any difference. `--check` checks an archive without restoring it (docs/SERVING.md
"Backups and restores"). The work is in flaskweb/backup.py.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from flaskweb.backup import (
    BackupError,
    Database,
    backup_check,
    backup_restore,
    secret_key_file,
    size_text,
    vendor_name,
)


class Command(BaseCommand):
    help = (
        "Restore a backup archive (database, media files, secret key) into this install and "
        "verify it against the archive's manifest; --check only checks the archive."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "archive", help="the archive manage.py backup wrote, or - to read standard input"
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="check the archive without restoring: manifest intact, every member "
            "matches it, the database dump readable",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="restore into a database that is not empty: lists, then drops, every table "
            "in it (in the restore's one transaction); media files of the same name are "
            "replaced",
        )
        parser.add_argument(
            "--quiet", action="store_true", help="print nothing but errors (for cron)"
        )

    def handle(self, *args, **opts):
        quiet = opts["quiet"] or opts["verbosity"] == 0

        def say(message: str) -> None:
            if not quiet:
                self.stdout.write(message)

        spooled = None
        try:
            with contextlib.ExitStack() as stack:
                if opts["archive"] == "-":
                    spooled = stack.enter_context(
                        tempfile.NamedTemporaryFile(prefix="flaskweb-restore-", suffix=".tar")
                    )
                    shutil.copyfileobj(sys.stdin.buffer, spooled, 1024 * 1024)
                    spooled.flush()
                    archive = Path(spooled.name)
                else:
                    archive = Path(opts["archive"]).absolute()
                    if not archive.is_file():
                        raise CommandError(f"There is no file {archive}.")
                if opts["check"]:
                    self._check(archive, "standard input" if spooled else str(archive), say=say)
                else:
                    self._restore(archive, force=opts["force"], say=say)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        except (OSError, sqlite3.Error, psycopg.Error) as exc:
            # a full disk, a lost connection: said in one line, not a traceback
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc

    def _check(self, archive: Path, label: str, *, say) -> None:
        result = backup_check(archive=archive, say=say)
        manifest = result.manifest
        say(
            f"{label} is sound ({size_text(archive.stat().st_size)}, checked in "
            f"{result.seconds:.1f} s): taken {manifest['created_at']} by flaskweb "
            f"{manifest['app_version']} from a {vendor_name(manifest['database']['vendor'])} "
            f"database, {manifest['media']['files']:,} media files, secret key "
            f"{'included' if manifest.get('secret_key') else 'not included'}."
        )

    def _restore(self, archive: Path, *, force: bool, say) -> None:
        database = Database.from_settings(connections["default"].settings_dict)
        connections.close_all()
        var_dir = Path(settings.VAR_DIR)
        key_path, _ = secret_key_file(var_dir)
        result = backup_restore(
            archive=archive,
            database=database,
            media_root=Path(settings.MEDIA_ROOT),
            secret_key_path=key_path,
            force=force,
            say=say,
        )
        for note in result.notes:
            say(note)
        if result.differences:
            self.stderr.write(
                "The restored database does not match the backup's manifest:\n  "
                + "\n  ".join(result.differences)
            )
            raise CommandError(
                f"Verification failed: {len(result.differences)} difference(s) between "
                f"{database.describe()} and {archive}. Do not use this restore; check the "
                "archive with restore --check and restore again."
            )
        say(
            f"Verified: the row counts of {len(result.manifest['counts'])} tables and the "
            f"scores checksum ({result.summary.scores_line()}) match the backup."
        )
        if result.pending_migrations:
            say(
                f"This release has {len(result.pending_migrations)} migration(s) the backup's "
                f"database has not had ({', '.join(result.pending_migrations[:3])}"
                f"{', …' if len(result.pending_migrations) > 3 else ''}): run "
                "`manage.py migrate` (serve runs it when it starts)."
            )
        say(f"Restore done in {result.seconds:.1f} s.")
