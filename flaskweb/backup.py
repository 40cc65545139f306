"""Backups and restores of a whole install: `manage.py backup` and `manage.py restore`
(docs/SERVING.md "Backups and restores").

A backup is one uncompressed tar file, written owner-only (0600), holding in this order:

- the database: `database.sqlite3.gz` (SQLite, gzipped) or `database.pgdump` (PostgreSQL,
  pg_dump's compressed custom format);
- `media/...`: every file under MEDIA_ROOT (uploaded datasets, finished exports);
- `secret_key`: only when the key in use is the one the app made in var/secret_key (a key
  given in the environment is the operator's to keep);
- `manifest.json`, last: the release and its latest migration per app, the database vendor,
  the row count of every table, a SHA-256 over the scores, and the size and SHA-256 of every
  other member. A truncated archive has no manifest.

Consistency. The database is copied as one snapshot taken while the app serves, and the
manifest's counts and checksums are read from that same snapshot, so a restore is verified
exactly:
- SQLite: the online backup API (`sqlite3.Connection.backup`) copies the live database in one
  step, which is one read transaction; in WAL mode writers go on meanwhile. The counts are
  read from the copy. Never a file copy: recent commits live in the -wal file.
- PostgreSQL: a REPEATABLE READ transaction exports its snapshot, `pg_dump --snapshot` dumps
  exactly that snapshot, and the counts are read inside the transaction while pg_dump runs.

A restore first reads the whole archive into a staging directory and checks it (manifest,
every member's SHA-256, vendor, release, an empty target), so a damaged archive or a refused
restore changes nothing; then it restores the database in one transaction, the media files
and the key, and compares the restored database with the manifest.

Nothing is held in memory whole: files go through in 1 MiB chunks, rows in batches.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import time
import tomllib
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

import psycopg
from django.apps import apps
from django.conf import settings
from django.db.migrations.loader import MigrationLoader
from django.db.models import Field
from psycopg.conninfo import make_conninfo

FORMAT = "flaskweb-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SECRET_KEY_MEMBER = "secret_key"
SQLITE_MEMBER = "database.sqlite3.gz"
PG_MEMBER = "database.pgdump"
MEDIA_PREFIX = "media/"
CHUNK = 1024 * 1024
ROWS_PER_FETCH = 20_000
# gzip level of the SQLite copy: on a million scores (273 MB) level 1 took 1.9 s for 6.5x,
# level 6 took 6.3 s for 6.9x (bench/README.md "Backup benchmark")
SQLITE_GZIP_LEVEL = 1

# What the scores checksum covers: per table, the columns that make a score what it is (not
# the rationale text or timings), one line per row ordered by primary key.
SCORE_TABLES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "human_scores",
        "annotation",
        "HumanScore",
        ("assignment", "response", "annotator", "skill", "score", "is_na"),
    ),
    (
        "human_preferences",
        "annotation",
        "HumanPreference",
        ("assignment", "response_a", "response_b", "skill", "choice", "strength"),
    ),
    (
        "judge_scores",
        "judging",
        "JudgeScore",
        ("judgment", "run", "response", "skill", "score", "is_na"),
    ),
    (
        "imported_scores",
        "analytics",
        "ImportedScore",
        ("batch", "response", "skill", "rater", "rater_kind", "value", "is_na"),
    ),
)

# Django OPTIONS that are libpq connection parameters, and the variable each is passed in to
# pg_dump, pg_restore and psql (nothing but the program's own flags goes on the command line).
LIBPQ_OPTIONS = {
    "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
    "sslcrl": "PGSSLCRL",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "options": "PGOPTIONS",
    "application_name": "PGAPPNAME",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
    "service": "PGSERVICE",
    "passfile": "PGPASSFILE",
}
PG_BIN_DIRS = "/usr/lib/postgresql/*/bin"

Say = Callable[[str], None]


class BackupError(Exception):
    """A backup, check or restore that cannot go on. The message says why and what to do;
    whatever it refused, it left as it was."""


# --- the database: where it is and how to reach it ---------------------------------------------


@dataclass(frozen=True)
class Database:
    """The database a backup reads or a restore writes: a SQLite file or a PostgreSQL
    database given by libpq parameters."""

    vendor: str  # "sqlite" or "postgresql"
    sqlite_path: Path | None = None
    pg: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings_dict: dict[str, Any]) -> Database:
        engine = settings_dict["ENGINE"]
        if engine.endswith("sqlite3"):
            name = str(settings_dict["NAME"])
            if name == ":memory:" or name.startswith("file:"):
                raise BackupError(f"The SQLite database {name!r} is not a file: nothing to copy.")
            return cls(vendor="sqlite", sqlite_path=Path(name).resolve())
        if "postgresql" in engine:
            params = {
                "dbname": settings_dict.get("NAME") or "",
                "user": settings_dict.get("USER") or "",
                "password": settings_dict.get("PASSWORD") or "",
                "host": settings_dict.get("HOST") or "",
                "port": str(settings_dict.get("PORT") or ""),
            }
            options = settings_dict.get("OPTIONS") or {}
            params.update({k: str(v) for k, v in options.items() if k in LIBPQ_OPTIONS})
            return cls(vendor="postgresql", pg={k: v for k, v in params.items() if v})
        raise BackupError(
            f"Backups cover SQLite and PostgreSQL; this install's database engine is {engine}."
        )

    def describe(self) -> str:
        if self.vendor == "sqlite":
            return f"the SQLite database {self.sqlite_path}"
        where = self.pg.get("host") or "the local socket"
        if self.pg.get("port"):
            where += f":{self.pg['port']}"
        return f"the PostgreSQL database {self.pg.get('dbname', '?')} on {where}"

    def pg_env(self) -> dict[str, str]:
        """The environment for pg_dump, pg_restore and psql: the connection, the password
        included, in libpq's variables (never on a command line, where `ps` shows it)."""
        env = dict(os.environ)
        names = {"dbname": "PGDATABASE", "user": "PGUSER", "password": "PGPASSWORD"}
        names |= {"host": "PGHOST", "port": "PGPORT"} | LIBPQ_OPTIONS
        env.update({names[key]: value for key, value in self.pg.items()})
        return env

    def pg_connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(make_conninfo(**self.pg))
        except psycopg.OperationalError as exc:
            raise BackupError(f"Cannot connect to {self.describe()}: {exc}".strip()) from exc


def vendor_name(vendor: str) -> str:
    return {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(vendor, vendor)


# --- reading a database: counts and the scores checksum ----------------------------------------


class _Reader(Protocol):
    def tables(self) -> set[str]: ...
    def count(self, table: str) -> int: ...
    def batches(self, sql: str) -> Iterator[list[tuple[Any, ...]]]: ...


class _SqliteReader:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def tables(self) -> set[str]:
        rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {name for (name,) in rows if not name.startswith("sqlite_")}

    def count(self, table: str) -> int:
        return int(self.conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])

    def batches(self, sql: str) -> Iterator[list[tuple[Any, ...]]]:
        cursor = self.conn.execute(sql)
        while rows := cursor.fetchmany(ROWS_PER_FETCH):
            yield rows


class _PgReader:
    """Reads in the connection's current transaction (the backup's exported snapshot)."""

    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn

    def tables(self) -> set[str]:
        rows = self.conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = ANY(current_schemas(false))"
        )
        return {name for (name,) in rows}

    def count(self, table: str) -> int:
        row = self.conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
        return int(row[0]) if row else 0

    def batches(self, sql: str) -> Iterator[list[tuple[Any, ...]]]:
        # a server-side cursor: a million rows never sit in this process at once
        with self.conn.cursor(name="flaskweb_backup_rows") as cursor:
            cursor.execute(sql)
            while rows := cursor.fetchmany(ROWS_PER_FETCH):
                yield rows


@dataclass
class Summary:
    """What the manifest records of a database, and what a restore compares."""

    counts: dict[str, int]
    scores: dict[str, dict[str, Any]]
    migrations: dict[str, str]
    applied: set[tuple[str, str]]
    seconds: float = 0.0
    taken_at: str = ""  # when the snapshot was taken (UTC, ISO 8601)

    def scores_line(self) -> str:
        return ", ".join(
            f"{self.scores[name]['rows']:,} {name.replace('_', ' ')}" for name in self.scores
        )


def _score_sql(app_label: str, model_name: str, fields: tuple[str, ...]) -> tuple[str, str]:
    """(table, SELECT of one text line per row ordered by pk), the same text on SQLite and
    PostgreSQL: integers as digits, booleans as 0/1, NULL as nothing."""
    meta = apps.get_model(app_label, model_name)._meta
    pk = meta.pk
    assert pk is not None
    parts = [f"CAST({pk.column} AS TEXT)"]
    for name in fields:
        model_field = meta.get_field(name)
        assert isinstance(model_field, Field)
        if model_field.get_internal_type() == "BooleanField":
            parts.append(f"CASE WHEN {model_field.column} THEN '1' ELSE '0' END")
        else:
            parts.append(f"COALESCE(CAST({model_field.column} AS TEXT), '')")
    line = " || '|' || ".join(parts)
    return meta.db_table, f"SELECT {line} FROM {meta.db_table} ORDER BY {pk.column}"


def model_tables() -> list[str]:
    """Every table the installed apps keep data in, and Django's migration record."""
    tables = {
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model._meta.managed and not model._meta.proxy
    }
    return sorted(tables | {"django_migrations"})


def _summarize(reader: _Reader, *, taken_at: str = "") -> Summary:
    started = time.monotonic()
    present = reader.tables()
    counts = {table: reader.count(table) for table in model_tables() if table in present}
    scores: dict[str, dict[str, Any]] = {}
    for name, app_label, model_name, fields in SCORE_TABLES:
        table, sql = _score_sql(app_label, model_name, fields)
        digest, rows = hashlib.sha256(), 0
        if table in present:
            for batch in reader.batches(sql):
                digest.update(("\n".join(row[0] for row in batch) + "\n").encode())
                rows += len(batch)
        scores[name] = {"rows": rows, "sha256": digest.hexdigest()}
    applied: set[tuple[str, str]] = set()
    if "django_migrations" in present:
        for batch in reader.batches("SELECT app, name FROM django_migrations"):
            applied.update((app, name) for app, name in batch)
    latest: dict[str, str] = {}
    for app, name in sorted(applied):
        latest[app] = name
    return Summary(counts, scores, latest, applied, time.monotonic() - started, taken_at)


@contextlib.contextmanager
def _reader_for(database: Database, *, sqlite_path: Path | None = None) -> Iterator[_Reader]:
    """A read-only reader whose every read sees the same moment (one read transaction)."""
    if database.vendor == "sqlite":
        path = sqlite_path or database.sqlite_path
        assert path is not None
        conn = _sqlite_read_only(path)
        try:
            conn.execute("BEGIN")
            yield _SqliteReader(conn)
        finally:
            conn.close()
    else:
        pg = database.pg_connect()
        pg.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        pg.read_only = True
        try:
            yield _PgReader(pg)
        finally:
            pg.close()


def _sqlite_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30, isolation_level=None
    )


def database_summary(database: Database) -> Summary:
    """The counts, scores checksum and migrations of a database as it is now."""
    with _reader_for(database) as reader:
        return _summarize(reader)


def summary_differences(manifest: dict[str, Any], summary: Summary) -> list[str]:
    """What differs between the manifest and a database's summary, one line each."""
    problems = []
    for table, expected in manifest["counts"].items():
        found = summary.counts.get(table)
        if found is None:
            problems.append(f"table {table}: missing (the backup has {expected:,} rows)")
        elif found != expected:
            problems.append(f"table {table}: {found:,} rows, the backup has {expected:,}")
    for name, expected in manifest["scores"].items():
        got = summary.scores.get(name, {"rows": 0, "sha256": ""})
        if got["rows"] != expected["rows"] or got["sha256"] != expected["sha256"]:
            problems.append(
                f"{name.replace('_', ' ')}: checksum {got['sha256'][:12]}… over "
                f"{got['rows']:,} rows, the backup has {expected['sha256'][:12]}… over "
                f"{expected['rows']:,}"
            )
    return problems


# --- migrations: which release a database belongs to ------------------------------------------


def _migration_loader() -> MigrationLoader:
    return MigrationLoader(None, ignore_no_migrations=True)


def migrations_unknown(latest: dict[str, str]) -> list[str]:
    """The backup's latest migrations this code does not have: the backup was taken by a
    newer release (or another branch)."""
    loader = _migration_loader()
    return [
        f"{app}.{name}"
        for app, name in sorted(latest.items())
        if app in loader.migrated_apps and (app, name) not in loader.disk_migrations
    ]


def migrations_pending(applied: set[tuple[str, str]]) -> list[str]:
    """This code's migrations that a database with `applied` has not had yet."""
    loader = _migration_loader()
    pending = []
    for key in sorted(loader.graph.nodes):
        replaced = loader.replacements.get(key)
        done = key in applied or (replaced and all(r in applied for r in replaced.replaces))
        if not done:
            pending.append(f"{key[0]}.{key[1]}")
    return pending


def app_version() -> str:
    try:
        with open(Path(settings.BASE_DIR) / "pyproject.toml", "rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


# --- PostgreSQL client programs ---------------------------------------------------------------


@dataclass(frozen=True)
class PgTool:
    path: str
    version: str  # "15.20"
    major: int


def _tool_version(path: str) -> PgTool | None:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?", out)
    if not found:
        return None
    major = int(found[1])
    version = f"{found[1]}.{found[2]}" if found[2] else found[1]
    return PgTool(path, version, major)


def pg_tool(name: str, *, at_least: int | None = None, why: str = "") -> PgTool:
    """The newest `name` (pg_dump, pg_restore, psql) on PATH or in /usr/lib/postgresql/*/bin,
    refused when it is missing or its major version is below `at_least`."""
    candidates = [shutil.which(name)] + sorted(glob.glob(f"{PG_BIN_DIRS}/{name}"))
    tools = [t for t in (_tool_version(p) for p in dict.fromkeys(candidates) if p) if t]
    if not tools:
        raise BackupError(
            f"{name} is not installed (looked on PATH and in {PG_BIN_DIRS}). It comes with "
            "PostgreSQL's client programs: on Debian or Ubuntu `apt install "
            "postgresql-client` (the same major version as the server or newer); the "
            "Docker image has it."
        )
    best = max(tools, key=lambda t: tuple(int(p) for p in t.version.split(".")))
    if at_least is not None and best.major < at_least:
        raise BackupError(
            f"{name} {best.version} ({best.path}) is older than {why or 'needed'} "
            f"(PostgreSQL {at_least}): install PostgreSQL {at_least}'s client programs "
            f"(Debian or Ubuntu: postgresql-client-{at_least}) and run again."
        )
    return best


def _pg_server_version(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    row = conn.execute(
        "SELECT current_setting('server_version_num')::int, current_setting('server_version')"
    ).fetchone()
    assert row is not None
    return int(row[0]) // 10000, str(row[1]).split()[0]


def _run_checked(argv: list[str], *, env: dict[str, str], what: str) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{what} failed (exit {done.returncode}): {_tail(done.stderr)}")
    return done.stdout


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no message)"


# --- archive writing ----------------------------------------------------------------------------


class _Hashing:
    """A file wrapper that hashes and counts what is read through it."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.sha256, self.bytes = raw, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.sha256.update(data)
        self.bytes += len(data)
        return data


def _add_member(
    tar: tarfile.TarFile, name: str, raw: IO[bytes], size: int, mtime: float
) -> dict[str, Any]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(mtime), 0o600
    reader = _Hashing(raw)
    try:
        tar.addfile(info, reader)  # type: ignore[arg-type]
    except OSError as exc:
        if "unexpected end of data" in str(exc):
            raise BackupError(
                f"{name} shrank while it was read (another process changed it): run the "
                "backup again."
            ) from exc
        raise
    return {"bytes": size, "sha256": reader.sha256.hexdigest()}


def _add_file(tar: tarfile.TarFile, name: str, path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        return _add_member(tar, name, handle, stat.st_size, stat.st_mtime)


def _media_files(media_root: Path, skip: set[Path]) -> Iterator[tuple[str, Path]]:
    """(relative posix path, path) of every regular file under media_root, sorted; the
    directories and files in `skip` (the backup's own staging and output) left out."""
    if not media_root.is_dir():
        return
    for directory, dirnames, filenames in os.walk(media_root):
        dirnames[:] = sorted(d for d in dirnames if (Path(directory) / d).resolve() not in skip)
        for filename in sorted(filenames):
            path = Path(directory) / filename
            if path.is_symlink() or not path.is_file() or path.resolve() in skip:
                continue
            yield path.relative_to(media_root).as_posix(), path


def _manifest_digest(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _make_work_dir(candidates: list[Path], prefix: str) -> Path:
    """A private staging directory on the first candidate that takes one (the same disk as
    the output or the target keeps moves cheap), else in the system's temporary directory."""
    for parent in candidates:
        try:
            return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        except OSError:
            continue
    return Path(tempfile.mkdtemp(prefix=prefix))


def default_output(backup_dir: Path, now: datetime) -> Path:
    return backup_dir / f"flaskweb-backup-{now.strftime('%Y%m%dT%H%M%SZ')}.tar"


@dataclass
class BackupResult:
    output: str
    bytes: int
    seconds: float
    manifest: dict[str, Any]


def secret_key_file(var_dir: Path) -> tuple[Path | None, str]:
    """(the key file to include or restore, a sentence saying where the key comes from).
    A file is included only when the key in use is the one the app made in var/secret_key;
    a key given in the environment (DJANGO_SECRET_KEY, DJANGO_SECRET_KEY_FILE) is left to the
    operator."""
    path = var_dir / "secret_key"
    for variable in ("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FILE"):
        if os.environ.get(variable):
            return None, (
                f"The secret key comes from {variable}: it is not in the backup. Keep it "
                "yourself with the backups: sessions, the study links' sign-ins and "
                "password-reset links depend on it."
            )
    try:
        made_by_app = path.read_text().strip() == settings.SECRET_KEY
    except OSError:
        made_by_app = False
    if made_by_app:
        return path, f"The secret key is the one the app made in {path}."
    return None, "The secret key in use is the development key (DJANGO_DEBUG): not backed up."


def backup_create(
    *,
    database: Database,
    media_root: Path,
    secret_key_path: Path | None,
    output: Path | None,
    stream: IO[bytes] | None = None,
    say: Say = lambda _: None,
) -> BackupResult:
    """Write one archive of the database (a consistent snapshot taken while the app serves),
    the media files and the app-made secret key to `output` (owner-only, under a temporary
    name until complete; an existing file is never overwritten) or to `stream`. Returns what
    it wrote; raises BackupError, leaving nothing behind, on failure."""
    started = time.monotonic()
    partial: Path | None = None
    if output is not None:
        if output.exists():
            raise BackupError(f"{output} already exists: choose another --output.")
        output.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = output.with_name(output.name + ".partial")
    work = _make_work_dir([output.parent] if output is not None else [], ".flaskweb-backup-")
    sink: IO[bytes] | None = None
    try:
        if database.vendor == "sqlite":
            dump, member, summary, db_info = _sqlite_snapshot(database, work, say)
        else:
            dump, member, summary, db_info = _pg_snapshot(database, work, say)
        if partial is not None:
            sink = os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")
        else:
            assert stream is not None
            sink = stream
        # a backup written inside MEDIA_ROOT is not backed up into itself
        skip = {work.resolve()}
        if output is not None and partial is not None:
            skip |= {partial.resolve(), output.parent.resolve()}
        manifest = _archive_write(
            sink,
            dump=dump,
            member=member,
            summary=summary,
            db_info=db_info,
            media_root=media_root,
            skip=skip,
            secret_key_path=secret_key_path,
            say=say,
        )
        if partial is not None and output is not None:
            sink.flush()
            os.fsync(sink.fileno())
            sink.close()
            os.replace(partial, output)
            size = output.stat().st_size
        else:
            sink.flush()
            size = sum(m["bytes"] for m in manifest["members"].values())
        return BackupResult(
            output=str(output) if output is not None else "-",
            bytes=size,
            seconds=time.monotonic() - started,
            manifest=manifest,
        )
    except BaseException:
        if partial is not None:
            if sink is not None:
                sink.close()
            with contextlib.suppress(OSError):
                partial.unlink()
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _archive_write(
    sink: IO[bytes],
    *,
    dump: Path,
    member: str,
    summary: Summary,
    db_info: dict[str, Any],
    media_root: Path,
    skip: set[Path],
    secret_key_path: Path | None,
    say: Say,
) -> dict[str, Any]:
    """The members in order (database, media, key) and the manifest last."""
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT, bufsize=CHUNK) as tar:
        members: dict[str, dict[str, Any]] = {member: _add_file(tar, member, dump)}
        dump.unlink()
        started, media_files, media_bytes = time.monotonic(), 0, 0
        for relative, path in _media_files(media_root, skip):
            name = MEDIA_PREFIX + relative
            members[name] = _add_file(tar, name, path)
            media_files += 1
            media_bytes += members[name]["bytes"]
        say(
            f"Media: {_plural(media_files, 'file')}, {_size(media_bytes)} from {media_root} "
            f"in {time.monotonic() - started:.1f} s."
        )
        if secret_key_path is not None:
            members[SECRET_KEY_MEMBER] = _add_file(tar, SECRET_KEY_MEMBER, secret_key_path)
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "created_at": summary.taken_at,
            "app_version": app_version(),
            "migrations": summary.migrations,
            "database": db_info,
            "counts": summary.counts,
            "scores": summary.scores,
            "media": {"files": media_files, "bytes": media_bytes},
            "secret_key": secret_key_path is not None,
            "members": members,
        }
        manifest["manifest_sha256"] = _manifest_digest(manifest)
        body = json.dumps(manifest, indent=1, sort_keys=True).encode()
        _add_member(tar, MANIFEST, io.BytesIO(body), len(body), time.time())
    return manifest


def _sqlite_snapshot(
    database: Database, work: Path, say: Say
) -> tuple[Path, str, Summary, dict[str, Any]]:
    source_path = database.sqlite_path
    assert source_path is not None
    if not source_path.is_file():
        raise BackupError(
            f"There is no database at {source_path}: nothing to back up (serve or migrate "
            "creates it)."
        )
    started, taken_at = time.monotonic(), _utc_now()
    copy = work / "database.sqlite3"
    source = sqlite3.connect(source_path, timeout=30)
    target = sqlite3.connect(copy)
    try:
        # one step (pages=-1) is one read transaction: a consistent snapshot, and in WAL mode
        # writers go on meanwhile. Step by step, every write of the app would restart it.
        source.backup(target)
        # the copy stands alone: no -wal file beside it
        target.execute("PRAGMA journal_mode=DELETE")
    finally:
        source.close()
        target.close()
    copied = time.monotonic() - started
    say(
        f"Copied {database.describe()} with SQLite's online backup API: "
        f"{_size(copy.stat().st_size)} in {copied:.1f} s."
    )
    with _reader_for(database, sqlite_path=copy) as reader:
        summary = _summarize(reader, taken_at=taken_at)
    say(
        f"Counted the rows and summed the scores ({summary.scores_line()}) "
        f"in {summary.seconds:.1f} s."
    )
    started = time.monotonic()
    packed = work / SQLITE_MEMBER
    with open(copy, "rb") as raw, gzip.open(packed, "wb", compresslevel=SQLITE_GZIP_LEVEL) as gz:
        shutil.copyfileobj(raw, gz, CHUNK)
    raw_bytes = copy.stat().st_size
    copy.unlink()
    say(
        f"Compressed the copy: {_size(raw_bytes)} to {_size(packed.stat().st_size)} "
        f"in {time.monotonic() - started:.1f} s."
    )
    info = {"vendor": "sqlite", "sqlite_version": sqlite3.sqlite_version, "bytes": raw_bytes}
    return packed, SQLITE_MEMBER, summary, info


def _pg_snapshot(
    database: Database, work: Path, say: Say
) -> tuple[Path, str, Summary, dict[str, Any]]:
    conn = database.pg_connect()
    try:
        server_major, server_version = _pg_server_version(conn)
        conn.rollback()
        tool = pg_tool("pg_dump", at_least=server_major, why="the server")
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        taken_at = _utc_now()
        row = conn.execute("SELECT pg_export_snapshot()").fetchone()
        assert row is not None
        dump = work / PG_MEMBER
        started = time.monotonic()
        with tempfile.TemporaryFile() as errors:
            # the snapshot stays valid while this transaction is open: pg_dump dumps exactly
            # what the counts below read, whatever the app writes meanwhile
            process = subprocess.Popen(
                [
                    tool.path,
                    "--format=custom",
                    f"--snapshot={row[0]}",
                    "--no-password",
                    "--lock-wait-timeout=60s",
                    f"--file={dump}",
                ],
                env=database.pg_env(),
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
            try:
                summary = _summarize(_PgReader(conn), taken_at=taken_at)
            finally:
                code = process.wait()
            errors.seek(0)
            message = errors.read().decode(errors="replace")
        if code != 0:
            raise BackupError(f"pg_dump failed (exit {code}): {_tail(message)}")
    finally:
        conn.close()
    say(
        f"Dumped {database.describe()} (PostgreSQL {server_version}) with pg_dump "
        f"{tool.version} -Fc: {_size(dump.stat().st_size)} in {time.monotonic() - started:.1f} s; "
        f"counted the rows and summed the scores ({summary.scores_line()}) from the same "
        f"snapshot in {summary.seconds:.1f} s."
    )
    info = {
        "vendor": "postgresql",
        "server_version": server_version,
        "pg_dump_version": tool.version,
        "pg_dump_major": tool.major,
    }
    return dump, PG_MEMBER, summary, info


# --- archive reading and checking --------------------------------------------------------------


@dataclass
class Staged:
    """An archive read into a staging directory and checked against its manifest."""

    manifest: dict[str, Any]
    work: Path
    dump: Path
    media: list[tuple[str, Path]]
    secret_key: Path | None

    @property
    def vendor(self) -> str:
        return str(self.manifest["database"]["vendor"])


def _member_path(name: str) -> str | None:
    """The member's kind, or None for a name a backup never holds."""
    if name in (MANIFEST, SECRET_KEY_MEMBER, SQLITE_MEMBER, PG_MEMBER):
        return name
    if name.startswith(MEDIA_PREFIX):
        parts = PurePosixPath(name[len(MEDIA_PREFIX) :]).parts
        if parts and not any(p in ("", ".", "..") for p in parts) and "\\" not in name:
            return MEDIA_PREFIX
    return None


def archive_stage(archive: Path, work: Path) -> Staged:
    """Read `archive` whole into `work`, hashing every member, and check it against its
    manifest (the manifest's own digest, every member's size and SHA-256, no member missing
    or added). Raises BackupError saying what is wrong; nothing outside `work` is touched."""
    read: dict[str, dict[str, Any]] = {}
    manifest_bytes: bytes | None = None
    media: list[tuple[str, Path]] = []
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for member in tar:
                kind = _member_path(member.name)
                if kind is None or not member.isreg() or member.name in read:
                    raise BackupError(
                        f"{archive} holds {member.name!r}, which a flaskweb backup never "
                        "holds: it is not a flaskweb backup (or it was changed). Nothing "
                        "was changed."
                    )
                source = tar.extractfile(member)
                assert source is not None
                if member.name == MANIFEST:
                    manifest_bytes = source.read()
                    read[MANIFEST] = {}
                    continue
                target = work / "members" / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                digest, size = hashlib.sha256(), 0
                with open(target, "wb") as out:
                    while chunk := source.read(CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
                read[member.name] = {"bytes": size, "sha256": digest.hexdigest()}
                if kind == MEDIA_PREFIX:
                    media.append((member.name[len(MEDIA_PREFIX) :], target))
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise BackupError(
            f"{archive} cannot be read as a backup archive ({exc}): it is truncated or "
            "damaged. Nothing was changed."
        ) from exc
    if manifest_bytes is None:
        raise BackupError(
            f"{archive} has no manifest: it is truncated (the manifest is written last) or "
            "not a flaskweb backup. Nothing was changed."
        )
    manifest = _manifest_parse(archive, manifest_bytes)
    expected = manifest["members"]
    problems = [f"{name}: missing" for name in sorted(set(expected) - set(read))]
    problems += [
        f"{name}: not in the manifest" for name in sorted(set(read) - set(expected) - {MANIFEST})
    ]
    for name in sorted(set(expected) & set(read)):
        if read[name] != expected[name]:
            problems.append(
                f"{name}: {read[name]['bytes']:,} bytes, SHA-256 {read[name]['sha256'][:12]}…; "
                f"the manifest says {expected[name]['bytes']:,} bytes, "
                f"{expected[name]['sha256'][:12]}…"
            )
    if problems:
        raise BackupError(
            f"{archive} is damaged, its members do not match its manifest:\n  "
            + "\n  ".join(problems)
            + "\nNothing was changed."
        )
    dump_member = SQLITE_MEMBER if manifest["database"]["vendor"] == "sqlite" else PG_MEMBER
    if dump_member not in read:
        raise BackupError(f"{archive} holds no database dump. Nothing was changed.")
    key = work / "members" / SECRET_KEY_MEMBER
    return Staged(
        manifest=manifest,
        work=work,
        dump=work / "members" / dump_member,
        media=media,
        secret_key=key if SECRET_KEY_MEMBER in read else None,
    )


def _manifest_parse(archive: Path, body: bytes) -> dict[str, Any]:
    try:
        manifest = json.loads(body)
    except ValueError as exc:
        raise BackupError(f"{archive}: the manifest is not valid JSON ({exc}).") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{archive} is not a flaskweb backup (its manifest says otherwise).")
    version = manifest.get("format_version")
    if not isinstance(version, int):
        raise BackupError(f"{archive}: the manifest has no format version.")
    if version > FORMAT_VERSION:
        raise BackupError(
            f"{archive} was written by a newer release (backup format "
            f"{manifest['format_version']}; this release reads {FORMAT_VERSION}): restore it "
            "with that release."
        )
    if manifest.get("manifest_sha256") != _manifest_digest(manifest):
        raise BackupError(f"{archive}: the manifest is damaged (its digest does not match).")
    for key in ("database", "counts", "scores", "members", "migrations"):
        if not isinstance(manifest.get(key), dict):
            raise BackupError(f"{archive}: the manifest has no {key!r}.")
    return manifest


def _sqlite_unpack(staged: Staged) -> Path:
    """Decompress the staged SQLite copy and check its structure (PRAGMA quick_check)."""
    path = staged.work / "database.sqlite3"
    try:
        with gzip.open(staged.dump, "rb") as gz, open(path, "wb") as out:
            shutil.copyfileobj(gz, out, CHUNK)
        conn = _sqlite_read_only(path)
        try:
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            conn.close()
    except (OSError, EOFError, zlib.error, sqlite3.DatabaseError) as exc:
        raise BackupError(f"The database in the archive cannot be read: {exc}.") from exc
    if result != "ok":
        raise BackupError(f"The database in the archive fails SQLite's quick_check: {result}.")
    return path


def _pg_restore_tool(staged: Staged) -> PgTool:
    made_by = staged.manifest["database"]
    return pg_tool(
        "pg_restore",
        at_least=int(made_by.get("pg_dump_major", 0)),
        why=f"the pg_dump that made this backup ({made_by.get('pg_dump_version')})",
    )


@dataclass
class CheckResult:
    manifest: dict[str, Any]
    lines: list[str]
    seconds: float


def backup_check(*, archive: Path, say: Say = lambda _: None) -> CheckResult:
    """Check an archive without restoring it: the manifest is intact, every member matches
    it, and the database dump is readable (SQLite: the copy passes quick_check and its
    counts and scores checksum match the manifest; PostgreSQL: pg_restore lists it, with the
    data of every table the manifest counts). Raises BackupError on the first problem."""
    started = time.monotonic()
    work = _make_work_dir([archive.parent], ".flaskweb-check-")
    try:
        staged = archive_stage(archive, work)
        manifest = staged.manifest
        lines = [
            f"Manifest intact: {_plural(len(manifest['members']), 'member')} "
            f"{'matches' if len(manifest['members']) == 1 else 'match'} the size and SHA-256 it "
            "records."
        ]
        if staged.vendor == "sqlite":
            path = _sqlite_unpack(staged)
            with _reader_for(Database("sqlite", sqlite_path=path)) as reader:
                differences = summary_differences(manifest, _summarize(reader))
            if differences:
                raise BackupError(
                    "The database in the archive does not match its manifest:\n  "
                    + "\n  ".join(differences)
                )
            lines.append(
                f"Database readable: SQLite quick_check ok; {len(manifest['counts'])} tables' "
                "row counts and the scores checksum match the manifest."
            )
        else:
            tool = _pg_restore_tool(staged)
            listing = _run_checked(
                [tool.path, "--list", str(staged.dump)],
                env=dict(os.environ),
                what="pg_restore --list",
            )
            with_data = set(re.findall(r" TABLE DATA \S+ (\S+) ", listing))
            missing = sorted(t for t, n in manifest["counts"].items() if n and t not in with_data)
            if missing:
                raise BackupError(
                    "The database dump lacks the data of tables the manifest counts: "
                    + ", ".join(missing)
                )
            entries = sum(1 for line in listing.splitlines() if line and not line.startswith(";"))
            lines.append(
                f"Database dump readable: pg_restore {tool.version} lists {entries:,} entries, "
                f"the data of all {len(manifest['counts'])} tables among them."
            )
        for line in lines:
            say(line)
        return CheckResult(manifest, lines, time.monotonic() - started)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- restoring ----------------------------------------------------------------------------------


@dataclass
class Contents:
    """What a restore target holds now (what --force would replace)."""

    relations: list[tuple[str, str, str]]  # (kind, schema, name)
    scores: dict[str, int]
    media_files: int
    media_bytes: int

    @property
    def empty_database(self) -> bool:
        return not self.relations


def _pg_contents(conn: psycopg.Connection[Any]) -> list[tuple[str, str, str]]:
    rows = conn.execute(
        """
        SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table'
                 WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
                 WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' END,
               n.nspname, c.relname
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'
          AND NOT (c.relkind = 'S' AND EXISTS (
                SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')))
          AND NOT c.relispartition
        ORDER BY 1, 2, 3
        """
    ).fetchall()
    return [(str(k), str(s), str(n)) for k, s, n in rows]


def target_contents(database: Database, media_root: Path) -> Contents:
    scores: dict[str, int] = {}
    if database.vendor == "sqlite":
        path = database.sqlite_path
        assert path is not None
        relations: list[tuple[str, str, str]] = []
        if path.exists():
            with _reader_for(database) as reader:
                tables = reader.tables()
                relations = [("table", "main", t) for t in sorted(tables)]
                scores = _score_counts(reader, tables)
    else:
        try:
            conn = database.pg_connect()
        except BackupError as exc:
            if "does not exist" not in str(exc):
                raise
            raise BackupError(
                f"{exc}\nCreate it first, empty and owned by the user of DATABASE_URL "
                f"(createdb {database.pg.get('dbname')}). Nothing was changed."
            ) from exc
        with conn:
            relations = _pg_contents(conn)
            tables = {n for k, s, n in relations if k == "table"}
            scores = _score_counts(_PgReader(conn), tables)
    files = [p for _, p in _media_files(media_root, set())]
    return Contents(relations, scores, len(files), sum(p.stat().st_size for p in files))


def _score_counts(reader: _Reader, tables: set[str]) -> dict[str, int]:
    counts = {}
    for name, app_label, model_name, _ in SCORE_TABLES:
        table = apps.get_model(app_label, model_name)._meta.db_table
        if table in tables:
            counts[name] = reader.count(table)
    return counts


def force_description(database: Database, media_root: Path, contents: Contents) -> list[str]:
    """What a restore with --force replaces, in words: every object it drops, by name."""
    lines = []
    if contents.relations:
        kinds: dict[str, list[str]] = {}
        for kind, schema, name in contents.relations:
            label = name if schema in ("public", "main") else f"{schema}.{name}"
            kinds.setdefault(kind, []).append(label)
        held = ", ".join(f"{n:,} {name.replace('_', ' ')}" for name, n in contents.scores.items())
        lines.append(
            f"{database.describe()} holds "
            + ", ".join(f"{len(v)} {k}{'s' if len(v) != 1 else ''}" for k, v in kinds.items())
            + (f" ({held})" if held else "")
            + "; --force drops every one of them and their data:"
        )
        for kind, names in kinds.items():
            lines.append(f"  {kind}s: {', '.join(names)}")
    if contents.media_files:
        lines.append(
            f"{media_root} holds {contents.media_files:,} files ({_size(contents.media_bytes)}); "
            "--force replaces those of the same name as the backup's and leaves the others."
        )
    return lines


@dataclass
class RestoreResult:
    manifest: dict[str, Any]
    differences: list[str]
    pending_migrations: list[str]
    summary: Summary
    seconds: float
    notes: list[str] = field(default_factory=list)


def backup_restore(
    *,
    archive: Path,
    database: Database,
    media_root: Path,
    secret_key_path: Path | None,
    force: bool = False,
    say: Say = lambda _: None,
) -> RestoreResult:
    """Restore an archive into `database` (which must be empty, or --force), `media_root`
    and `secret_key_path` (None: the install takes its key from the environment), then compare
    the restored database with the manifest. Everything is checked before anything is
    changed; the database is restored in one transaction. Returns the comparison: any
    difference means the restore is not to be trusted."""
    started = time.monotonic()
    work = _make_work_dir(
        [media_root.parent, *([database.sqlite_path.parent] if database.sqlite_path else [])],
        ".flaskweb-restore-",
    )
    try:
        staged = archive_stage(archive, work)
        manifest = staged.manifest
        say(
            f"Read {archive} ({_size(archive.stat().st_size)}): taken {manifest['created_at']} "
            f"by flaskweb {manifest['app_version']} from a {vendor_name(staged.vendor)} "
            f"database; every member matches the manifest ({time.monotonic() - started:.1f} s)."
        )
        _refuse_other_vendor(staged, database)
        unknown = migrations_unknown(manifest["migrations"])
        if unknown:
            raise BackupError(
                "This backup was taken by a newer release of flaskweb: its database has "
                f"migrations this code does not know ({', '.join(unknown)}). Restore it with "
                f"flaskweb {manifest['app_version']} or newer. Nothing was changed."
            )
        tool = _pg_restore_tool(staged) if staged.vendor == "postgresql" else None
        sqlite_copy = _sqlite_unpack(staged) if staged.vendor == "sqlite" else None
        contents = target_contents(database, media_root)
        if (not contents.empty_database or contents.media_files) and not force:
            raise BackupError(
                "The restore target is not empty:\n"
                + "\n".join(force_description(database, media_root, contents))
                + "\nRestore into an empty database and media directory, or pass --force to "
                "replace them. Nothing was changed."
            )
        if force and (not contents.empty_database or contents.media_files):
            for line in force_description(database, media_root, contents):
                say(line)
        step = time.monotonic()
        if sqlite_copy is not None:
            _sqlite_restore(sqlite_copy, database)
        else:
            assert tool is not None
            _pg_restore(staged, database, tool, drop=contents.relations)
        say(f"Restored {database.describe()} in {time.monotonic() - step:.1f} s.")
        step = time.monotonic()
        media_bytes = _media_restore(staged.media, media_root)
        say(
            f"Restored {len(staged.media):,} media files ({_size(media_bytes)}) into "
            f"{media_root} in {time.monotonic() - step:.1f} s."
        )
        notes = []
        if staged.secret_key is not None and secret_key_path is not None:
            _write_private(secret_key_path, staged.secret_key.read_bytes())
            say(f"Restored the secret key into {secret_key_path}.")
        elif staged.secret_key is not None:
            notes.append(
                "The backup holds the secret key of the install it was taken from, but this "
                "install takes its key from the environment: it was not written. To use it, "
                f"set DJANGO_SECRET_KEY to the output of `tar -xOf {archive} secret_key`."
            )
        elif manifest.get("secret_key") is False:
            notes.append(
                "The backup holds no secret key (the install it came from was given its key): "
                "give this install the same DJANGO_SECRET_KEY, or the sign-ins and signed "
                "links made before the backup no longer work."
            )
        step = time.monotonic()
        summary = database_summary(database)
        differences = summary_differences(manifest, summary)
        say(f"Compared the restored database with the manifest in {time.monotonic() - step:.1f} s.")
        if database.vendor == "postgresql" and not differences:
            with database.pg_connect() as conn:
                conn.autocommit = True
                conn.execute("ANALYZE")
        return RestoreResult(
            manifest=manifest,
            differences=differences,
            pending_migrations=migrations_pending(summary.applied),
            summary=summary,
            seconds=time.monotonic() - started,
            notes=notes,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _refuse_other_vendor(staged: Staged, database: Database) -> None:
    if staged.vendor == database.vendor:
        return
    source, target = vendor_name(staged.vendor), vendor_name(database.vendor)
    how = (
        "unset DATABASE_URL and point FLASKWEB_VAR_DIR at the install's var directory"
        if staged.vendor == "sqlite"
        else "set DATABASE_URL to an empty PostgreSQL database"
    )
    raise BackupError(
        f"This backup holds a {source} database and this install uses {target} "
        f"({database.describe()}). A {source} backup restores into {source}: {how}, then run "
        "restore again. Moving data between SQLite and PostgreSQL is not something backup "
        "and restore do. Nothing was changed."
    )


def _sqlite_restore(copy: Path, database: Database) -> None:
    target_path = database.sqlite_path
    assert target_path is not None
    target_path.parent.mkdir(parents=True, exist_ok=True)
    source = _sqlite_read_only(copy)
    target = sqlite3.connect(target_path, timeout=30)
    try:
        # the backup API writes the target in one transaction, through SQLite's own locks
        # (its -wal and -shm files included): all of the copy or, on error, nothing
        source.backup(target)
        target.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        raise BackupError(f"Restoring into {target_path} failed: {exc}. Nothing was changed.")
    finally:
        source.close()
        target.close()


def _pg_restore(staged: Staged, database: Database, tool: PgTool, *, drop: list) -> None:
    """pg_restore's SQL, piped into psql in one transaction that first drops what --force
    replaces: an error anywhere (or a pg_restore that stops half-way) commits nothing."""
    psql = pg_tool("psql", at_least=tool.major, why="pg_restore")
    # notices of what CASCADE drops with each table would fill the error log
    statements = ["BEGIN;", "SET client_min_messages = warning;"]
    for kind, schema, name in drop:
        statements.append(f'DROP {kind.upper()} IF EXISTS "{schema}"."{name}" CASCADE;')
    env = database.pg_env()
    with tempfile.TemporaryFile() as restore_errors, tempfile.TemporaryFile() as psql_errors:
        reader = subprocess.Popen(
            [tool.path, "--no-owner", "--no-privileges", "--file=-", str(staged.dump)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=restore_errors,
        )
        writer = subprocess.Popen(
            [psql.path, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--no-password"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=psql_errors,
        )
        assert reader.stdout is not None and writer.stdin is not None
        broken = False
        try:
            writer.stdin.write(("\n".join(statements) + "\n").encode())
            while chunk := reader.stdout.read(CHUNK):
                writer.stdin.write(chunk)
        except BrokenPipeError:  # psql stopped at an error; its message says which
            broken = True
            reader.kill()
        reader_code = reader.wait()
        if reader_code == 0 and not broken:
            with contextlib.suppress(BrokenPipeError):
                writer.stdin.write(b"\nCOMMIT;\n")
        # without COMMIT, psql's end of input closes the connection: the transaction, drops
        # included, is rolled back
        with contextlib.suppress(BrokenPipeError):
            writer.stdin.close()
        writer_code = writer.wait()
        if reader_code != 0 and not broken:
            restore_errors.seek(0)
            message = restore_errors.read().decode(errors="replace")
            raise BackupError(
                f"pg_restore failed (exit {reader_code}): {_tail(message)}\nNothing was changed."
            )
        if writer_code != 0 or broken:
            psql_errors.seek(0)
            message = psql_errors.read().decode(errors="replace")
            raise BackupError(
                f"Restoring into {database.describe()} failed: {_tail(message)}\n"
                "Nothing was changed (the restore runs in one transaction)."
            )


def _media_restore(media: list[tuple[str, Path]], media_root: Path) -> int:
    total = 0
    for relative, staged_path in media:
        destination = media_root / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        total += staged_path.stat().st_size
        try:
            os.replace(staged_path, destination)
        except OSError:  # another file system: copy beside it, then rename
            partial = destination.with_name(destination.name + ".restoring")
            shutil.copyfile(staged_path, partial)
            os.replace(partial, destination)
    return total


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".restoring")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(partial, path)


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def size_text(n: float) -> str:
    """A byte count for people: 12.3 MB."""
    return _size(n)
