"""Every `manage.py` command the README and the docs show works as written on the embedded
default (SQLite in a fresh var/, no DJANGO_DEBUG, no secret key given), after the demo data.

Commands are read from the fenced shell blocks of README.md, docs/, bench/README.md and
annotation/ASSIGNMENT.md. A concrete command runs as a reader runs it: the document's
commands one after another, in its order, on a fresh embedded install with the demo data
(a copy made for each document, so the documents run side by side), in a scratch directory
that looks like a checkout (manage.py, .venv and docs/ with its example files linked,
../shared linked when it exists), with the variables it sets in front of it
(`DJANGO_DEBUG=true .venv/bin/python …`) and without its trailing `# comment`. A synopsis
(it shows placeholders: `[--opt]`, `A|B`, `FILE`, `<username>`) cannot run as written; its
command must exist and build the parser that answers --help. Prose names commands the same
way: a fresh shell has no venv active, so `python manage.py`, `python -m …` and
`python bench/…` are written with `.venv/bin/python`."""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

from tests.conftest import REPO

pytestmark = pytest.mark.slow

DOCS = [REPO / "README.md", REPO / "bench" / "README.md", REPO / "annotation" / "ASSIGNMENT.md"]
DOCS += sorted((REPO / "docs").glob("*.md"))
# variables set for the one command (`DJANGO_DEBUG=true .venv/bin/python manage.py …`)
ASSIGNMENTS = r"(?P<env>(?:[A-Z_][A-Z0-9_]*=\S*\s+)*)"
COMMAND = re.compile(
    ASSIGNMENTS + r"(?P<python>(?:\.venv/bin/)?python3?) manage\.py\s+(?P<name>[a-z_]+)"
)
# a Python run without the checkout's venv, anywhere in a document (prose included)
BARE_PYTHON = re.compile(r"(?<![\w/.-])python3? (?:manage\.py|-m |bench/)")
# a word a reader replaces: FILE, SLUG, NAME, ID, S, J... (upper case, not an --option)
PLACEHOLDER = re.compile(r"(\[|\||…|<[a-z_]+>|(?<![-\w])[A-Z][A-Z_0-9]*(?![\w=]))")
# upper-case words that are names, not placeholders: the dataset the FLASK release is
# loaded into (`--dataset FLASK`)
NAMES = {"FLASK"}
# long-running servers, started by other tests (test_embedded_default, test_serve_command)
SERVERS = {"rundemo", "runserver", "serve"}
# commands that write the checkout's own translation catalogues (LOCALE_PATHS is the real
# locale/, not the scratch copy): their parser is checked, they are not run
# (tests/test_translations.py runs them on a copy)
CATALOGUE = {"makemessages", "compilemessages"}
# documents whose commands run at the same time (each its own processes, on its own copy)
SIDE_BY_SIDE = max(2, min(4, os.cpu_count() or 1))


def _fenced_commands(path: Path) -> list[str]:
    commands, in_block, pending = [], False, ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            in_block, pending = not in_block, ""
            continue
        if not in_block:
            continue
        text = pending + line.strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        text = _without_comment(text)
        if COMMAND.match(text):
            commands.append(text)
    return commands


def _without_comment(line: str) -> str:
    # a shell comment (`# defaults: …`) is not part of the command; quotes are kept, since
    # a quoted value is concrete whatever its case
    lexer = shlex.shlex(line, posix=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return " ".join(lexer)
    except ValueError:  # an unbalanced quote: leave the line to fail as written
        return line


def _documented() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for command in _fenced_commands(path):
            found.append((path.relative_to(REPO).as_posix(), command))
    return found


def _is_synopsis(command: str) -> bool:
    # quoted values ("Imported LLM judge") are concrete whatever their case
    unquoted = re.sub(r"\"[^\"]*\"|'[^']*'", "", command)
    return any(found[0] not in NAMES for found in PLACEHOLDER.finditer(unquoted))


def _checkout(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(parents=True)
    (work / "manage.py").symlink_to(REPO / "manage.py")
    (work / ".venv").symlink_to(REPO / ".venv")
    (work / "docs").symlink_to(REPO / "docs")  # the example files the commands read
    shared = REPO.parent / "shared"
    if shared.exists():
        (tmp_path / "shared").symlink_to(shared)
    return work


def _env(var_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_"))
    }
    env["FLASKWEB_VAR_DIR"] = str(var_dir)
    return env


def test_the_docs_show_manage_py_commands():
    names = {COMMAND.match(command)["name"] for _, command in _documented()}
    assert {"import_dataset", "analytics_report", "export_scores", "import_scores"} <= names


def test_the_docs_run_python_from_the_checkouts_venv():
    bare = [
        f"{path.relative_to(REPO).as_posix()}:{number}: {line.strip()}"
        for path in DOCS
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if BARE_PYTHON.search(line)
    ]
    assert not bare, "write .venv/bin/python (a fresh shell has no venv active):\n" + "\n".join(
        bare
    )


def test_every_documented_command_works_as_written_on_the_embedded_default(tmp_path):
    # given a fresh embedded install with the demo data
    installed = tmp_path / "installed"
    work = _checkout(installed)
    env = _env(installed / "var")
    python = str(work / ".venv" / "bin" / "python")
    for setup in (["migrate", "--verbosity", "0"], ["seed_demo"]):
        done = subprocess.run(
            [python, "manage.py", *setup], cwd=work, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr

    # when every documented command runs as written (a synopsis: its --help), each
    # document's in order on a copy of that install, the documents side by side
    failures = []
    documents: dict[str, list[str]] = {}
    for source, command in _documented():
        match = COMMAND.match(command)
        if match["name"] in SERVERS:
            continue
        if match["python"] != ".venv/bin/python":
            failures.append(
                f"{source}: {command}\n(a fresh shell has no venv active: write .venv/bin/python)"
            )
        elif _is_synopsis(command) or match["name"] in CATALOGUE:
            failures += [f"{source}: {command}\n{problem}" for problem in _help(match["name"])]
        else:
            documents.setdefault(source, []).append(command)

    def run_document(source: str) -> list[str]:
        copy = tmp_path / source.replace("/", "-")
        _checkout(copy)
        shutil.copytree(installed / "var", copy / "var")
        return [f"{source}: {failure}" for failure in _run_in_order(documents[source], copy)]

    longest_first = sorted(documents, key=lambda source: -len(documents[source]))
    with ThreadPoolExecutor(max_workers=SIDE_BY_SIDE) as pool:
        ran = dict(zip(longest_first, pool.map(run_document, longest_first), strict=True))
    failures += [failure for source in documents for failure in ran[source]]

    # then none fails
    assert not failures, "\n\n".join(failures)


def _run_in_order(commands: list[str], installed: Path) -> list[str]:
    """Run the commands one after another as a shell would (words, then globs) in the
    checkout of `installed`, on its var/; the failures, each with the end of its output."""
    work, env = installed / "work", _env(installed / "var")
    failures = []
    for command in commands:
        if "../shared/" in command and not (installed / "shared").exists():
            continue
        match = COMMAND.match(command)
        words = shlex.split(command)
        assigned = dict(word.split("=", 1) for word in words[: len(shlex.split(match["env"]))])
        words = words[len(assigned) :]
        argv = [p for arg in words for p in (sorted(glob.glob(arg, root_dir=work)) or [arg])]
        done = subprocess.run(
            argv, cwd=work, env={**env, **assigned}, capture_output=True, text=True
        )
        if done.returncode != 0:
            failures.append(f"{command}\n{done.stdout[-500:]}{done.stderr[-1500:]}")
    return failures


def _help(name: str) -> list[str]:
    """What keeps `manage.py <name> --help` from answering: no such command, or a parser
    that cannot be built (what --help prints)."""
    app = get_commands().get(name)
    if app is None:
        return [f"no command {name!r}"]
    try:
        help_text = load_command_class(app, name).create_parser("manage.py", name).format_help()
    except Exception as exc:  # anything the command's add_arguments raises
        return [f"{name} --help: {type(exc).__name__}: {exc}"]
    return [] if help_text.startswith("usage: manage.py " + name) else [f"{name}: {help_text}"]
