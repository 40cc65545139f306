"""The directory prometheus-client's multiprocess mode keeps its counters in (imports no app,
nor Django: gunicorn's master calls it before any worker loads the app).

Several gunicorn worker processes each count their own requests. With
PROMETHEUS_MULTIPROC_DIR set, every process writes its counters and histograms to a file of
its own there (`counter_<pid>.db`, `histogram_<pid>.db`), and a scrape, answered by any one
worker, adds up every file. gunicorn.conf.py, `manage.py serve` and docker-compose.yml set
it up (docs/OPERATIONS.md "Several web processes").

Invariants:

- A missing or unwritable directory never breaks the app: `directory_usable` makes it, or
  unsets the variable (each process then counts alone) and says so.
- A directory left by an earlier run is emptied when gunicorn's master starts (`wipe`):
  a new process whose pid matches an old file would otherwise carry on the old counts.
- A worker that exits (gunicorn replaces each after GUNICORN_MAX_REQUESTS requests) is
  folded into one archive file per kind (`archive_process`), so its counts stay in the
  totals (a counter never goes down) while the number of files stays bounded: without it a
  busy server leaves two files per replaced worker, hundreds a day, and every scrape reads
  them all. The fold holds an exclusive lock on the directory's lock file and a scrape a
  shared one (`collect_lock`), so no scrape reads a worker's counts both in its own file and
  in the archive, or in neither.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import logging
import os
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("flaskweb.metrics")

ENV = "PROMETHEUS_MULTIPROC_DIR"
#: the kinds of files whose counts outlive their process (gauges are computed at scrape time)
ARCHIVED_KINDS = ("counter", "histogram")
LOCK_NAME = ".lock"


def configured() -> str | None:
    return os.environ.get(ENV) or None


def directory_usable() -> str | None:
    """The multiprocess directory, made if missing; None (and the variable unset, so that
    prometheus-client counts in memory, per process) when it cannot be made or written. Call
    before prometheus_client is imported: it picks its mode at import."""
    path = configured()
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"{path} is not writable")
    except OSError as exc:
        logger.warning(
            "%s=%s cannot be used (%s): each web process counts its own requests, and a "
            "scrape sees one process only",
            ENV,
            path,
            exc,
        )
        os.environ.pop(ENV, None)
        return None
    return path


def wipe(path: str) -> int:
    """Delete the metric files an earlier run left (gunicorn's master, before it starts a
    worker). Only prometheus-client's own files go. Returns how many."""
    removed = 0
    for name in glob.glob(os.path.join(path, "*.db")):
        if os.path.basename(name).split("_", 1)[0] in ("counter", "histogram", "gauge", "summary"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(name)
                removed += 1
    return removed


#: gunicorn.conf.py's private directories: flaskweb-metrics-<master pid>-<random>
PRIVATE_PREFIX = "flaskweb-metrics-"


def remove_orphans() -> int:
    """Delete the private directories (in the temporary directory) of gunicorn masters that
    are gone without removing theirs (killed outright). Returns how many."""
    import shutil
    import tempfile

    removed = 0
    for path in glob.glob(os.path.join(tempfile.gettempdir(), PRIVATE_PREFIX + "*")):
        pid = os.path.basename(path)[len(PRIVATE_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


@contextlib.contextmanager
def _locked(path: str, mode: int) -> Iterator[None]:
    with open(os.path.join(path, LOCK_NAME), "a+b") as handle:
        fcntl.flock(handle.fileno(), mode)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def collect_lock(path: str) -> contextlib.AbstractContextManager[None]:
    """Held (shared) while a scrape reads the files."""
    return _locked(path, fcntl.LOCK_SH)


def archive_process(pid: int, path: str | None = None) -> None:
    """Bookkeeping for a web process that exited: its live gauges go, its counters and
    histograms are added into `<kind>_archive.db` and its own files deleted."""
    from prometheus_client.mmap_dict import MmapedDict, mmap_key
    from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

    path = path or configured()
    if not path or not os.path.isdir(path):
        return
    mark_process_dead(pid, path)
    with _locked(path, fcntl.LOCK_EX):
        for kind in ARCHIVED_KINDS:
            own = Path(path) / f"{kind}_{pid}.db"
            if not own.exists():
                continue
            archive = Path(path) / f"{kind}_archive.db"
            sources = [str(p) for p in (archive, own) if p.exists()]
            # accumulate=False: histogram buckets stay per bucket, as the files keep them
            merged = MultiProcessCollector.merge(sources, accumulate=False)
            scratch = Path(path) / f"{kind}_archive.tmp"  # not *.db: no scrape reads it
            scratch.unlink(missing_ok=True)
            out = MmapedDict(str(scratch))
            try:
                for metric in merged:
                    for sample in metric.samples:
                        labels = sample.labels
                        key = mmap_key(
                            metric.name,
                            sample.name,
                            list(labels),
                            list(labels.values()),
                            metric.documentation,
                        )
                        out.write_value(key, sample.value, 0.0)
            finally:
                out.close()
            os.replace(scratch, archive)
            own.unlink()
