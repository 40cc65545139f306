"""Import of long-format scores (one row per score) made elsewhere: crowd-platform exports,
other tools, published ratings. Format and rules: docs/IMPORT_FORMATS.md, "Long-format
scores (analytics)".

Contract
- Validate, then write. The files are parsed as streams (analytics.imports.parsers) and every
  well-formed row is staged in temporary tables; the checks across rows (the same score
  twice, item and response values that differ between rows) and against the project (its
  skills, domains, scales, the dataset's stored texts and the scores stored before) run
  over the staged rows, in SQL or page by page. Every problem is counted (the first
  PROBLEMS_KEPT in file order are kept); if there is any, nothing is written (not even a
  project asked to be created) and ScoreImportRejected carries them.
- Atomic: staging, checks, items, responses, skills, scales, the ScoreImport row and its
  scores are one transaction; the scores go in with one INSERT ... SELECT from staging.
- Flat in memory: no step holds the file's rows, items or texts; memory is bounded by one
  line, one staging batch and one page of READ_CHUNK ids (bench/import_memory_bench.py).
- Serialised per project: the checks and the writes run under a lock on the project row,
  so two imports into one project cannot both pass the checks against the same state.
- Idempotent: the same bytes imported into the same project again write nothing and
  return the earlier ScoreImport. A score already stored with the same value is skipped
  and counted; with another value it is a problem, never overwritten.

Items, responses and texts of the annotation app are written through
annotation.services.items, skills through annotation's catalogue service, and stored texts
read through annotation selectors. Web and API imports run as background jobs
(analytics.imports.jobs); the command runs the same import in process.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils.text import slugify

from analytics.imports.parsers import (
    ALL_SKILLS,
    DEFAULT_SCALE,
    Given,
    ParsedScores,
    Scale,
    ScoreRow,
    normalized_text,
    scale_spec_parse,
    scores_parse,
)
from analytics.models import ImportedScore, RaterKind, ScoreImport, SkillScale
from annotation.models import Dataset, Difficulty, Project
from annotation.names import NameRefused, NameScope
from annotation.parsers import Problem, skill_key
from annotation.selectors import (
    dataset_get_by_name,
    domain_list_for_project,
    item_texts_by_external_id,
    model_names_for_dataset,
    project_lock,
    response_texts_for_items,
    skill_list_for_project,
)
from annotation.services.catalogue import skill_create
from annotation.services.items import (
    ItemSpec,
    dataset_get_or_create,
    dataset_name_check,
    items_create,
    responses_create,
    texts_fill,
)
from annotation.services.projects import project_create
from flaskweb.db import is_postgres
from flaskweb.jobs import (
    PROBLEMS_KEPT,
    ProblemLog,
    Progress,
    Staging,
    key_ranges,
    keyset_pages,
    sql_problems,
)

DEFAULT_DATASET = "Imported scores"
#: Rows per bulk INSERT of items and responses.
WRITE_BATCH = 5000
#: Ids per page of staged rows read back (and per IN (...) lookup of stored rows).
READ_CHUNK = 1000

_CRITERION = "Imported with scores; no rubric wording was given for this skill."
_ANCHORS = [f"Level {n} (no wording was imported)." for n in range(1, 6)]


class ScoreImportRejected(Exception):
    """Nothing was written; `problems` lists the reasons in file and line order (the first
    ones when there were more than the import kept), `count` counts them all."""

    def __init__(self, problems: Sequence[Problem], count: int | None = None) -> None:
        self.problems = list(problems)
        n = self.count = len(self.problems) if count is None else count
        super().__init__(
            f"the import was rejected with {n} problem{'s' if n != 1 else ''}; nothing was written"
        )


@dataclass
class ImportResult:
    batch: ScoreImport
    already_imported: bool = False  # the same bytes were imported before; nothing written
    project_created: bool = False
    dataset_created: bool = False
    skills_created: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        return self.batch.summary


ScaleArg = str | tuple[str, Scale]

# --- staging tables ----------------------------------------------------------------------------

_ROW, _GIVEN, _ITEM, _RESP, _SKILL, _FILL = (
    "stg_sc_row",
    "stg_sc_given",
    "stg_sc_item",
    "stg_sc_resp",
    "stg_sc_skill",
    "stg_sc_fill",
)
_STAGED: dict[str, Sequence[str]] = {
    _ROW: (
        "seq",
        "file_pos",
        "line",
        "item",
        "system",
        "rater",
        "kind",
        "skill",
        "skill_name",
        "value",
        "rationale",
        "fractional",
    ),
    _GIVEN: ("seq", "row_seq", "file_pos", "line", "item", "system", "field", "value", "norm"),
    _SKILL: ("skey", "skill_id"),
    _FILL: ("seq", "kind", "pk", "col", "value"),
}
_DDL = (
    f"""CREATE TEMP TABLE {_ROW} (
        seq BIGINT PRIMARY KEY, file_pos INTEGER NOT NULL, line INTEGER NOT NULL,
        item TEXT NOT NULL, system TEXT NOT NULL, rater TEXT NOT NULL, kind TEXT NOT NULL,
        skill TEXT NOT NULL, skill_name TEXT NOT NULL, value DOUBLE PRECISION NULL,
        rationale TEXT NOT NULL, fractional SMALLINT NOT NULL DEFAULT 0,
        keep SMALLINT NOT NULL DEFAULT 1)""",
    f"""CREATE TEMP TABLE {_GIVEN} (
        seq BIGINT PRIMARY KEY, row_seq BIGINT NOT NULL, file_pos INTEGER NOT NULL,
        line INTEGER NOT NULL, item TEXT NOT NULL, system TEXT NOT NULL, field TEXT NOT NULL,
        value TEXT NOT NULL, norm TEXT NOT NULL)""",
    f"""CREATE TEMP TABLE {_ITEM} (
        k BIGINT PRIMARY KEY, external_id TEXT NOT NULL UNIQUE, item_pk BIGINT NULL)""",
    f"""CREATE TEMP TABLE {_RESP} (
        k BIGINT PRIMARY KEY, item TEXT NOT NULL, system TEXT NOT NULL,
        response_pk BIGINT NULL, UNIQUE (item, system))""",
    f"CREATE TEMP TABLE {_SKILL} (skey TEXT PRIMARY KEY, skill_id BIGINT NOT NULL)",
    f"""CREATE TEMP TABLE {_FILL} (
        seq BIGINT PRIMARY KEY, kind TEXT NOT NULL, pk BIGINT NOT NULL, col TEXT NOT NULL,
        value TEXT NOT NULL)""",
)
_INDEXES = (
    f"CREATE INDEX {_ROW}_key ON {_ROW} (item, system, rater, kind, skill)",
    f"CREATE INDEX {_GIVEN}_key ON {_GIVEN} (item, system, field)",
)
_ITEM_FIELDS = ("instruction", "reference", "difficulty", "domain")


def scores_import(
    *,
    project_slug: str,
    files: Sequence[tuple[str, IO[bytes] | bytes]],
    dataset_name: str | None = None,
    scales: Iterable[ScaleArg] | Mapping[str, Scale] = (),
    judge_scale_raw: bool = False,
    create_project: bool = False,
    created_by=None,
    problem_limit: int | None = PROBLEMS_KEPT,
    progress: Progress | None = None,
) -> ImportResult:
    """Import long-format score files, given as (name, binary stream or bytes), into a
    project, creating its missing items, responses and skills (see the module docstring).

    `scales`: "SKILL=MIN:MAX[:continuous]" strings (SKILL may be "*": every skill of the
    input), (skill, Scale) pairs, or a mapping; skills not named keep their stored scale,
    else integers 1-5. `judge_scale_raw`: judge rows may hold any finite number.
    `create_project`: create the project when no project has this slug. `problem_limit`:
    problems kept for the rejection (all are counted; None keeps all).

    Returns the new ScoreImport (or the earlier one, `already_imported`); raises
    ScoreImportRejected having written nothing.
    """
    names = [name for name, _ in files]
    order = {name: i for i, name in enumerate(names)}
    log = ProblemLog(lambda f: order.get(f, -1), problem_limit)
    progress = progress or Progress("", 0)
    declared = _declared_scales(scales, log)
    dataset_name = (dataset_name or "").strip() or DEFAULT_DATASET
    if len(dataset_name) > 200:
        log.add(
            Problem(
                "", None, "dataset", "invalid_option", "a dataset name has 200 characters at most"
            )
        )
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        staging = _staging_create(cursor)
        sink = _RowStager(staging)
        parsed = scores_parse(
            files,
            difficulty_names=_difficulty_names(),
            max_line_bytes=settings.FLASKWEB_MAX_LINE_BYTES,
            sink=sink,
            on_problem=log.add,
            on_read=progress.advance,
        )
        staging.flush()
        progress.set("checking", force=True)
        for ddl in _INDEXES:
            cursor.execute(ddl)
        # serialises score imports into the project (FOR NO KEY UPDATE)
        project = project_lock(slug=slugify(project_slug))
        project_created = False
        if project is None and create_project:
            try:
                project = project_create(slug=project_slug)
                project_created = True
            except ValidationError as exc:
                log.add(Problem("", None, "project", "invalid_option", "; ".join(exc.messages)))
        elif project is None:
            log.add(
                Problem(
                    "",
                    None,
                    "project",
                    "unknown_project",
                    f"no project has the slug {project_slug!r} (ask to create it)",
                )
            )
        if project is None:
            raise ScoreImportRejected(log.sorted(), log.count)
        earlier = ScoreImport.objects.filter(
            project=project, input_sha256=parsed.input_sha256
        ).first()
        if earlier is not None and parsed.files:
            staging.drop()
            return ImportResult(batch=earlier, already_imported=True)
        plan = _Plan(cursor, project, parsed, dataset_name, declared, judge_scale_raw, log)
        plan.check()
        if log:
            raise ScoreImportRejected(log.sorted(), log.count)
        progress.set("writing", force=True)
        result = plan.write(project_created=project_created, created_by=created_by)
        staging.drop()
        return result


def _staging_create(cursor) -> Staging:
    staging = Staging(cursor, _STAGED)
    for name in (_ITEM, _RESP):
        cursor.execute(f"DROP TABLE IF EXISTS {name}")
    staging.drop()  # left by an earlier import on this connection inside a test transaction
    suffix = " ON COMMIT DROP" if is_postgres() else ""
    for ddl in _DDL:
        cursor.execute(ddl + suffix)
    return staging


class _RowStager:
    """The parser's sink: each well-formed row and the values it gives, into staging."""

    def __init__(self, staging: Staging) -> None:
        self.staging = staging
        self.seq = 0

    def __call__(self, row: ScoreRow, skill: str, givens: list[Given]) -> None:
        self.seq += 1
        row_seq = self.seq
        self.staging.add(
            _ROW,
            (
                row_seq,
                row.file,
                row.line,
                row.item,
                row.system,
                row.rater,
                row.rater_kind,
                row.skill,
                skill,
                row.value,
                row.rationale,
                row.fractional,
            ),
        )
        for given in givens:
            self.seq += 1
            self.staging.add(
                _GIVEN,
                (
                    self.seq,
                    row_seq,
                    row.file,
                    row.line,
                    row.item,
                    given.system,
                    given.field,
                    given.value,
                    given.norm,
                ),
            )


def _difficulty_names() -> dict[str, int]:
    return {str(label).casefold(): int(value) for value, label in Difficulty.choices}


def _declared_scales(
    scales: Iterable[ScaleArg] | Mapping[str, Scale], log: ProblemLog
) -> dict[str, tuple[str, Scale]]:
    """skill_key (or "*") -> (the name as given, its scale)."""
    pairs = scales.items() if isinstance(scales, Mapping) else scales
    result: dict[str, tuple[str, Scale]] = {}
    for entry in pairs:
        if isinstance(entry, str):
            try:
                name, scale = scale_spec_parse(entry)
            except ValueError as exc:
                log.add(Problem("", None, "scale", "invalid_option", str(exc)))
                continue
        else:
            name, scale = entry
        key = ALL_SKILLS if name.strip() == ALL_SKILLS else skill_key(name)
        if key in result and result[key][1] != scale:
            log.add(
                Problem(
                    "",
                    None,
                    "scale",
                    "invalid_option",
                    f"two scales for {name!r}: {result[key][1]} and {scale}",
                )
            )
            continue
        result[key] = (name.strip(), scale)
    return result


class _Plan:
    """What an import will write, found by checking the staged rows against each other and
    against the project. Reads of annotation tables go through annotation.selectors, one
    page of ids at a time."""

    def __init__(
        self,
        cursor: CursorWrapper,
        project: Project,
        parsed: ParsedScores,
        dataset_name: str,
        declared: dict[str, tuple[str, Scale]],
        judge_scale_raw: bool,
        log: ProblemLog,
    ) -> None:
        self.cursor = cursor
        self.project: Project = project
        self.parsed: ParsedScores = parsed
        self.dataset_name: str = dataset_name
        self.declared: dict[str, tuple[str, Scale]] = declared
        self.judge_scale_raw: bool = judge_scale_raw
        self.log: ProblemLog = log
        self.dataset: Dataset | None = None
        self.skill_ids: dict[str, int] = {}  # skill_key -> pk, for skills that exist
        self.skill_names: dict[str, str] = {}  # skill_key -> the catalogue's (or new) name
        self.new_skills: list[str] = []  # skill_keys to create
        self.domains: dict[str, int] = {}  # key or name, case-folded -> domain pk
        self.scales: dict[str, Scale] = {}  # skill_key -> scale in force for this import
        self.scale_rows: dict[str, Scale | None] = {}  # skill_key -> row to store (None: delete)
        self.fills = 0  # stored texts to fill in (items and responses)

    def _file(self, pos: int) -> str:
        return self.parsed.files[pos].name

    def _where(self, pos: int, line: int) -> str:
        return f"{self._file(pos)}, line {line}"

    def _problem(self, pos: int, line: int | None, fld: str, code: str, msg: str) -> Problem:
        return Problem(self._file(pos), line, fld, code, msg)

    def check(self) -> None:
        self._check_across_rows()
        self._check_names()
        self._check_skills()
        self._check_scales()
        self._check_domains()
        self._check_stored_texts()
        self._check_values()
        self._check_stored_scores()

    # --- checks ------------------------------------------------------------------------------

    def _check_across_rows(self) -> None:
        cursor = self.cursor
        dup = f"""
            SELECT r.seq FROM {_ROW} r
            JOIN (SELECT item, system, rater, kind, skill, MIN(seq) AS first FROM {_ROW}
                  GROUP BY item, system, rater, kind, skill HAVING COUNT(*) > 1) d
              ON r.item = d.item AND r.system = d.system AND r.rater = d.rater
                 AND r.kind = d.kind AND r.skill = d.skill AND r.seq <> d.first"""
        sql_problems(
            cursor,
            f"""SELECT r.file_pos, r.line, r.kind, r.rater, r.skill_name, r.system, r.item,
                       f.file_pos, f.line
            FROM {_ROW} r
            JOIN (SELECT item, system, rater, kind, skill, MIN(seq) AS first FROM {_ROW}
                  GROUP BY item, system, rater, kind, skill HAVING COUNT(*) > 1) d
              ON r.item = d.item AND r.system = d.system AND r.rater = d.rater
                 AND r.kind = d.kind AND r.skill = d.skill AND r.seq <> d.first
            JOIN {_ROW} f ON f.seq = d.first
            ORDER BY r.seq""",
            [],
            self.log,
            "duplicate_score",
            lambda r: self._problem(
                r[0],
                r[1],
                "score",
                "duplicate_score",
                f"{r[2]} {r[3]!r} scored {r[4]!r} of {r[5]!r} on item {r[6]!r} already "
                f"({self._where(r[7], r[8])})",
            ),
        )
        # a repeated score is left out of everything else, as the first one stands
        cursor.execute(f"UPDATE {_ROW} SET keep = -1 WHERE seq IN ({dup})")
        cursor.execute(
            f"DELETE FROM {_GIVEN} WHERE row_seq IN (SELECT seq FROM {_ROW} WHERE keep = -1)"
        )
        # the items and responses of the import, one row each, for paging through them
        cursor.execute(
            f"INSERT INTO {_ITEM} (k, external_id) SELECT MIN(seq), item FROM {_ROW} "
            "WHERE keep = 1 GROUP BY item"
        )
        cursor.execute(
            f"INSERT INTO {_RESP} (k, item, system) SELECT MIN(seq), item, system FROM {_ROW} "
            "WHERE keep = 1 GROUP BY item, system"
        )
        if is_postgres():  # statistics for the planner: autovacuum never sees temp tables
            for table in (_ROW, _GIVEN, _ITEM, _RESP):
                cursor.execute(f"ANALYZE {table}")
        sql_problems(
            cursor,
            f"""SELECT g.file_pos, g.line, g.field, g.item, g.system, f.file_pos, f.line
            FROM {_GIVEN} g
            JOIN (SELECT item, system, field, MIN(seq) AS first FROM {_GIVEN}
                  GROUP BY item, system, field) d
              ON g.item = d.item AND g.system = d.system AND g.field = d.field
                 AND g.seq <> d.first
            JOIN {_GIVEN} f ON f.seq = d.first
            WHERE g.norm <> f.norm
            ORDER BY g.seq""",
            [],
            self.log,
            "inconsistent_item",
            self._inconsistent,
        )

    def _inconsistent(self, r) -> Problem:
        pos, line, fld, item, system, first_pos, first_line = r
        where = self._where(first_pos, first_line)
        if fld == "response":
            return self._problem(
                pos,
                line,
                "response",
                "inconsistent_response",
                f"the response of {system!r} to item {item!r} has another text at {where}",
            )
        return self._problem(
            pos, line, fld, "inconsistent_item", f"item {item!r} has another {fld} at {where}"
        )

    def _check_names(self) -> None:
        """The dataset's name, and systems and judges new to the project that look like
        ones it has (annotation.names): two spellings of one would split its scores."""
        try:
            self.dataset_name = dataset_name_check(project=self.project, name=self.dataset_name)
        except NameRefused as exc:
            self.log.add(Problem("", None, "dataset", "invalid_option", str(exc)))
            return
        dataset = dataset_get_by_name(project=self.project, name=self.dataset_name)
        stored = {
            "system": model_names_for_dataset(dataset_id=dataset.pk) if dataset else [],
            "rater": ImportedScore.objects.filter(project=self.project, rater_kind=RaterKind.JUDGE)
            .values_list("rater", flat=True)
            .distinct()
            .order_by(),
        }
        judge = f"AND kind = '{RaterKind.JUDGE}'"
        for fld, kind, only in (("system", "model", ""), ("rater", "judge", judge)):
            scope = NameScope(kind, stored[fld])
            self.cursor.execute(
                f"""SELECT {fld}, MIN(seq) FROM {_ROW} WHERE keep = 1 {only}
                    GROUP BY {fld} ORDER BY MIN(seq)"""
            )
            for name, seq in self.cursor.fetchall():
                why = scope.admit(name)
                if why is not None:
                    self.cursor.execute(f"SELECT file_pos, line FROM {_ROW} WHERE seq = %s", [seq])
                    pos, line = self.cursor.fetchone()
                    self.log.add(self._problem(pos, line, fld, "lookalike_name", why))

    def _check_skills(self) -> None:
        # built-in first, so a project's own skill of the same key wins
        rows = sorted(
            skill_list_for_project(project=self.project).values_list("name", "pk", "project_id"),
            key=lambda r: r[2] is not None,
        )
        catalogue = {skill_key(name): (pk, name) for name, pk, _ in rows}
        scope = NameScope("skill", (name for name, _, _ in rows), exact=skill_key)
        for key, (spelling, pos, line) in self.parsed.skills.items():
            if key in catalogue:
                self.skill_ids[key], self.skill_names[key] = catalogue[key]
                continue
            why = scope.admit(spelling)
            if why is not None:
                self.log.add(self._problem(pos, line, "skill", "lookalike_name", why))
            self.new_skills.append(key)
            self.skill_names[key] = spelling
        if self.skill_ids:
            self.cursor.executemany(
                f"INSERT INTO {_SKILL} (skey, skill_id) VALUES (%s, %s)",
                list(self.skill_ids.items()),
            )

    def _check_scales(self) -> None:
        stored = {
            row.skill_id: Scale(row.low, row.high, row.continuous)
            for row in SkillScale.objects.filter(project=self.project)
        }
        with_scores = set(
            ImportedScore.objects.filter(
                project=self.project, skill_id__in=list(self.skill_ids.values())
            )
            .values_list("skill_id", flat=True)
            .distinct()
        )
        for key, (name, _) in self.declared.items():
            if key != ALL_SKILLS and key not in self.parsed.skills:
                self.log.add(
                    Problem(
                        "",
                        None,
                        "scale",
                        "invalid_option",
                        f"a scale is given for {name!r}, but no row scores that skill",
                    )
                )
        star = self.declared.get(ALL_SKILLS)
        for key in self.parsed.skills:
            skill_id = self.skill_ids.get(key)
            current = DEFAULT_SCALE if skill_id is None else stored.get(skill_id, DEFAULT_SCALE)
            wanted = self.declared.get(key, star)
            if wanted is None:
                self.scales[key] = current
                continue
            scale = wanted[1]
            self.scales[key] = scale
            if scale == current:
                continue
            if skill_id in with_scores:
                self.log.add(
                    Problem(
                        "",
                        None,
                        "scale",
                        "scale_conflict",
                        f"{self.skill_names[key]} already has imported scores on the scale "
                        f"{current}; this import declares {scale}",
                    )
                )
                continue
            self.scale_rows[key] = None if scale == DEFAULT_SCALE else scale

    def _check_domains(self) -> None:
        for pk, key, name in domain_list_for_project(project=self.project).values_list(
            "pk", "key", "name"
        ):
            self.domains.setdefault(key.casefold(), pk)
            self.domains[name.casefold()] = pk
        pages = keyset_pages(
            self.cursor,
            f"SELECT k, external_id FROM {_ITEM} WHERE TRUE {{after}}",
            [],
            key="k",
            size=READ_CHUNK,
        )
        for page in pages:
            firsts = self._firsts(("domain",), [e for _, e in page], responses=False)
            for value, pos, line in sorted(firsts.values(), key=lambda v: (v[1], v[2])):
                for name in json.loads(value):
                    if self.domains.get(name.casefold()) is None:
                        self.log.add(
                            self._problem(
                                pos,
                                line,
                                "domain",
                                "invalid_domain",
                                f"domain {name!r} is not a domain of the catalogue",
                            )
                        )

    def _firsts(self, fields: Sequence[str], items: Sequence[str], *, responses: bool):
        """The first values given for `items`: {(item, system, field): (value, pos, line)}."""
        marks = ", ".join(["%s"] * len(items))
        names = ", ".join(f"'{f}'" for f in fields)
        system = "system <> ''" if responses else "system = ''"
        self.cursor.execute(
            f"""SELECT g.item, g.system, g.field, g.value, g.file_pos, g.line FROM {_GIVEN} g
            JOIN (SELECT MIN(seq) AS first FROM {_GIVEN}
                  WHERE field IN ({names}) AND {system} AND item IN ({marks})
                  GROUP BY item, system, field) f ON g.seq = f.first""",
            list(items),
        )
        return {(i, s, f): (v, p, ln) for i, s, f, v, p, ln in self.cursor.fetchall()}

    def _check_stored_texts(self) -> None:
        cursor = self.cursor
        self.dataset = dataset_get_by_name(project=self.project, name=self.dataset_name)
        if self.dataset is None:
            return
        fill = Staging(cursor, {_FILL: _STAGED[_FILL]})
        fill_seq = 0
        pages = keyset_pages(
            cursor, f"SELECT k, external_id FROM {_ITEM} WHERE TRUE {{after}}", [], key="k"
        )
        for page in pages:
            chunk = [external_id for _, external_id in page]
            stored = item_texts_by_external_id(dataset_id=self.dataset.pk, external_ids=chunk)
            if not stored:
                continue
            cursor.executemany(
                f"UPDATE {_ITEM} SET item_pk = %s WHERE external_id = %s",
                [(pk, external_id) for pk, external_id, _, _ in stored],
            )
            firsts = self._firsts(("instruction", "reference"), chunk, responses=False)
            filled: set[int] = set()
            for pk, external_id, instruction, reference in stored:
                for fld, text, column in (
                    ("instruction", instruction, "instruction"),
                    ("reference", reference, "reference_answer"),
                ):
                    given = firsts.get((external_id, "", fld))
                    if given is None:
                        continue
                    if not text.strip():
                        fill_seq += 1
                        fill.add(_FILL, (fill_seq, "item", pk, column, given[0]))
                        filled.add(pk)
                    elif normalized_text(text) != normalized_text(given[0]):
                        self.log.add(
                            self._problem(
                                given[1],
                                given[2],
                                fld,
                                "changed_item",
                                f"item {external_id!r} is stored with another {fld}",
                            )
                        )
            self.fills += len(filled)
            names = {pk: external_id for pk, external_id, _, _ in stored}
            marks = ", ".join(["%s"] * len(names))
            cursor.execute(
                f"SELECT item, system FROM {_RESP} WHERE item IN ({marks})", list(names.values())
            )
            wanted = set(cursor.fetchall())
            texts = self._firsts(("response",), list(names.values()), responses=True)
            found = []
            for pk, item_id, system, text in response_texts_for_items(item_ids=list(names)):
                key = (names[item_id], system)
                if key not in wanted:
                    continue
                found.append((pk, *key))
                given = texts.get((*key, "response"))
                if given is None:
                    continue
                if not text.strip():
                    fill_seq += 1
                    fill.add(_FILL, (fill_seq, "response", pk, "text", given[0]))
                    self.fills += 1
                elif normalized_text(text) != normalized_text(given[0]):
                    self.log.add(
                        self._problem(
                            given[1],
                            given[2],
                            "response",
                            "changed_response",
                            f"the response of {system!r} to item {key[0]!r} is stored "
                            "with another text",
                        )
                    )
            if found:
                cursor.executemany(
                    f"UPDATE {_RESP} SET response_pk = %s WHERE item = %s AND system = %s", found
                )
        fill.flush()

    def _check_values(self) -> None:
        for key, scale in self.scales.items():
            judge = f" AND kind <> '{RaterKind.JUDGE}'" if self.judge_scale_raw else ""
            integer = "" if scale.continuous else " OR value <> ROUND(value) OR fractional = 1"
            name = self.skill_names[key]
            sql_problems(
                self.cursor,
                f"""SELECT file_pos, line, value, fractional FROM {_ROW}
                WHERE keep = 1 AND skill = %s AND value IS NOT NULL{judge}
                  AND (value < %s OR value > %s{integer})
                ORDER BY seq""",
                [key, scale.low, scale.high],
                self.log,
                "out_of_scale",
                lambda r, scale=scale, name=name: self._problem(
                    r[0], r[1], "score", "out_of_scale", f"{name}: {_off_scale(scale, r)}"
                ),
            )

    def _stored_scores_sql(self, columns: str, condition: str) -> str:
        return f"""SELECT {columns} FROM {_ROW} r
            JOIN {_RESP} p ON p.item = r.item AND p.system = r.system
            JOIN {_SKILL} k ON k.skey = r.skill
            JOIN {ImportedScore._meta.db_table} s
              ON s.response_id = p.response_pk AND s.skill_id = k.skill_id
                 AND s.rater = r.rater AND s.rater_kind = r.kind
            WHERE r.keep = 1 AND p.response_pk IS NOT NULL AND ({condition})"""

    def _check_stored_scores(self) -> None:
        same = "s.value = r.value OR (s.value IS NULL AND r.value IS NULL)"
        self.cursor.execute(
            f"UPDATE {_ROW} SET keep = 0 WHERE seq IN ({self._stored_scores_sql('r.seq', same)})"
        )
        sql_problems(
            self.cursor,
            self._stored_scores_sql(
                "r.file_pos, r.line, r.kind, r.rater, r.skill, r.system, r.item, s.value, "
                "s.batch_id, r.value",
                f"NOT ({same})",
            )
            + " ORDER BY r.seq",
            [],
            self.log,
            "changed_score",
            lambda r: self._problem(
                r[0],
                r[1],
                "score",
                "changed_score",
                f"{r[2]} {r[3]!r} already has {_shown(r[7])} stored for "
                f"{self.skill_names[r[4]]} of {r[5]!r} on item {r[6]!r} "
                f"(import {r[8]}), not {_shown(r[9])}",
            ),
        )

    # --- writing ----------------------------------------------------------------------------

    def write(self, *, project_created: bool, created_by) -> ImportResult:
        project, parsed, cursor = self.project, self.parsed, self.cursor
        dataset_created = self.dataset is None
        if self.dataset is None:
            self.dataset, _ = dataset_get_or_create(project=project, name=self.dataset_name)
        for key in self.new_skills:
            skill = skill_create(
                project=project,
                name=self.skill_names[key],
                criterion=_CRITERION,
                anchors=_ANCHORS,
                created_by=created_by,
            )
            self.skill_ids[key] = skill.pk
            cursor.execute(
                f"INSERT INTO {_SKILL} (skey, skill_id) VALUES (%s, %s)", [key, skill.pk]
            )
        for key, scale in self.scale_rows.items():
            if scale is None:
                SkillScale.objects.filter(project=project, skill_id=self.skill_ids[key]).delete()
            else:
                SkillScale.objects.update_or_create(
                    project=project,
                    skill_id=self.skill_ids[key],
                    defaults={"low": scale.low, "high": scale.high, "continuous": scale.continuous},
                )
        items_created = self._write_items(dataset=self.dataset)
        responses_created = self._write_responses()
        self._fill_texts()
        cursor.execute(f"SELECT keep, COUNT(*) FROM {_ROW} WHERE keep >= 0 GROUP BY keep")
        kept = dict(cursor.fetchall())
        batch = ScoreImport.objects.create(
            project=project,
            dataset=self.dataset,
            files=[f.as_dict() for f in parsed.files],
            input_sha256=parsed.input_sha256,
            rows_read=parsed.rows_read,
            scores_created=kept.get(1, 0),
            scores_unchanged=kept.get(0, 0),
            items_created=items_created,
            responses_created=responses_created,
            scales={
                "skills": {
                    self.skill_names[k]: s.as_dict() for k, s in sorted(self.scales.items())
                },
                "judge_scale": "raw" if self.judge_scale_raw else "skill",
            },
            created_by=created_by,
            summary=self._summary(),
        )
        cursor.execute(
            f"""INSERT INTO {ImportedScore._meta.db_table}
                (batch_id, project_id, response_id, skill_id, rater, rater_kind, value, is_na,
                 rationale)
            SELECT %s, %s, p.response_pk, k.skill_id, r.rater, r.kind, r.value,
                   CASE WHEN r.value IS NULL THEN %s ELSE %s END, r.rationale
            FROM {_ROW} r
            JOIN {_RESP} p ON p.item = r.item AND p.system = r.system
            JOIN {_SKILL} k ON k.skey = r.skill
            WHERE r.keep = 1
            ORDER BY r.seq""",
            [batch.pk, project.pk, True, False],
        )
        return ImportResult(
            batch=batch,
            project_created=project_created,
            dataset_created=dataset_created,
            skills_created=[self.skill_names[k] for k in self.new_skills],
        )

    def _write_items(self, *, dataset: Dataset) -> int:
        # an item known only by its id is stored with an empty instruction, filled in by a
        # later import that has it (annotation.services.items)
        created = 0
        pages = keyset_pages(
            self.cursor,
            f"SELECT k, external_id FROM {_ITEM} WHERE item_pk IS NULL {{after}}",
            [],
            key="k",
            size=READ_CHUNK,
        )
        for page in pages:
            chunk = [external_id for _, external_id in page]
            firsts = self._firsts(_ITEM_FIELDS, chunk, responses=False)
            specs = []
            for external_id in chunk:
                instruction = firsts.get((external_id, "", "instruction"))
                reference = firsts.get((external_id, "", "reference"))
                difficulty = firsts.get((external_id, "", "difficulty"))
                domains = firsts.get((external_id, "", "domain"))
                ids: list[int] = []
                for name in json.loads(domains[0]) if domains else []:
                    pk = self.domains[name.casefold()]
                    if pk not in ids:
                        ids.append(pk)
                specs.append(
                    ItemSpec(
                        external_id=external_id,
                        instruction=instruction[0] if instruction else "",
                        reference_answer=reference[0] if reference else "",
                        difficulty=int(difficulty[0]) if difficulty else None,
                        domain_ids=tuple(ids),
                    )
                )
            made = items_create(dataset=dataset, items=specs, batch=WRITE_BATCH)
            if made:
                self.cursor.executemany(
                    f"UPDATE {_ITEM} SET item_pk = %s WHERE external_id = %s",
                    [(pk, external_id) for external_id, pk in made.items()],
                )
            created += len(made)
        return created

    def _write_responses(self) -> int:
        created = 0
        ranges = key_ranges(self.cursor, _RESP, "k", "response_pk IS NULL", [], size=READ_CHUNK)
        for after, upto in ranges:
            self.cursor.execute(
                f"""SELECT p.k, p.item, p.system, i.item_pk FROM {_RESP} p
                JOIN {_ITEM} i ON i.external_id = p.item
                WHERE p.response_pk IS NULL AND p.k > %s AND p.k <= %s ORDER BY p.k""",
                [after, upto],
            )
            page = self.cursor.fetchall()
            texts = self._firsts(("response",), sorted({r[1] for r in page}), responses=True)
            new = [(item, system, item_pk) for _, item, system, item_pk in page]
            pks = responses_create(
                responses=[
                    (
                        item_pk,
                        system,
                        texts[(item, system, "response")][0]
                        if (item, system, "response") in texts
                        else "",
                    )
                    for item, system, item_pk in new
                ],
                batch=WRITE_BATCH,
            )
            self.cursor.executemany(
                f"UPDATE {_RESP} SET response_pk = %s WHERE item = %s AND system = %s",
                [(pk, item, system) for (item, system, _), pk in zip(new, pks, strict=True)],
            )
            created += len(pks)
        return created

    def _fill_texts(self) -> None:
        pages = keyset_pages(
            self.cursor,
            f"SELECT seq, kind, pk, col, value FROM {_FILL} WHERE TRUE {{after}}",
            [],
            key="seq",
        )
        for page in pages:
            items: dict[int, dict[str, str]] = {}
            responses: dict[int, str] = {}
            for _, kind, pk, column, value in page:
                if kind == "item":
                    items.setdefault(pk, {})[column] = value
                else:
                    responses[pk] = value
            texts_fill(items=items, responses=responses)

    def _summary(self) -> dict[str, Any]:
        cursor = self.cursor
        cursor.execute(
            f"""SELECT kind, COUNT(*), SUM(CASE WHEN value IS NULL THEN 1 ELSE 0 END),
                       COUNT(DISTINCT rater)
            FROM {_ROW} WHERE keep = 1 GROUP BY kind"""
        )
        by_kind = {kind: (n, na, raters) for kind, n, na, raters in cursor.fetchall()}
        cursor.execute(
            f"SELECT DISTINCT rater FROM {_ROW} WHERE keep = 1 AND kind = %s", [RaterKind.JUDGE]
        )
        judges = sorted(r[0] for r in cursor.fetchall())[:100]
        cursor.execute(f"SELECT skill, COUNT(*) FROM {_ROW} WHERE keep = 1 GROUP BY skill")
        per_skill = {self.skill_names[key]: n for key, n in cursor.fetchall()}
        return {
            "scores": {k: int(by_kind.get(k, (0, 0, 0))[0]) for k in RaterKind.values},
            "na": {k: int(by_kind.get(k, (0, 0, 0))[1] or 0) for k in RaterKind.values},
            "raters": {k: int(by_kind.get(k, (0, 0, 0))[2]) for k in RaterKind.values},
            "judges": judges,
            "skills": dict(sorted(per_skill.items())),
            "skills_created": [self.skill_names[k] for k in self.new_skills],
            "texts_filled": self.fills,
        }


def _shown(value: float | None) -> str:
    return "N/A" if value is None else f"{value:g}"


def _off_scale(scale, row) -> str:
    """Why a staged score (file_pos, line, value, fractional) is off `scale`."""
    value, fractional = row[2], row[3]
    problem = scale.check(value)
    if problem is None and fractional:
        problem = (
            f"score {value:g} is written with a fraction or an exponent; the scale {scale} "
            f"takes whole numbers as written (write {int(value)})"
        )
    return problem
