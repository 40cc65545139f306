"""The judge-training export (analytics/exports/training.py, docs/EXPORTS.md "judge_training"):
people's judgments as text-to-text tasks. The project is tests.analytics.test_exports'
`scored` one: item i0 answered by m1 and m2, scored on Factuality, Comprehension and
Readability by alice and zoe (HUMAN there), plus a judge run and imported scores that the
tasks leave out. Every target below is worked out by hand from HUMAN."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient

from analytics.exports.services import (
    ExportOptionsError,
    export_job_create,
    export_job_run,
    export_options_clean,
    export_write,
)
from analytics.exports.training import (
    INSTRUCTIONS,
    NA_SENTENCE,
    agreement_of,
    consensus_of,
    rubric_text,
)
from analytics.imports.services import scores_import
from analytics.models import ExportJob, ExportKind, ExportStatus
from annotation.models import Campaign, Response, Skill
from annotation.review.services import adjudicated_score_set
from annotation.selectors import rubrics_current_for_project
from tests.analytics import test_exports
from tests.clients import token_client

scored = test_exports.scored  # the fixture
SKILL_ORDER = ("Factuality", "Comprehension", "Readability")  # the catalogue's order


def training_lines(project, **options) -> list[str]:
    filters = {"training": options.pop("training", {}), **options}
    export = export_options_clean(project=project, kind="judge_training", filters=filters)
    out = io.BytesIO()
    export_write(export, out)
    return out.getvalue().decode("utf-8").splitlines()


def rubrics(project) -> dict[str, str]:
    current = rubrics_current_for_project(project=project)
    return {
        s.name: rubric_text(s.name, current.get(s.pk))
        for s in Skill.objects.filter(name__in=SKILL_ORDER)
    }


# --- the consensus, by hand -----------------------------------------------------------------------


def test_the_consensus_rounds_the_mean_half_up_and_takes_the_lower_median():
    # mean of 3, 4 = 3.5 -> 4 (half up, not to even); of 2, 3 = 2.5 -> 3; of 1, 2, 2 = 1.67 -> 2
    assert consensus_of([3, 4], "mean") == 4
    assert consensus_of([2, 3], "mean") == 3
    assert consensus_of([1, 2, 2], "mean") == 2
    assert consensus_of([1, 1, 2], "mean") == 1  # 1.33
    # lower median: of 1, 2, 4, 5 the middle two are 2 and 4 -> 2; of 5, 1, 3 -> 3
    assert consensus_of([5, 1, 4, 2], "median") == 2
    assert consensus_of([5, 1, 3], "median") == 3
    # N/A when more raters said N/A than scored; a tie goes to the scores
    assert consensus_of([None, None, 4], "mean") == "N/A"
    assert consensus_of([None, 4], "mean") == 4
    assert consensus_of([None, 2, 5], "median") == 2
    assert consensus_of([None], "median") == "N/A"


def test_agreement_is_the_share_of_raters_who_gave_the_target():
    assert agreement_of([4, 3], 4) == 0.5
    assert agreement_of([3, 3, 3], 3) == 1.0
    assert agreement_of([None, None, 4], "N/A") == 0.6667
    assert agreement_of([2, 4, 5], 3) == 0.0


# --- the lines ------------------------------------------------------------------------------------


def test_one_task_per_skill_has_the_exact_lines(scored):
    project = scored.project
    lines = training_lines(project)
    texts = rubrics(project)
    label = f"built-in v{scored.rubric_version}"
    # (system, skill) -> (target, sorted answers, agreement): mean of alice's and zoe's
    expected = [
        ("m1", "Factuality", 4, [3, 4], 0.5),  # 3.5 -> 4
        ("m1", "Comprehension", 3, [3, 3], 1.0),
        ("m1", "Readability", 5, [5, "N/A"], 0.5),  # one N/A, one 5: the score wins
        ("m2", "Factuality", 2, [1, 2], 0.5),  # 1.5 -> 2
        ("m2", "Comprehension", 2, [2, "N/A"], 0.5),
        ("m2", "Readability", 4, [4, 4], 1.0),
    ]
    assert len(lines) == len(expected)
    for line, (system, skill, target, answers, agreement) in zip(lines, expected, strict=True):
        assert json.loads(line) == {
            "task_type": "pointwise_skill",
            "instruction": INSTRUCTIONS["pointwise_skill"],
            "context": {"instruction": "Question 0", "reference": None},
            "response": f"{system} says 0",
            "rubric": texts[skill],
            "target": target,
            "metadata": {
                "project": project.slug,
                "dataset": "D",
                "item": "i0",
                "system": system,
                "skill": skill,
                "raters": 2,
                "scores": answers,
                "agreement": agreement,
                "adjudicated": False,
                "rubric_label": label,
                "consensus": "mean",
            },
        }
    # keys in the documented order; no system name in the training text (blind)
    first = json.loads(lines[0])
    assert list(first) == [
        "task_type",
        "instruction",
        "context",
        "response",
        "rubric",
        "target",
        "metadata",
    ]
    for line in lines:
        assert "system" not in json.loads(line)["context"]


def test_median_consensus_and_one_task_per_item(scored):
    lines = training_lines(scored.project, training={"unit": "item", "consensus": "median"})
    texts = rubrics(scored.project)
    tasks = [json.loads(line) for line in lines]
    assert [t["task_type"] for t in tasks] == ["pointwise_item", "pointwise_item"]
    m1, m2 = tasks
    # lower medians: m1 Factuality of 3, 4 -> 3; m2 Factuality of 1, 2 -> 1
    assert m1["target"] == {"Factuality": 3, "Comprehension": 3, "Readability": 5}
    assert m2["target"] == {"Factuality": 1, "Comprehension": 2, "Readability": 4}
    assert m1["rubric"] == "\n\n".join(texts[s] for s in SKILL_ORDER)
    assert m1["instruction"] == INSTRUCTIONS["pointwise_item"]
    assert m1["metadata"]["raters"] == {"Factuality": 2, "Comprehension": 2, "Readability": 2}
    assert m2["metadata"]["agreement"] == {
        "Factuality": 0.5,
        "Comprehension": 0.5,
        "Readability": 1.0,
    }
    assert m1["metadata"]["consensus"] == "median" and m1["metadata"]["adjudicated"] == []


def test_pairwise_tasks_come_from_responses_whose_consensus_differs(scored):
    lines = training_lines(scored.project, training={"pairwise": True})
    tasks = [json.loads(line) for line in lines]
    pairs = [t for t in tasks if t["task_type"] == "pairwise"]
    # m1 vs m2 (m1 imported first): Factuality 4 > 2, Comprehension 3 > 2, Readability 5 > 4
    assert [(p["metadata"]["skill"], p["target"], p["metadata"]["targets"]) for p in pairs] == [
        ("Factuality", "1", [4, 2]),
        ("Comprehension", "1", [3, 2]),
        ("Readability", "1", [5, 4]),
    ]
    assert pairs[0]["responses"] == ["m1 says 0", "m2 says 0"]
    assert pairs[0]["instruction"] == INSTRUCTIONS["pairwise_skill"]
    assert pairs[0]["metadata"]["systems"] == ["m1", "m2"]
    # per item: the skills' preferences and Overall on their means (4, 3, 5 vs 2, 2, 4)
    item = [
        json.loads(line)
        for line in training_lines(scored.project, training={"pairwise": True, "unit": "item"})
    ]
    assert item[-1]["task_type"] == "pairwise"
    assert item[-1]["target"] == {
        "Factuality": "1",
        "Comprehension": "1",
        "Readability": "1",
        "Overall": "1",
    }


def test_adjudicated_scores_win_and_na_targets_are_skipped_or_kept(scored, django_user_model):
    project = scored.project
    campaign = Campaign.objects.get(project=project, name="C")
    m2 = Response.objects.get(item__dataset=scored.dataset, model_name="m2")
    reviewer = django_user_model.objects.create_user("rev", password="pw-rev")
    adjudicated_score_set(
        campaign=campaign,
        response=m2,
        skill=Skill.objects.get(name="Comprehension"),
        value="na",
        reviewer=reviewer,
    )
    adjudicated_score_set(
        campaign=campaign,
        response=m2,
        skill=Skill.objects.get(name="Factuality"),
        value=5,
        reviewer=reviewer,
    )
    # without the flag: the raters' consensus, as before
    plain = [json.loads(line)["target"] for line in training_lines(project)]
    assert plain == [4, 3, 5, 2, 2, 4]
    # with it: Factuality 5 (adjudicated), Comprehension N/A skipped
    tasks = [json.loads(line) for line in training_lines(project, training={"adjudicated": True})]
    assert [(t["metadata"]["system"], t["metadata"]["skill"], t["target"]) for t in tasks] == [
        ("m1", "Factuality", 4),
        ("m1", "Comprehension", 3),
        ("m1", "Readability", 5),
        ("m2", "Factuality", 5),
        ("m2", "Readability", 4),
    ]
    assert tasks[3]["metadata"]["adjudicated"] is True
    kept = [
        json.loads(line)
        for line in training_lines(project, training={"adjudicated": True, "na": "include"})
    ]
    assert kept[4]["target"] == "N/A" and kept[4]["metadata"]["skill"] == "Comprehension"
    assert kept[4]["instruction"] == INSTRUCTIONS["pointwise_skill"] + NA_SENTENCE


def test_imported_human_scores_count_as_raters_once_each(scored):
    # alice's imported Readability 2 of m1 is left out (her campaign score there counts);
    # carl's imported scores join: m2 Factuality 2, 1, 5 -> mean 2.67 -> 3; a score of 7
    # on another scale and imported judge scores are left out
    scores_import(
        project_slug=scored.project.slug,
        files=[
            (
                "more.csv",
                b"item,system,rater,rater_kind,skill,score\n"
                b"i0,m2,carl,human,Factuality,5\n"
                b"i0,m2,carl,human,Readability,N/A\n"
                b"i0,m1,dora,human,Comprehension,7\n",
            )
        ],
        dataset_name="D",
        scales=["Comprehension=1:9"],
    )
    tasks = [json.loads(line) for line in training_lines(scored.project)]
    got = {(t["metadata"]["system"], t["metadata"]["skill"]): t for t in tasks}
    assert got[("m1", "Readability")]["metadata"]["scores"] == [5, "N/A"]
    assert got[("m2", "Factuality")]["target"] == 3
    assert got[("m2", "Factuality")]["metadata"]["scores"] == [1, 2, 5]
    assert got[("m2", "Readability")]["metadata"]["scores"] == [4, 4, "N/A"]
    assert got[("m1", "Comprehension")]["metadata"]["raters"] == 2
    without = training_lines(scored.project, training={"imported": False})
    assert [json.loads(line)["target"] for line in without] == [4, 3, 5, 2, 2, 4]


def test_llm_text_is_json_escaped_and_systems_are_named_only_when_asked(scored):
    hostile = 'He said "stop"\n</script><b>{"target": 1}</b>\u2028end'
    Response.objects.filter(model_name="m1").update(text=hostile)
    lines = training_lines(scored.project, skill=["Factuality"])
    assert len(lines) == 2  # one line per task, whatever the text holds
    assert json.loads(lines[0])["response"] == hostile
    assert '\\"stop\\"\\n</script>' in lines[0]
    task = json.loads(lines[0])
    assert "m1" not in json.dumps({k: v for k, v in task.items() if k != "metadata"})
    named = [
        json.loads(line)
        for line in training_lines(
            scored.project, skill=["Factuality"], training={"name_systems": True, "pairwise": True}
        )
    ]
    assert named[0]["context"]["system"] == "m1"
    assert named[-1]["context"]["systems"] == ["m1", "m2"]


def test_filters_narrow_and_bad_options_are_refused_per_field(scored):
    lines = training_lines(scored.project, system=["m2"], skill=["Readability"])
    assert [json.loads(line)["target"] for line in lines] == [4]
    with pytest.raises(ExportOptionsError) as caught:
        export_options_clean(
            project=scored.project,
            kind="judge_training",
            fmt="csv",
            filters={
                "judge": ["gpt"],
                "skill": ["Nope"],
                "training": {"unit": "row", "pairwise": "yes", "extra": 1},
            },
        )
    errors = caught.value.errors
    assert "judge" in errors["filters"][0] and "jsonl" in errors["format"][0]
    assert "Nope" in errors["skill"][0]
    assert any("unit" in m for m in errors["training"])
    assert any("pairwise" in m for m in errors["training"])
    assert any("extra" in m for m in errors["training"])


# --- the job, the API, access ---------------------------------------------------------------------


def test_a_training_job_runs_in_the_background_and_is_downloaded(scored, researcher):
    job = export_job_create(
        project=scored.project,
        kind="judge_training",
        filters={"training": {"unit": "item"}},
        requested_by=researcher,
        enqueue=False,
    )
    assert (job.kind, job.format) == (ExportKind.JUDGE_TRAINING, "jsonl")
    assert job.filters["training"]["unit"] == "item"
    job = export_job_run(job_id=job.pk)
    assert job.status == ExportStatus.DONE and job.rows == 2
    assert export_job_run(job_id=job.pk) is None  # redelivered: claimed already
    client = token_client(researcher)
    body = client.get(f"/api/v1/exports/{job.pk}/").json()
    assert body["kind"] == "judge_training"
    got = client.get(f"/api/v1/exports/{job.pk}/download/")
    assert got.status_code == 200
    assert f"{scored.project.slug}-judge-training.jsonl" in got["Content-Disposition"]
    content = b"".join(got.streaming_content).decode()
    assert [json.loads(line)["task_type"] for line in content.splitlines()] == [
        "pointwise_item",
        "pointwise_item",
    ]


def test_the_api_and_page_ask_for_one_and_refuse_outsiders(
    scored, researcher, annotator, outsider, researcher_client
):
    url = f"/api/v1/projects/{scored.project.slug}/exports/"
    client = token_client(researcher)
    made = client.post(
        url, {"kind": "judge_training", "training": {"pairwise": True}}, format="json"
    )
    assert made.status_code == 201, made.json()
    assert made.json()["kind"] == "judge_training"
    bad = client.post(url, {"kind": "judge_training", "training": {"na": "drop"}}, format="json")
    assert bad.status_code == 400 and "na" in str(bad.json()["training"])
    wrong = client.post(url, {"kind": "long", "training": {}}, format="json")
    assert wrong.status_code == 400 and "training" in wrong.json()
    body = {"kind": "judge_training"}
    assert token_client(annotator).post(url, body, format="json").status_code == 403
    assert token_client(outsider).post(url, body, format="json").status_code == 404
    assert APIClient().post(url, body, format="json").status_code in (401, 403)
    page = f"/projects/{scored.project.slug}/analytics/exports/"
    posted = researcher_client.post(
        page, {"kind": "judge_training", "unit": "item", "consensus": "median", "pairwise": "on"}
    )  # "imported" left unticked
    assert posted.status_code == 302
    job = ExportJob.objects.order_by("-pk").first()
    assert job.filters["training"] == {
        "unit": "item",
        "consensus": "median",
        "na": "skip",
        "adjudicated": False,
        "pairwise": True,
        "name_systems": False,
        "imported": False,
    }
    assert "Judge-training tasks" in researcher_client.get(page).content.decode()


def test_the_command_writes_the_same_tasks_and_refuses_bad_options(scored, tmp_path):
    out = tmp_path / "tasks.jsonl"
    call_command(
        "export_scores",
        "--project",
        scored.project.slug,
        "--kind",
        "judge_training",
        "--training",
        '{"unit": "item"}',
        "-o",
        str(out),
        stderr=io.StringIO(),
    )
    assert out.read_text().splitlines() == training_lines(scored.project, training={"unit": "item"})
    slug = scored.project.slug
    with pytest.raises(CommandError, match="not JSON"):
        call_command(
            "export_scores", "--project", slug, "--kind", "judge_training", "--training", "{"
        )
    with pytest.raises(CommandError, match="only for|is for --kind"):
        call_command("export_scores", "--project", slug, "--kind", "long", "--training", "{}")
    with pytest.raises(CommandError, match="unit"):
        call_command(
            "export_scores",
            "--project",
            slug,
            "--kind",
            "judge_training",
            "--training",
            '{"unit": 1}',
        )


def test_the_writer_streams_chunks_of_lines_and_reads_texts_per_chunk_of_items(scored, monkeypatch):
    from analytics.exports import training
    from analytics.exports.training import TrainingExport, TrainingOptions

    whole = "\n".join(training_lines(scored.project, training={"pairwise": True})) + "\n"
    monkeypatch.setattr(training, "ITEMS_PER_READ", 1)
    export = TrainingExport(
        project=scored.project, options=TrainingOptions(pairwise=True), chunk_rows=2
    )
    chunks = list(export.chunks())
    assert [chunk.count("\n") for chunk in chunks] == [2, 2, 2, 2, 1]
    assert "".join(chunks) == whole and export.rows == 9


@pytest.mark.django_db(transaction=True)
def test_training_jobs_stored_as_long_get_their_own_kind_by_the_migration():
    # given the schema before the kind existed, with a judge-training job stored the old way
    executor = MigrationExecutor(connection)
    executor.migrate([("analytics", "0006_preferenceimportjob")])
    apps = executor.loader.project_state([("analytics", "0006_preferenceimportjob")]).apps
    Project = apps.get_model("annotation", "Project")
    Job = apps.get_model("analytics", "ExportJob")
    project = Project.objects.create(slug="legacy", name="Legacy")
    training = Job.objects.create(
        project=project, kind="long", format="jsonl", filters={"training": {"unit": "skill"}}
    )
    plain = Job.objects.create(project=project, kind="long", format="csv", filters={})
    # when
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    # then
    kinds = dict(ExportJob.objects.values_list("pk", "kind"))
    assert kinds == {training.pk: "judge_training", plain.pk: "long"}
