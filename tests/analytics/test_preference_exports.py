"""The preference export (CSV and JSONL through the export writer and the export_scores
command) and its import back (import_preferences): a round trip into another project gives
the same preference figures; bad rows are refused with their line and nothing is written."""

from __future__ import annotations

import csv
import io
import json
from io import StringIO

import pytest
from django.core.management import call_command

from analytics.exports.preferences import PREFERENCE_COLUMNS
from analytics.exports.services import ExportOptionsError, export_options_clean, export_write
from analytics.imports.preferences import PreferenceImportRejected, preferences_import
from analytics.models import ExportKind, ImportedPreference, PreferenceImport
from analytics.report.selectors import project_report
from annotation.models import Skill
from annotation.services.projects import project_create
from tests.analytics.test_preference_report import MODELS, make_preferences
from tests.annotation.test_assignments import make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def labelled(project, tmp_path, django_user_model):
    people = [django_user_model.objects.create_user(f"r{i}", password="x") for i in range(3)]
    dataset = make_dataset(project, tmp_path, items=4, models=MODELS)
    skill = Skill.objects.get(name="Factuality", project__isnull=True)
    make_preferences(project, dataset, people, skill=skill)
    return project


def _export(project, fmt, **filters) -> str:
    options = export_options_clean(
        project=project, kind=ExportKind.PREFERENCES, fmt=fmt, filters=filters
    )
    out = io.BytesIO()
    export_write(options, out)
    return out.getvalue().decode("utf-8")


def _other_project(tmp_path):
    other = project_create(slug="other-project", name="Other")
    (tmp_path / "other").mkdir()
    make_dataset(other, tmp_path / "other", items=4, models=MODELS)
    return other


def test_the_export_has_one_row_per_label_in_both_formats(labelled):
    text = _export(labelled, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == PREFERENCE_COLUMNS
    assert len(rows) == 3 * 4 * 3 * 2
    assert {r["skill"] for r in rows} == {"Factuality", "Overall"}
    assert {r["shown_order"] for r in rows} == {"ab", "ba"}
    assert {r["campaign"] for r in rows} == {"Pairs"} and {r["dataset"] for r in rows} == {"D"}
    assert "m<b>3</b>" in {r["model_b"] for r in rows}
    lines = [json.loads(line) for line in _export(labelled, "jsonl").splitlines()]
    assert len(lines) == len(rows)
    assert lines[0]["strength"] in (1, 2) and lines[0]["rationale"].startswith("because")
    only = list(csv.DictReader(io.StringIO(_export(labelled, "csv", system=["m1", "m2"]))))
    assert {(r["model_a"], r["model_b"]) for r in only} == {("m1", "m2")}
    with pytest.raises(ExportOptionsError, match="written as csv or jsonl"):
        export_options_clean(project=labelled, kind="preferences", fmt="xlsx")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_export_then_import_into_another_project_gives_the_same_figures(labelled, tmp_path, fmt):
    other = _other_project(tmp_path)
    data = _export(labelled, fmt).encode()
    result = preferences_import(project=other, data=data, name=f"prefs.{fmt}")
    assert result.batch.labels_created == 3 * 4 * 3 * 2
    mine = project_report(project=labelled, resamples=50)["preferences"]
    theirs = project_report(project=other, resamples=50)["preferences"]
    assert theirs == mine
    # exported again from the other project: the same labels (source: the campaign's name)
    again = list(csv.DictReader(io.StringIO(_export(other, "csv"))))
    first = list(csv.DictReader(io.StringIO(_export(labelled, "csv"))))
    drop = ("project", "submitted_at")

    def key(row):
        return tuple(v for k, v in row.items() if k not in drop)

    assert sorted(map(key, again)) == sorted(map(key, first))
    # the same bytes again: nothing written
    repeat = preferences_import(project=other, data=data, name="prefs.again")
    assert repeat.already_imported and repeat.batch.pk == result.batch.pk
    assert ImportedPreference.objects.filter(project=other).count() == 3 * 4 * 3 * 2


def test_the_commands_export_and_import_preferences(labelled, tmp_path):
    other = _other_project(tmp_path)
    path = tmp_path / "prefs.csv"
    call_command(
        "export_scores",
        "--project",
        labelled.slug,
        "--kind",
        "preferences",
        "--output",
        str(path),
        stderr=StringIO(),
    )
    out = StringIO()
    call_command("import_preferences", str(path), "--project", other.slug, stdout=out)
    assert "72 new labels" in out.getvalue()
    # a file with problems: exit status 2, every problem with its line, nothing written
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "dataset,item,model_a,model_b,rater,skill,choice,strength,shown_order\n"
        "D,i0,m1,m2,x,Overall,a,3,ab\n"
        "D,i0,m1,m1,x,Overall,maybe,,sideways\n"
        "D,i9,m1,m2,x,Nonsense,b,,\n"
        "D,i1,m1,m2,x,Overall,a,,\n"
        "D,i1,m2,m1,x,Overall,b,,\n"
    )
    err = StringIO()
    with pytest.raises(SystemExit) as stopped:
        call_command("import_preferences", str(bad), "--project", other.slug, stderr=err)
    assert stopped.value.code == 2
    assert "line 2: strength '3' is not 1 (slightly) or 2 (much)" in err.getvalue()
    assert "nothing was written" in err.getvalue()
    assert ImportedPreference.objects.filter(project=other).count() == 72


def test_bad_rows_are_refused_with_their_line_and_nothing_is_written(labelled, tmp_path):
    other = _other_project(tmp_path)
    data = (
        b"dataset,item,model_a,model_b,rater,skill,choice,strength,shown_order\n"
        b"D,i0,m1,m2,x,Overall,a,3,ab\n"
        b"D,i0,m1,m1,x,Overall,maybe,,sideways\n"
        b"D,i9,m1,m2,x,Nonsense,b,,\n"
        b"D,i1,m1,m2,x,Overall,a,,\n"
        b"D,i1,m2,m1,x,Overall,b,,\n"
        b"D,i2,m1,m2,x,Overall,a,,\n"
    )
    with pytest.raises(PreferenceImportRejected) as caught:
        preferences_import(project=other, data=data, name="bad.csv")
    problems = caught.value.lines
    assert "line 2: strength '3' is not 1 (slightly) or 2 (much)" in problems
    assert "line 3: choice 'maybe' is not one of a, b, tie, both_bad" in problems
    assert "line 3: model_a and model_b are the same system" in problems
    assert "line 3: shown_order 'sideways' is not ab, ba or empty" in problems
    assert "line 4: skill 'Nonsense' is not a skill of the project" in problems
    assert any(
        p.startswith("line 6: 'x' labelled this pair on Overall already (line 5)") for p in problems
    )
    assert not any(p.startswith("line 7") for p in problems)
    assert not ImportedPreference.objects.exists() and not PreferenceImport.objects.exists()
    missing = b"dataset,item,model_a,model_b,rater,choice\nD,i9,m1,m2,x,a\n"
    with pytest.raises(PreferenceImportRejected) as caught:
        preferences_import(project=other, data=missing, name="m.csv")
    assert caught.value.lines == [
        "line 2: no response of 'm1' to item 'i9' in dataset 'D' of the project",
        "line 2: no response of 'm2' to item 'i9' in dataset 'D' of the project",
    ]
    with pytest.raises(PreferenceImportRejected, match="1 problem"):
        preferences_import(project=other, data=b"item,model_a\n", name="h.csv")
    with pytest.raises(PreferenceImportRejected) as caught:
        preferences_import(project=other, data=b'{"item": 1\n', name="j.jsonl")
    assert caught.value.lines[0].startswith("line 1: not valid JSON")


def test_a_label_stored_before_is_unchanged_or_refused_never_overwritten(labelled, tmp_path):
    other = _other_project(tmp_path)
    first = b"dataset,item,model_a,model_b,rater,choice\nD,i0,m1,m2,x,a\n"
    preferences_import(project=other, data=first, name="1.csv")
    # the same label with A and B the other way round: unchanged
    same = b"dataset,item,model_a,model_b,rater,choice,rationale\nD,i0,m2,m1,x,b,\n"
    assert preferences_import(project=other, data=same, name="2.csv").batch.labels_unchanged == 1
    changed = b"dataset,item,model_a,model_b,rater,choice\nD,i0,m1,m2,x,b\n"
    with pytest.raises(PreferenceImportRejected, match="1 problem"):
        preferences_import(project=other, data=changed, name="3.csv")
    assert ImportedPreference.objects.get(project=other).choice == "a"
