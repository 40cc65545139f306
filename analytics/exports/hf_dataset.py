"""The Hugging Face `datasets` layout of a project's scores (docs/EXPORTS.md, "hf_dataset"):
a zip of one directory that `datasets.load_dataset(<directory>)` loads as it is.

    <project>-hf-dataset/
      README.md                               dataset card: YAML front matter + description
      data/human-00000-of-00001.parquet       config "scores", split "human"
      data/judge-00000-of-00001.parquet       config "scores", split "judge"
      data/preferences-00000-of-00001.parquet config "preferences", split "train"

Contract
- The scores splits are the long table's Parquet rows (analytics.exports.services
  ScoreExport.typed), people's rows (campaigns and imported human scores) in `human`, judges'
  (runs and imported judge outputs) in `judge`, with one schema for both (a config's splits
  share their features). Preferences are the preference export's rows.
- A split with no row is left out (`datasets` cannot read a Parquet file without rows), and
  so is a config with no split.
- Each Parquet file is written to a temporary file by columnar.parquet_write (memory: one
  batch) and copied into the zip stored, not deflated (Parquet is compressed already).
- The card names what a reader needs to use the data: the rubric versions of the rows and
  the campaigns' pinned ones, the campaigns' settings, the judges' configurations (never a
  provider's credentials or address), the row counts, the filters and the export date.
  Its `license` is a placeholder the project's admin edits before publishing.
- The layout is made to be published, so no person is named in it: people (human raters,
  preference raters, adjudicators) appear under pseudonyms, `person-<10 hex>` and
  `adjudicator-<10 hex>`, keyed HMACs of their names with the server's SECRET_KEY (the same
  person has the same pseudonym in every export of this server; nobody without the key can
  tell who it is), and crowd worker ids are left out (null). Judges keep their names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml
from django.conf import settings
from django.utils import timezone

from analytics.exports.columnar import HF_DTYPES, parquet_write
from analytics.exports.services import (
    LONG_COLUMNS,
    Column,
    ExportOptions,
    ScoreExport,
    export_metadata,
)
from analytics.models import ExportFormat, ExportKind, RaterKind
from annotation import selectors as annotation_selectors
from judging import selectors as judging_selectors

SCORES, PREFERENCES = "scores", "preferences"
_SEEN = {name: LONG_COLUMNS.index(name) for name in ("rater", "system", "skill", "dataset")}
_LABEL, _SOURCE = LONG_COLUMNS.index("rubric_label"), LONG_COLUMNS.index("source")


@dataclass
class Part:
    """One written split: its config, split name, columns, rows and Arrow size, and what
    its rows named (for the card)."""

    config: str
    split: str
    columns: list[Column]
    rows: int = 0
    nbytes: int = 0
    seen: dict[str, set[str]] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"data/{self.split}-00000-of-00001.parquet"


def _tracked(rows: Iterator[list[Any]], part: Part) -> Iterator[list[Any]]:
    """The long rows, noting the raters, systems, skills, datasets, rubric labels and
    sources they name (small sets: one entry per name, not per row)."""
    seen = part.seen
    for key in (*_SEEN, "rubric_label", "source"):
        seen[key] = set()
    for row in rows:
        for key, index in _SEEN.items():
            seen[key].add(row[index])
        if row[_LABEL]:
            seen["rubric_label"].add(row[_LABEL])
        seen["source"].add(row[_SOURCE])
        yield row


def pseudonym(role: str, name: str) -> str:
    """`<role>-<10 hex>`: a keyed HMAC-SHA256 of the name with the server's SECRET_KEY."""
    key = settings.SECRET_KEY.encode()
    digest = hmac.new(key, f"{role}:{name}".encode(), hashlib.sha256).hexdigest()
    return f"{role}-{digest[:10]}"


def _unnamed(rows: Iterator[list[Any]], columns: Sequence[Column]) -> Iterator[list[Any]]:
    """The rows with no person named: human raters and adjudicators under their pseudonyms,
    crowd worker ids null (the module's contract). A judge row keeps its rater."""
    index = {column.name: k for k, column in enumerate(columns)}
    rater, kind = index.get("rater"), index.get("rater_kind")
    adjudicator, worker = index.get("adjudicated_by"), index.get("worker_id")
    for row in rows:
        row = list(row)
        if rater is not None and row[rater] and (kind is None or row[kind] == RaterKind.HUMAN):
            row[rater] = pseudonym("person", row[rater])
        if adjudicator is not None and row[adjudicator]:
            row[adjudicator] = pseudonym("adjudicator", row[adjudicator])
        if worker is not None:
            row[worker] = None
        yield row


def hf_dataset_write(options: ExportOptions, out: IO[bytes]) -> int:
    """Write the zipped layout of `options` (kind hf_dataset; the long export's filters) to
    `out`. Returns the number of data rows of all splits."""
    root = f"{options.project.slug}-hf-dataset"
    metadata = export_metadata(options)
    long_options = dataclasses.replace(options, kind=ExportKind.LONG, fmt=ExportFormat.PARQUET)
    columns = ScoreExport(long_options).long_columns()
    parts: list[Part] = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(out, "w") as archive:

        def write(part: Part, rows: Iterator[list[Any]]) -> None:
            path = Path(tmp) / Path(part.path).name
            stats = parquet_write(str(path), part.columns, rows, metadata=metadata)
            part.rows, part.nbytes = stats.rows, stats.nbytes
            if part.rows:
                archive.write(path, f"{root}/{part.path}", compress_type=zipfile.ZIP_STORED)
                parts.append(part)
            path.unlink()

        for split in (RaterKind.HUMAN, RaterKind.JUDGE):
            if not options.filters.wants(split):
                continue
            narrowed = dataclasses.replace(
                long_options,
                filters=dataclasses.replace(options.filters, rater_kind=split.value),
            )
            export = ScoreExport(narrowed)
            _, rows = export.typed()
            part = Part(SCORES, split.value, columns)
            write(part, _tracked(_unnamed(rows, columns), part))
        if options.filters.wants(RaterKind.HUMAN):
            preferences = ScoreExport(
                dataclasses.replace(options, kind=ExportKind.PREFERENCES, fmt=ExportFormat.PARQUET)
            )
            pref_columns, rows = preferences.typed()
            write(Part(PREFERENCES, PREFERENCES, pref_columns), _unnamed(rows, pref_columns))
        card = dataset_card(options, parts)
        archive.writestr(f"{root}/README.md", card, compress_type=zipfile.ZIP_DEFLATED)
    return sum(part.rows for part in parts)


# --- the dataset card -------------------------------------------------------------------------


def _split_name(part: Part) -> str:
    return "train" if part.config == PREFERENCES else part.split


def card_front_matter(parts: Sequence[Part]) -> dict[str, Any]:
    """The card's YAML: `configs` (data_files per split; `scores` is the default) and
    `dataset_info` (the features in `datasets`' type names, the splits with their sizes)."""
    configs: list[dict[str, Any]] = []
    infos: list[dict[str, Any]] = []
    for config in (SCORES, PREFERENCES):
        own = [p for p in parts if p.config == config]
        if not own:
            continue
        entry: dict[str, Any] = {"config_name": config}
        if config == SCORES:
            entry["default"] = True
        entry["data_files"] = [
            {"split": _split_name(p), "path": p.path.replace("00000-of-00001", "*")} for p in own
        ]
        configs.append(entry)
        infos.append(
            {
                "config_name": config,
                "features": [
                    {"name": name, "dtype": HF_DTYPES[kind]} for name, kind in own[0].columns
                ],
                "splits": [
                    {"name": _split_name(p), "num_bytes": p.nbytes, "num_examples": p.rows}
                    for p in own
                ],
                "dataset_size": sum(p.nbytes for p in own),
            }
        )
    # `other` until the project's admin picks one (docs/EXPORTS.md, "hf_dataset")
    return {"license": "other", "configs": configs, "dataset_info": infos}


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md(value: Any) -> str:
    """A name or value as literal Markdown text: special characters escaped, on one line."""
    text = " ".join(str(value).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text) if text else "–"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md(cell) for cell in row) + " |" for row in rows]
    return lines


def dataset_card(options: ExportOptions, parts: Sequence[Part]) -> str:
    """The README.md of the layout: YAML front matter, then what the data is and how it was
    made (module docstring)."""
    project = options.project
    front = yaml.safe_dump(
        card_front_matter(parts), sort_keys=False, allow_unicode=True, default_flow_style=False
    )
    scores = [p for p in parts if p.config == SCORES]
    seen: dict[str, set[str]] = {}
    for part in scores:
        for key, values in part.seen.items():
            seen.setdefault(key, set()).update(values)
    campaigns_seen = {
        source.split(":", 1)[1]
        for source in seen.get("source", set())
        if source.startswith("campaign:")
    }
    judges_seen = {
        rater for part in scores if part.split == RaterKind.JUDGE for rater in part.seen["rater"]
    }
    lines = [
        "---",
        "# license: set the dataset's license before publishing it (e.g. cc-by-4.0)",
        front.rstrip("\n"),
        "---",
        "",
        f"# {md(project.name or project.slug)}: fine-grained scores of LLM responses",
        "",
        f"Exported from the flaskweb project `{project.slug}` on "
        f"{timezone.now().strftime('%Y-%m-%d %H:%M UTC')}: FLASK skill scores (1-5, or N/A) "
        "given by people and by LLM judges to the same responses.",
        "",
        "## Contents",
        "",
        *_table(
            ["config", "split", "rows", "what"],
            [
                (
                    part.config,
                    _split_name(part),
                    f"{part.rows:,}",
                    {
                        "human": "people's scores (campaigns and imported human scores)",
                        "judge": "LLM judges' scores (runs, one row per sample; imported outputs)",
                        PREFERENCES: "pairwise preference labels",
                    }[part.split],
                )
                for part in parts
            ],
        ),
        "",
        'Load it with `datasets.load_dataset("<this directory>")` (the `scores` config) or '
        '`datasets.load_dataset("<this directory>", "preferences")`.',
        "",
        "In `scores`, `score` is null and `is_na` true where the rater said N/A; "
        "`rubric_version` and `rubric_label` name the rubric a score was given under; "
        "`source` is `campaign:<name>`, `run:<id>` or `import:<id>`; times are UTC. The "
        "columns are those of the long export (flaskweb docs/EXPORTS.md).",
        "",
        "No person is named: people appear as `person-…` (adjudicators as `adjudicator-…`), "
        "the same pseudonym for the same person across this server's exports, and crowd "
        "worker ids are left out. Rationales are the annotators' own words: read them "
        "before publishing.",
        "",
    ]
    if not parts:
        lines += ["The export held no rows.", ""]
    if options.stored:
        lines += ["Filters of the export:", ""]
        lines += [f"- `{md(k)}`: {md(v)}" for k, v in options.stored.items()]
        lines.append("")
    if scores:
        lines += [
            f"Datasets: {', '.join(md(d) for d in sorted(seen['dataset']))}. "
            f"Systems: {len(seen['system'])}. Skills: {len(seen['skill'])}. "
            + " · ".join(f"{part.split} raters: {len(part.seen['rater'])}" for part in scores),
            "",
        ]
    lines += ["## Rubric versions", ""]
    labels = sorted(seen.get("rubric_label", set()))
    lines.append(
        "Rubric versions of the scores: " + ", ".join(md(label) for label in labels) + "."
        if labels
        else "No score names a rubric version (imported scores carry none)."
    )
    lines.append("")
    campaigns = [
        c
        for c in annotation_selectors.campaign_settings_for_project(project=project)
        if c["name"] in campaigns_seen
    ]
    lines += ["## Campaigns", ""]
    if campaigns:
        lines.append(
            "Annotators never see which system wrote a response, the judges' scores or other "
            "annotators' scores (blind by design); gold items, attention checks and hidden "
            "repeats are quality control and are not in the data."
        )
        lines.append("")
        lines += _table(
            [
                "campaign",
                "dataset",
                "mode",
                "overlap",
                "selection",
                "skills",
                "reference shown",
                "gold rate",
                "repeat rate",
                "screening",
                "rubrics pinned",
            ],
            [
                (
                    c["name"],
                    c["dataset__name"],
                    c["mode"],
                    c["overlap"],
                    c["selection"],
                    c["skill_mode"],
                    "yes" if c["show_reference"] else "no",
                    f"{c['gold_rate']:g}",
                    f"{c['repeat_rate']:g}",
                    "yes" if c["screening"] else "no",
                    "; ".join(f"{skill}: {label}" for skill, label in c["rubrics"].items()),
                )
                for c in campaigns
            ],
        )
    else:
        lines.append("No campaign's scores are in the export.")
    lines.append("")
    judges = [
        j
        for j in judging_selectors.judge_settings_for_project(project=project)
        if j["name"] in judges_seen
    ]
    lines += ["## Judges", ""]
    if judges:
        lines += _table(
            ["judge", "kind", "provider", "model", "temperature", "samples", "prompt", "reference"],
            [
                (
                    j["name"],
                    j["kind"] if not j["baseline"] else f"{j['kind']} ({j['baseline']})",
                    j["provider_name"] or "",
                    j["model"],
                    f"{j['temperature']:g}",
                    j["samples"],
                    f"{j['prompt_key']} v{j['prompt_version']}" if j["prompt_key"] else "",
                    "yes" if j["use_reference"] else "no",
                )
                for j in judges
            ],
        )
        lines.append("")
    imported = sorted(judges_seen - {j["name"] for j in judges})
    if imported:
        lines.append(
            "Judges known only from imported outputs (no configuration recorded): "
            + ", ".join(md(name) for name in imported)
            + "."
        )
        lines.append("")
    if not judges and not imported:
        lines += ["No judge's scores are in the export.", ""]
    lines += [
        "## License",
        "",
        "The `license` above is a placeholder (`other`): the project's admin sets it, and the "
        "terms of the responses' and instructions' sources, before the dataset is published.",
        "",
    ]
    return "\n".join(lines)


def front_matter_of(card: str) -> Mapping[str, Any]:
    """The YAML front matter of a card written by dataset_card (tests, tools)."""
    _, front, _ = card.split("---\n", 2)
    loaded: Mapping[str, Any] = yaml.safe_load(front)
    return loaded
