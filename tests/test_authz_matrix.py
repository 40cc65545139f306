"""Who may use what: every URL of the project against every persona (docs/ACCESS.md).

RULES below is the one table of expected statuses, keyed by URL name (namespace:name). Each
row gives the status of a GET and, for endpoints that change state, of a POST, for the six
personas in the order of `Statuses`:

- anonymous: not logged in (pages redirect to the login page, the API answers 401);
- annotator: an annotator of the project, in the campaign's pool, holding a lease;
- other_researcher: a researcher of another project (this project is 404 to them);
- researcher: a researcher of the project;
- project_admin: a member with the project role admin, not site staff;
- admin: site staff (superuser).

A route without a rule fails `test_every_url_has_a_rule_and_every_rule_a_url`, and so does a
rule whose route is gone. A POST that is refused (401, 403, 404, 405 or the login redirect)
must change nothing: the row counts and states of the main tables are compared around it.

The objects the URLs point at are built once for the module through the project's services
and rolled back at its end; every test runs in a savepoint of its own, so an accepted POST
(starting a run, submitting scores) is undone before the next case.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.authtoken.models import Token

from analytics.exports.services import export_job_create, export_job_run
from analytics.imports.services import scores_import
from analytics.models import (
    ExportJob,
    ExportStatus,
    ImportedPreference,
    ImportedScore,
    PreferenceImport,
    PreferenceImportJob,
    ReportSnapshot,
    ScoreImport,
    ScoreImportJob,
    SelectionBatch,
    SelectionPlan,
)
from analytics.report.snapshots import (
    report_snapshot_compute,
    snapshot_params,
    snapshot_request,
)
from annotation.campaigns.services import campaign_activate, campaign_create, gold_task_set
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    AdjudicatedScore,
    AnnotatorExpertise,
    Assignment,
    Campaign,
    CampaignSample,
    CampaignTranslation,
    Dataset,
    DatasetUpload,
    GoldPreference,
    GoldScore,
    HumanScore,
    Item,
    MembershipChange,
    MetadataProposal,
    Project,
    ProjectMembership,
    ProjectRole,
    ReannotationRequest,
    Response,
    Rubric,
    Skill,
    StudyLink,
    Task,
    UploadSource,
    UploadStatus,
)
from annotation.selectors import task_skills
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
)
from annotation.services.catalogue import skill_create
from annotation.services.metadata import metadata_dataset_snapshot
from annotation.services.projects import membership_set, project_create
from annotation.services.reannotation import responses_reannotate
from annotation.study.services import study_link_create
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeOutputImportJob,
    JudgeRun,
    JudgeScore,
    Judgment,
    PromptTemplate,
    RunStatus,
)
from judging.services import (
    judge_config_create,
    judge_response,
    judge_run_create,
    judge_run_start,
    prompt_template_create,
)
from judging.services.metadata import metadata_run_create
from tests.judging.providers import llm_fields


class Statuses(NamedTuple):
    anonymous: int
    annotator: int
    other_researcher: int
    researcher: int
    project_admin: int
    admin: int


pytestmark = pytest.mark.django_db

PERSONAS = Statuses._fields
S = Statuses


@dataclass(frozen=True)
class Rule:
    """Expected statuses of one URL. `pk` names the World attribute a <pk> kwarg stands for
    (other kwargs go by name: KWARG_OBJECTS); `query` is appended to the URL; `body` names
    a POST body of BODIES, for endpoints that validate the body before the access check
    (an empty body would stop at the validation, never reaching the rule under test);
    `xfail` maps "METHOD persona" to the reason of a known bug, with the correct status in
    the row."""

    get: Statuses
    post: Statuses | None = None
    patch: Statuses | None = None
    delete: Statuses | None = None
    pk: str = ""
    query: str = ""
    body: str = ""
    xfail: dict[str, str] = field(default_factory=dict)
    # the seventh persona, a reviewer of the project ("METHOD": status); a method without
    # an entry takes `reviewer_default`'s status
    reviewer: dict[str, int] = field(default_factory=dict)


def reviewer_default(statuses: Statuses) -> int:
    """A reviewer is a member of the project without a staff role and in no campaign's pool:
    refused like an annotator, except for an annotator's own work (someone else's campaign
    or lease to the reviewer: 404, as to the staff)."""
    if 200 <= statuses.annotator < 300 and statuses.researcher == 404:
        return 404
    return statuses.annotator


# The columns: anonymous, annotator, other researcher, researcher, project admin, site admin.
# Rows that recur: (302, 403, 404, 200, 200, 200) the project's researchers and admins;
# (302, 403, 404, 403, 200, 200) project admins only; (302, 200, 404, 404, 404, 404) the
# caller's own annotation work; (405, ...) a POST-only page answering GET; the API answers
# 401 instead of the login redirect, and its 405 comes after authentication.

# fmt: off
RULES: dict[str, Rule] = {
    # --- annotation pages ------------------------------------------------------------------
    #              anon ann  oth  res  padm site
    "annotation:home":
        Rule(get=S(302, 200, 200, 200, 200, 200)),
    # site admins create projects (an empty form: 200 with its errors)
    "annotation:project-create":
        Rule(get=S(302, 403, 403, 403, 403, 200),
            post=S(302, 403, 403, 403, 403, 200)),
    "annotation:project-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "annotation:upload-create":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    # members: the staff read the list, project admins change it (an empty form: 200 with
    # its errors; an empty change: back to the list)
    "annotation:member-list":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 403, 200, 200)),
    "annotation:member-update":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 403, 302, 302)),
    "annotation:skill-add":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    "annotation:rubric-import":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    "annotation:dataset-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="dataset"),
    # metadata verification (docs/METADATA.md): the staff; an empty verdict is a form with
    # its error (200, nothing written)
    "annotation:metadata-verify-page":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="dataset"),
    "annotation:metadata-snapshot":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="dataset"),
    "annotation:metadata-verify":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 200, 200, 200), pk="proposal"),
    # applying verified metadata to a running campaign: the campaign's staff (an empty form:
    # 200 with the reason, nothing applied)
    "annotation:metadata-apply-page":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:metadata-apply":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:item-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="item"),
    "annotation:upload-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="upload"),
    "annotation:catalogue":
        Rule(get=S(302, 200, 200, 200, 200, 200)),
    "annotation:rubric-edit":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), query="project=demo-project"),
    # the annotator's own pages: a campaign or lease that is not yours is not found
    "annotation:my-campaigns":
        Rule(get=S(302, 200, 200, 200, 200, 200)),
    "annotation:annotate":
        Rule(get=S(302, 200, 404, 404, 404, 404), pk="campaign"),
    "annotation:annotate-submit":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 200, 404, 404, 404, 404), pk="assignment"),
    "annotation:annotate-skip":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 200, 404, 404, 404, 404), pk="assignment"),
    "annotation:campaign-list":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "annotation:campaign-create":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    "annotation:campaign-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:campaign-update":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    # pace and cost: an empty POST is a form with errors (200, nothing saved)
    "annotation:campaign-pace":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:campaign-activate":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:campaign-status":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:campaign-gold-set":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    # an empty removal names no task: back to the page with the reason
    "annotation:campaign-gold-remove":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:campaign-expertise-set":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    # screening (docs/SCREENING.md): the campaign's staff (an empty settings or task form:
    # 200 with its errors; an empty removal: back to the page)
    "annotation:screening":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:screening-settings":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:screening-task-set":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:screening-task-remove":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:screening-results-csv":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    # review: the staff and the project's reviewers; the settings are the staff's (an
    # empty adjudication or settings form: 200 with its errors)
    "annotation:review-project":
        Rule(get=S(302, 403, 404, 200, 200, 200), reviewer={"GET": 200}),
    "annotation:review-queue":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="campaign", reviewer={"GET": 200}),
    "annotation:review-response":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign",
            reviewer={"GET": 200, "POST": 200}),
    "annotation:review-settings":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:review-summary":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="campaign", reviewer={"GET": 200}),
    # study links (docs/CROWD.md): the campaign's staff manage them (an empty settings form
    # saves empty settings; an empty link form: 200 with its errors; an empty status: back
    # to the page). The workers' pages need a study session: without one, 403 when signed
    # out (the session ended), 404 when signed in; the entry link without its platform
    # parameters is a 400 for everyone.
    # a campaign's languages (annotation/languages/): the project's researchers and admins;
    # an empty POST saves nothing new and goes back to the page (302)
    "annotation:campaign-languages":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:campaign-translation":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:campaign-translation-delete":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    # the annotators' language picker: anyone may ask; an empty POST names no language (400)
    "annotation:language-pick":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(400, 400, 400, 400, 400, 400)),
    "annotation:campaign-study":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:campaign-study-link-create":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation:campaign-study-link-status":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    # the approval page; an empty rules form keeps every rule off (the counts at defaults)
    "annotation:campaign-study-participants":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    "annotation:study-entry":
        Rule(get=S(400, 400, 400, 400, 400, 400)),
    # continuing on another device needs a visit of the link first: without one, 400
    "annotation:study-continue":
        Rule(get=S(400, 400, 400, 400, 400, 400),
            post=S(400, 400, 400, 400, 400, 400)),
    "annotation:study-resume":
        Rule(get=S(403, 404, 404, 404, 404, 404)),
    "annotation:study-consent":
        Rule(get=S(403, 404, 404, 404, 404, 404),
            post=S(403, 404, 404, 404, 404, 404)),
    "annotation:study-instructions":
        Rule(get=S(403, 404, 404, 404, 404, 404)),
    "annotation:study-finish":
        Rule(get=S(403, 404, 404, 404, 404, 404),
            post=S(403, 404, 404, 404, 404, 404)),
    # --- judging pages ---------------------------------------------------------------------
    #              anon ann  oth  res  padm site
    "judging:judge-list":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "judging:judge-create":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    "judging:template-list":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "judging:template-create":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    "judging:template-import":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    "judging:template-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="template"),
    "judging:judge-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="judge"),
    "judging:run-create":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), pk="judge"),
    "judging:run-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="run"),
    "judging:run-start":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="pending_run"),
    "judging:run-pause":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="pending_run"),
    "judging:run-resume":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="pending_run"),
    "judging:run-cancel":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="pending_run"),
    "judging:judgment-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="judgment"),
    # an empty probe form is refused (400); an empty families form changes nothing (302)
    "judging:probe-create":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 400, 400, 400), pk="run"),
    "judging:families":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 302, 302, 302)),
    # metadata runs: the staff (an empty form: 200 with its errors; an empty action: back
    # to the run page)
    "judging:metadata-run-create":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), pk="dataset"),
    "judging:metadata-run-detail":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="metadata_run"),
    "judging:metadata-run-action":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="metadata_run"),
    # --- analytics pages -------------------------------------------------------------------
    #              anon ann  oth  res  padm site
    "analytics:dashboard":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "analytics:exports":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200)),
    "analytics:export-download":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="export"),
    "analytics:disagreements":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "analytics:disagreements-reannotate":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302)),
    "analytics:response-scores":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="response"),
    # the drill-down (docs/DRILL_DOWN.md); an empty POST redirects back with the message
    "analytics:items":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "analytics:items-reannotate":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302)),
    "analytics:items-gold":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302)),
    "analytics:report-refresh":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302)),
    "analytics:snapshot-status":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    "analytics:report-section":
        Rule(get=S(302, 403, 404, 200, 200, 200), query="resamples=0"),
    # the judge trust page reads the snapshot; an empty calibrate POST is sent back to it
    "analytics:trust":
        Rule(get=S(302, 403, 404, 200, 200, 200), query="resamples=0"),
    "analytics:trust-calibrate":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302)),
    # the preference page reads the snapshot only
    "analytics:preferences":
        Rule(get=S(302, 403, 404, 200, 200, 200), query="resamples=0"),
    # a POST the form refuses is answered 400 here (the page's own convention)
    "analytics:score-import":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 400, 400, 400)),
    "analytics:score-import-job":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="score_import_job"),
    "analytics:preference-import":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 400, 400, 400)),
    "analytics:preference-import-job":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="preference_import_job"),
    # the judge leaderboard across projects: any admin or researcher of some project (each
    # sees only their projects' rows); evaluation cards: the project's staff
    "analytics:judge-leaderboard":
        Rule(get=S(302, 403, 200, 200, 200, 200)),
    "analytics:judge-card":
        Rule(get=S(302, 403, 404, 302, 302, 302), query="judge=baseline-judge-secret&format=md"),
    "analytics:judge-card-md":
        Rule(get=S(302, 403, 404, 200, 200, 200), query="judge=baseline-judge-secret"),
    "analytics:judge-card-json":
        Rule(get=S(302, 403, 404, 200, 200, 200), query="judge=baseline-judge-secret"),
    # metadata agreement (docs/METADATA.md): the dataset's staff
    "analytics:metadata-agreement":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="dataset"),
    "analytics:metadata-agreement-csv":
        Rule(get=S(302, 403, 404, 200, 200, 200), pk="dataset"),
    # active selection (docs/CAMPAIGNS.md): the campaign's staff; an empty plan form is 200
    # with its errors, an empty draw (no plan, no batch named) goes back to the page
    "analytics:active-selection":
        Rule(get=S(302, 403, 404, 200, 200, 200),
            post=S(302, 403, 404, 200, 200, 200), pk="campaign"),
    "analytics:active-selection-draw":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 403, 404, 302, 302, 302), pk="campaign"),
    # how many labels are enough (docs/LABEL_PLANNING.md): the project's staff
    "analytics:label-planning":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    # judge configurations compared (docs/JUDGE_COMPARISON.md): the project's staff
    "analytics:judge-compare":
        Rule(get=S(302, 403, 404, 200, 200, 200)),
    # --- authentication and Django admin ---------------------------------------------------
    #              anon ann  oth  res  padm site
    "login":
        Rule(get=S(200, 200, 200, 200, 200, 200),
            post=S(200, 200, 200, 200, 200, 200)),
    # everyone signed in manages their own API token (an empty POST names no action: 400)
    "account-token":
        Rule(get=S(302, 200, 200, 200, 200, 200),
            post=S(302, 400, 400, 400, 400, 400)),
    "logout":
        Rule(get=S(405, 405, 405, 405, 405, 405),
            post=S(302, 302, 302, 302, 302, 302)),
    # non-staff users are sent to the admin's own login page
    "admin:index":
        Rule(get=S(302, 302, 302, 302, 302, 200),
            post=S(302, 302, 302, 302, 302, 200)),
    # --- annotation API --------------------------------------------------------------------
    #              anon ann  oth  res  padm site
    # only site admins create projects (an empty body: 400)
    "annotation-api:api-project-list":
        Rule(get=S(401, 200, 200, 200, 200, 200),
            post=S(401, 403, 403, 403, 403, 400), body="json"),
    "annotation-api:api-dataset-list":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    "annotation-api:api-dataset":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="dataset"),
    "annotation-api:api-item-list":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="dataset"),
    "annotation-api:api-item":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="item"),
    "annotation-api:api-skill-list":
        Rule(get=S(401, 200, 200, 200, 200, 200)),
    "annotation-api:api-upload-create":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 202, 202, 202), body="upload"),
    "annotation-api:api-upload-detail":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="upload"),
    # campaign management: an empty body is a 400 once access is granted; an empty PATCH
    # changes nothing (200); activating an active campaign again is idempotent (200)
    "annotation-api:api-campaign-list":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            post=S(401, 403, 404, 400, 400, 400), body="json"),
    "annotation-api:api-campaign":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            patch=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation-api:api-campaign-activate":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation-api:api-campaign-assignments":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation-api:api-campaign-participants":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation-api:api-campaign-status":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400), pk="campaign", body="json"),
    # gold tasks: an empty body is a 400 once access is granted; the world's gold task,
    # answered by no one, is removed (204)
    "annotation-api:api-campaign-gold":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            post=S(401, 403, 404, 400, 400, 400), pk="campaign", body="json"),
    "annotation-api:api-campaign-translations":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation-api:api-campaign-translation":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            delete=S(401, 403, 404, 204, 204, 204), pk="campaign"),
    "annotation-api:api-campaign-gold-task":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            delete=S(401, 403, 404, 204, 204, 204), pk="campaign"),
    # screening: an empty PATCH changes nothing (200)
    "annotation-api:api-screening":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            patch=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation-api:api-screening-results":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    # membership: the staff read; project admins add (400 without a body), change (400)
    # and remove (204: bob leaves the project)
    "annotation-api:api-member-list":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            post=S(401, 403, 404, 403, 400, 400), body="json"),
    "annotation-api:api-member":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            patch=S(401, 403, 404, 403, 400, 400),
            delete=S(401, 403, 404, 403, 204, 204)),
    "annotation-api:api-annotator-campaign-list":
        Rule(get=S(401, 200, 200, 200, 200, 200)),
    "annotation-api:api-assignment-next":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 200, 404, 404, 404, 404)),
    "annotation-api:api-annotator-progress":
        Rule(get=S(401, 200, 404, 404, 404, 404)),
    "annotation-api:api-campaign-cost":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="campaign"),
    "annotation-api:api-assignment-submit":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 201, 404, 404, 404, 404), body="scores"),
    "annotation-api:api-assignment-skip":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 200, 404, 404, 404, 404), body="skip"),
    # review: the staff and the project's reviewers (an empty body: 400)
    "annotation-api:api-review-queue":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="campaign", reviewer={"GET": 200}),
    "annotation-api:api-metadata-proposals":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="dataset"),
    "annotation-api:api-metadata-verify":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400), pk="proposal", body="json"),
    "annotation-api:api-review-adjudicate":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400), pk="campaign", body="json",
            reviewer={"GET": 405, "POST": 400}),
    # --- judging API -----------------------------------------------------------------------
    #              anon ann  oth  res  padm site
    "judging-api:provider-list":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    "judging-api:judge-list":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    "judging-api:judge-create":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400)),
    "judging-api:judge-detail":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="judge"),
    "judging-api:run-estimate":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400), pk="judge"),
    "judging-api:run-create":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400), pk="judge"),
    "judging-api:metadata-run-create":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400), pk="dataset", body="json"),
    "judging-api:metadata-run-detail":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="metadata_run"),
    # a pending metadata run cannot be paused (409); it can be resumed (started) and cancelled
    "judging-api:metadata-run-pause":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 409, 409, 409), pk="metadata_run"),
    "judging-api:metadata-run-resume":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 200, 200, 200), pk="metadata_run", body="json"),
    "judging-api:metadata-run-cancel":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 200, 200, 200), pk="metadata_run"),
    "judging-api:run-detail":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="run"),
    "judging-api:run-start":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 200, 200, 200), pk="pending_run"),
    # a pending run cannot be paused: 409 once access is granted
    "judging-api:run-pause":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 409, 409, 409), pk="pending_run"),
    "judging-api:run-resume":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 200, 200, 200), pk="pending_run"),
    "judging-api:run-cancel":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 200, 200, 200), pk="pending_run"),
    "judging-api:judgment-list":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="run"),
    "judging-api:judge-output-import":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400)),
    "judging-api:judge-output-import-job":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="output_import_job"),
    "judging-api:run-scores":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="run"),
    # the run scores responses one by one: 400 "not pairwise" once access is granted
    "judging-api:run-pairwise":
        Rule(get=S(401, 403, 404, 400, 400, 400), pk="run"),
    "judging-api:run-probes":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            post=S(401, 403, 404, 400, 400, 400), pk="run"),
    "judging-api:families":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            patch=S(401, 403, 404, 200, 200, 200)),
    # --- analytics API ---------------------------------------------------------------------
    #              anon ann  oth  res  padm site
    "analytics-report":
        Rule(get=S(401, 403, 404, 200, 200, 200), query="resamples=0"),
    "analytics-api:report-refresh":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 202, 202, 202), query="resamples=0"),
    "analytics-api:report-snapshot":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    # no judge posted: 400 once access is granted
    "analytics-api:trust-calibrated-copy":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400)),
    "analytics-api:export-list":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            post=S(401, 403, 404, 400, 400, 400)),
    "analytics-api:export-detail":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="export"),
    "analytics-api:export-download":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="export"),
    "analytics-api:disagreements":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    "analytics-api:items":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    "analytics-api:reannotation":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400)),
    # access is checked before the upload is validated (an empty POST is a 400 for staff)
    "analytics-api:score-import":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400)),
    "analytics-api:score-import-list":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    "analytics-api:score-import-job":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="score_import_job"),
    # access is checked before the upload is validated (an empty POST is a 400 for staff)
    "analytics-api:preference-import":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400)),
    "analytics-api:preference-import-list":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    "analytics-api:preference-import-job":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="preference_import_job"),
    "analytics-api:judge-leaderboard":
        Rule(get=S(401, 403, 200, 200, 200, 200)),
    "analytics-api:judge-card":
        Rule(get=S(401, 403, 404, 200, 200, 200), query="judge=baseline-judge-secret"),
    "analytics-api:metadata-agreement":
        Rule(get=S(401, 403, 404, 200, 200, 200), pk="dataset"),
    # active selection: an empty plan or draw is a 400 once access is granted (the world's
    # campaign has no plan), and so is an empty change of the plan it lacks
    "analytics-api:active-selection":
        Rule(get=S(401, 403, 404, 200, 200, 200),
            post=S(401, 403, 404, 400, 400, 400),
            patch=S(401, 403, 404, 400, 400, 400), pk="campaign", body="json"),
    "analytics-api:active-selection-draw":
        Rule(get=S(401, 405, 405, 405, 405, 405),
            post=S(401, 403, 404, 400, 400, 400), pk="campaign", body="json"),
    "analytics-api:label-planning":
        Rule(get=S(401, 403, 404, 200, 200, 200)),
    # no judges chosen: 400 once access is granted
    "analytics-api:judge-comparison":
        Rule(get=S(401, 403, 404, 400, 400, 400)),
    # the OpenAPI schema describes the API, holds no data, and is public
    "api-schema":
        Rule(get=S(200, 200, 200, 200, 200, 200)),
    "api-docs":
        Rule(get=S(200, 200, 200, 200, 200, 200)),
    "favicon":
        Rule(get=S(200, 200, 200, 200, 200, 200)),
    # --- operations (docs/OPERATIONS.md) ---------------------------------------------------
    # the health probes are public and hold no data; /metrics: a site admin, or Prometheus
    # with its bearer token (none is configured here); anyone else is told nothing is there
    "healthz":
        Rule(get=S(200, 200, 200, 200, 200, 200)),
    "readyz":
        Rule(get=S(200, 200, 200, 200, 200, 200)),
    "metrics":
        Rule(get=S(404, 404, 404, 404, 404, 200)),
}
# fmt: on

#: URL kwargs other than <pk>, by name: the World attribute they stand for.
KWARG_OBJECTS = {
    "slug": "project",
    "skill_id": "skill",
    "campaign_id": "campaign",
    "assignment_id": "assignment",
    "username": "member",
    "response_id": "response",
    "snapshot_id": "snapshot",
    "name": "section",
    "link_id": "study_link",
    "token": "study_link",
    "task_id": "gold_task",
    "language": "translation",
}

#: The methods a rule may have a row for.
METHODS = ("GET", "POST", "PATCH", "DELETE")

#: Statuses that refuse a request; so does a redirect to a login page.
REFUSED = {401, 403, 404, 405}


# --- the routes ----------------------------------------------------------------------------------


def _walk(patterns, prefix: str = "", namespace: str = "") -> Iterator[tuple[str, str, str]]:
    """(namespace, name, route) of every URL pattern, included ones too."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            inner = namespace
            if pattern.namespace:
                inner = f"{namespace}:{pattern.namespace}" if namespace else pattern.namespace
            yield from _walk(pattern.url_patterns, route, inner)
        elif isinstance(pattern, URLPattern):
            name = pattern.name or ""
            yield namespace, (f"{namespace}:{name}" if namespace and name else name), route


@functools.cache
def project_routes() -> dict[str, str]:
    """Every route of the project by name: route. Django admin's own pages are left out
    but its index (which is enough to show who gets in), and so are static and media files.
    Unnamed routes are keyed by their route, so they fail the rule check too."""
    routes: dict[str, str] = {}
    skipped = tuple(p.lstrip("/") for p in (settings.STATIC_URL, settings.MEDIA_URL) if p)
    for namespace, name, route in _walk(get_resolver().url_patterns):
        if namespace == "admin" and name != "admin:index":
            continue
        if skipped and route.startswith(skipped):
            continue
        key = name or f"<unnamed> {route}"
        assert key not in routes, f"two routes are named {key}: {routes[key]} and {route}"
        routes[key] = route
    return routes


def test_every_url_has_a_rule_and_every_rule_a_url():
    routes = project_routes()
    missing = sorted(set(routes) - set(RULES))
    stale = sorted(set(RULES) - set(routes))
    assert not missing, f"routes without an access rule (add them to RULES): {missing}"
    assert not stale, f"rules for routes that no longer exist: {stale}"


# --- the objects the URLs point at ---------------------------------------------------------------

SKILLS = ["Factuality", "Comprehension", "Readability"]
# Never shown to annotators: none of the texts below contains them, so a hit is a leak.
MODELS = ("alpha-model-secret", "beta-model-secret")
LLM_JUDGE = "llm-judge-secret"
BASELINE_JUDGE = "baseline-judge-secret"
OTHER_ANNOTATOR = "bob-other-annotator"


@dataclass
class World:
    users: dict[str, Any]
    sessions: dict[str, str]  # persona: session key, logged in
    project: Project
    other_project: Project
    dataset: Dataset
    item: Item
    response: Response
    upload: DatasetUpload
    skill: Skill
    campaign: Campaign
    assignment: Assignment  # the annotator's active lease
    other_assignment: Assignment  # the other annotator's active lease
    judge: JudgeConfig
    run: JudgeRun  # done, with judgments
    pending_run: JudgeRun
    judgment: Judgment
    template: PromptTemplate
    export: ExportJob
    score_import: ScoreImport
    score_import_job: ScoreImportJob
    preference_import_job: PreferenceImportJob
    output_import_job: JudgeOutputImportJob
    member: Any  # bob, an annotator of the project
    snapshot: ReportSnapshot  # the project's report with resamples=0, computed
    section: Any  # a dashboard section's name, as .pk
    study_link: StudyLink | None = None  # the campaign's generic study link
    metadata_run: Any = None  # a pending metadata run of the LLM judge over the dataset
    proposal: Any = None  # the first item's "dataset" metadata proposal
    gold_task: Task | None = None  # the annotator's leased response, also a gold task
    translation: Any = None  # the campaign's texts in Spanish (annotation/languages/)


def _dataset(project: Project, folder: Path) -> DatasetUpload:
    rows = [
        {
            "id": f"i{i}",
            "instruction": f"Question number {i}",
            "reference": f"The reference answer to question {i}",
            "skills": SKILLS,
            "domains": ["History"],
            "difficulty": 2,
            "responses": [
                {"model": model, "text": f"Answer {n} to question {i}"}
                for n, model in enumerate(MODELS)
            ],
        }
        for i in range(2)
    ]
    path = folder / "demo.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    upload = dataset_upload_create(
        project=project,
        dataset_name="Demo set",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload


def _submit(assignment: Assignment, user, value: int = 4) -> None:
    scores = [ScoreInput(s.skill_id, value) for s in task_skills(assignment=assignment)]
    human_score_submit(assignment_id=assignment.pk, annotator=user, scores=scores, active_ms=900)


def _build(folder: Path) -> World:
    user_model = get_user_model()

    def user(username: str, **extra):
        return user_model.objects.create_user(username=username, password="pw", **extra)

    project = project_create(slug="demo-project", name="Demo project")
    other_project = project_create(slug="other-project", name="Other project")
    users = {
        "annotator": user("alice"),
        "other_researcher": user("olga"),
        "researcher": user("rita"),
        "project_admin": user("paula"),
        "admin": user("admin", is_staff=True, is_superuser=True),
        "reviewer": user("rex-reviewer"),
    }
    bob = user(OTHER_ANNOTATOR)
    membership_set(project=project, user=users["annotator"], role=ProjectRole.ANNOTATOR)
    membership_set(project=project, user=bob, role=ProjectRole.ANNOTATOR)
    membership_set(project=project, user=users["researcher"], role=ProjectRole.RESEARCHER)
    membership_set(project=project, user=users["project_admin"], role=ProjectRole.ADMIN)
    membership_set(project=project, user=users["reviewer"], role=ProjectRole.REVIEWER)
    membership_set(
        project=other_project, user=users["other_researcher"], role=ProjectRole.RESEARCHER
    )

    upload = _dataset(project, folder)
    dataset = upload.dataset
    skill = skill_create(
        project=project,
        name="Tone",
        criterion="Is the tone right for the question?",
        anchors=[f"level {n}" for n in range(1, 6)],
    )

    # a campaign of the annotator and bob: bob has submitted one task and holds a second,
    # the annotator holds one; a researcher sent bob's scored response back for more
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Scoring round",
        overlap=2,
        annotators=[users["annotator"], bob],
        created_by=users["researcher"],
    )
    campaign_activate(campaign=campaign)
    scored = assignment_claim_next(campaign=campaign, annotator=bob)
    _submit(scored, bob)
    other_assignment = assignment_claim_next(campaign=campaign, annotator=bob)
    assignment = assignment_claim_next(campaign=campaign, annotator=users["annotator"])
    assert scored and other_assignment and assignment
    responses_reannotate(
        campaign=campaign,
        response_ids=[scored.task.response_id],
        extra=1,
        requested_by=users["researcher"],
    )

    # an offline baseline judge run to the end, and an LLM judge's pending run
    baseline = judge_config_create(
        project=project, name=BASELINE_JUDGE, kind=JudgeKind.BASELINE, baseline="token-f1"
    )
    run = judge_run_create(judge=baseline, dataset=dataset)
    judge_run_start(run=run)
    for response_id in Response.objects.filter(item__dataset=dataset).values_list("pk", flat=True):
        judge_response(run_id=run.pk, response_id=response_id)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE, run.status
    judge = judge_config_create(
        project=project,
        name=LLM_JUDGE,
        kind=JudgeKind.LLM,
        **llm_fields("http://127.0.0.1:9/v1"),
        model="judge-model",
        use_reference=False,
    )
    pending_run = judge_run_create(judge=judge, dataset=dataset)
    template, _ = prompt_template_create(
        project=project,
        key="terse",
        name="Terse",
        user_template="{skills}\n{instruction}\n{response}",
        created_by=users["researcher"],
    )

    export = export_job_create(
        project=project, kind="long", requested_by=users["researcher"], enqueue=False
    )
    export = export_job_run(job_id=export.pk)
    assert export.status == ExportStatus.DONE, export.error
    batch = scores_import(
        project_slug=project.slug,
        files=[("ext.csv", _score_file("i0", MODELS[0], 3))],
        dataset_name=dataset.name,
    ).batch

    snapshot = snapshot_request(project=project, params=snapshot_params(resamples=0))[0]
    snapshot = report_snapshot_compute(snapshot_id=snapshot.pk)
    assert snapshot is not None and snapshot.status == "done", snapshot and snapshot.error

    item = dataset.items.order_by("pk").first()
    return World(
        users=users,
        sessions={persona: _session_key(u) for persona, u in users.items()},
        project=project,
        other_project=other_project,
        dataset=dataset,
        item=item,
        response=Response.objects.get(pk=scored.task.response_id),
        upload=upload,
        skill=skill,
        campaign=campaign,
        assignment=assignment,
        other_assignment=other_assignment,
        judge=judge,
        run=run,
        pending_run=pending_run,
        judgment=Judgment.objects.filter(run=run).order_by("pk").first(),
        template=template,
        export=export,
        score_import=batch,
        score_import_job=ScoreImportJob.objects.create(
            project=project, options={"project": project.slug, "dataset": dataset.name}
        ),
        preference_import_job=PreferenceImportJob.objects.create(
            project=project, options={"project": project.slug, "dataset": dataset.name}
        ),
        output_import_job=JudgeOutputImportJob.objects.create(project=project, dataset=dataset),
        member=bob,
        snapshot=snapshot,
        section=SimpleNamespace(pk="agreement"),
        study_link=study_link_create(campaign=campaign, platform="generic"),
        metadata_run=metadata_run_create(judge=judge, dataset=dataset),
        proposal=_dataset_proposal(dataset, item),
        # its normal task is leased, so it stays: no claim or lease of the world changes
        gold_task=gold_task_set(
            campaign=campaign,
            response=assignment.task.response,
            scores={s.skill_id: 3 for s in task_skills(assignment=assignment)},
        ),
        translation=CampaignTranslation.objects.create(
            campaign=campaign, language="es", instructions="Lee la respuesta entera."
        ),
    )


def _dataset_proposal(dataset: Dataset, item: Item) -> MetadataProposal:
    metadata_dataset_snapshot(dataset=dataset)
    return MetadataProposal.objects.get(item=item, origin="dataset")


def _session_key(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def _score_file(item: str, system: str, score: int) -> bytes:
    return (
        "item,system,rater,rater_kind,skill,score\n"
        f"{item},{system},ext-rater,judge,Factuality,{score}\n"
    ).encode()


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[World]:
    """The objects of every URL, built once in a transaction rolled back after the module.
    Marked like a TestCase's own block, so durable services may run inside it."""
    media = tmp_path_factory.mktemp("authz-media")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=media):
        atomic = transaction.atomic()
        atomic._from_testcase = True
        atomic.__enter__()
        try:
            # an earlier transactional test may have truncated the built-in catalogue
            from tests.conftest import _ensure_catalogue

            _ensure_catalogue()
            yield _build(tmp_path_factory.mktemp("authz-data"))
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _media_tmp():
    """The module's media folder stays in force (the export file lives there)."""


@pytest.fixture(autouse=True)
def _no_login_throttle(settings):
    """The login rule posts an empty form once per persona, all from one address: the
    failed sign-in throttle (flaskweb/security.py) is not what this module tests."""
    settings.LOGIN_FAILURES_PER_USER = settings.LOGIN_FAILURES_PER_ADDRESS = 10**6


# --- the requests --------------------------------------------------------------------------------


def _body_upload(w: World) -> dict:
    line = {
        "id": "api-1",
        "instruction": "A new question",
        "skills": SKILLS,
        "responses": [{"model": MODELS[0], "text": "A new answer"}],
    }
    upload = SimpleUploadedFile("api.jsonl", (json.dumps(line) + "\n").encode())
    return {"data": {"project": w.project.slug, "dataset": "From the API", "files": [upload]}}


def _body_scores(w: World) -> dict:
    scores = [{"skill_id": s.skill_id, "score": 4} for s in task_skills(assignment=w.assignment)]
    return {"data": {"scores": scores}, "content_type": "application/json"}


def _body_skip(w: World) -> dict:
    return {"data": {"reason": "the question is unclear"}, "content_type": "application/json"}


def _body_score_file(w: World) -> dict:
    upload = SimpleUploadedFile("more.csv", _score_file("i1", MODELS[1], 2))
    return {"data": {"files": [upload], "dataset": w.dataset.name}}


BODIES: dict[str, Callable[[World], dict]] = {
    "json": lambda w: {"data": {}, "content_type": "application/json"},
    "upload": _body_upload,
    "scores": _body_scores,
    "skip": _body_skip,
    "score_file": _body_score_file,
}

#: The main tables, counted around every refused POST.
COUNTED = (
    Project,
    ProjectMembership,
    Skill,
    Rubric,
    Dataset,
    DatasetUpload,
    Item,
    Response,
    Campaign,
    Task,
    Assignment,
    HumanScore,
    GoldScore,
    GoldPreference,
    AnnotatorExpertise,
    ReannotationRequest,
    JudgeConfig,
    JudgeRun,
    Judgment,
    JudgeScore,
    ScoreImport,
    ImportedScore,
    ScoreImportJob,
    PreferenceImport,
    ImportedPreference,
    PreferenceImportJob,
    ExportJob,
    Token,
    MembershipChange,
    AdjudicatedScore,
    CampaignSample,
    SelectionPlan,
    SelectionBatch,
)


#: Columns a POST could flip in place without adding a row, per table.
STATE_COLUMNS = {
    ProjectMembership: ("role",),
    Campaign: ("status", "overlap", "review_spread", "adaptive_spread"),
    Task: ("kind", "overlap", "assigned"),
    Assignment: ("status", "flagged"),
    JudgeRun: ("status", "budget"),
    ExportJob: ("status",),
}


@functools.cache
def _state_sql() -> str:
    parts = [f'(SELECT count(*) FROM "{model._meta.db_table}")' for model in COUNTED]
    for model, names in STATE_COLUMNS.items():
        columns = [model._meta.get_field(name).column for name in ("id", *names)]
        row = " || ',' || ".join(f"coalesce(\"{column}\"::text, '')" for column in columns)
        parts.append(f"(SELECT string_agg({row}, ';' ORDER BY id) FROM \"{model._meta.db_table}\")")
    return "SELECT " + ", ".join(parts)


def _state() -> dict[str, Any]:
    """Row counts of the main tables and the states a POST could flip in place (one
    statement: it runs around each of some 250 POSTs)."""
    with connection.cursor() as cursor:
        cursor.execute(_state_sql())
        values = cursor.fetchone()
    labels = [model._meta.label for model in COUNTED]
    labels += [f"{model._meta.label} states" for model in STATE_COLUMNS]
    return dict(zip(labels, values, strict=True))


def _url(name: str, rule: Rule, w: World) -> str:
    kwargs: dict[str, Any] = {}
    for kwarg in re.findall(r"<(?:\w+:)?(\w+)>", project_routes()[name]):
        attribute = rule.pk if kwarg == "pk" else KWARG_OBJECTS.get(kwarg, "")
        assert attribute, f"{name}: which object is <{kwarg}>? (Rule.pk or KWARG_OBJECTS)"
        target = getattr(w, attribute)
        kwargs[kwarg] = {
            "slug": "slug",
            "username": "username",
            "token": "token",
            "language": "language",
        }.get(kwarg, "pk")
        kwargs[kwarg] = getattr(target, kwargs[kwarg])
    url = reverse(name, kwargs=kwargs)
    return f"{url}?{rule.query}" if rule.query else url


def _client(w: World, persona: str) -> Client:
    """A client of the persona, on a session logged in once for the module (a logout in
    one test deletes it only until that test's rollback)."""
    client = Client()
    if persona != "anonymous":
        client.cookies[settings.SESSION_COOKIE_NAME] = w.sessions[persona]
    return client


def _is_login_redirect(response) -> bool:
    return response.status_code == 302 and "login" in response.get("Location", "")


def _cases() -> Iterator:
    for name, rule in RULES.items():
        for method in METHODS:
            statuses = getattr(rule, method.lower())
            if statuses is None:
                continue
            for persona, expected in zip(PERSONAS, statuses, strict=True):
                marks = []
                reason = rule.xfail.get(f"{method} {persona}")
                if reason:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                yield pytest.param(
                    name, method, persona, expected, marks=marks, id=f"{name} {method} {persona}"
                )
            expected = rule.reviewer.get(method, reviewer_default(statuses))
            yield pytest.param(name, method, "reviewer", expected, id=f"{name} {method} reviewer")


@pytest.mark.parametrize(("name", "method", "persona", "expected"), list(_cases()))
def test_access(world, name, method, persona, expected):
    # given
    rule = RULES[name]
    url = _url(name, rule, world)
    client = _client(world, persona)
    # when
    if method == "GET":
        response = client.get(url)
    else:
        before = _state()
        body = BODIES[rule.body](world) if rule.body else {}
        if method != "POST":  # the API's JSON methods; no body is an empty JSON object
            body.setdefault("content_type", "application/json")
        response = getattr(client, method.lower())(url, **body)
    if response.streaming:  # read to the end: the test client then closes it safely
        b"".join(response.streaming_content)
    # then
    status = response.status_code
    assert status == expected, f"{method} {url} as {persona}: {status}, the rule says {expected}"
    if persona == "anonymous" and status == 302:
        assert _is_login_redirect(response), response["Location"]
    if method != "GET" and (status in REFUSED or _is_login_redirect(response)):
        assert _state() == before, f"a refused POST {url} changed the data"


def _missing_method_cases() -> Iterator:
    for name, rule in RULES.items():
        for method in METHODS[1:]:
            if getattr(rule, method.lower()) is None and name != "admin:index":
                yield pytest.param(name, method, id=f"{name} {method}")


@pytest.mark.parametrize(("name", "method"), list(_missing_method_cases()))
def test_a_route_without_a_rule_for_a_method_refuses_it(world, name, method):
    """A route whose view starts to accept POST, PATCH or DELETE needs a row for it (and
    its refusal checks). (The Django admin's index is the admin's own business.)"""
    url = _url(name, RULES[name], world)
    response = getattr(_client(world, "admin"), method.lower())(url)
    assert response.status_code == 405, f"{method} {url}: {response.status_code}"


# --- what annotators see -------------------------------------------------------------------------


def test_the_annotator_pages_never_show_other_people_judges_or_models(world):
    """The blind-annotation rule: the scoring page (full and as the htmx card), the task
    list, their API twins and every other route the annotator may open carry no other
    annotator's name, no judge name and no model name."""
    # given
    client = _client(world, "annotator")
    annotate = reverse("annotation:annotate", args=[world.campaign.pk])
    own_text = world.assignment.task.response.text
    pages = {
        "annotate (htmx)": lambda: client.get(annotate, headers={"HX-Request": "true"}),
        "api next": lambda: client.post(
            reverse("annotation-api:api-assignment-next", args=[world.campaign.pk])
        ),
    }
    for name, rule in RULES.items():
        if rule.get.annotator == 200:
            pages[name] = functools.partial(client.get, _url(name, rule, world))
    # when
    bodies = {}
    for page, call in pages.items():
        response = call()
        assert response.status_code == 200, page
        bodies[page] = response.content.decode()
    # then
    assert own_text in bodies["annotation:annotate"]
    assert own_text in bodies["annotate (htmx)"]
    assert world.campaign.name in bodies["annotation:my-campaigns"]
    forbidden = [OTHER_ANNOTATOR, LLM_JUDGE, BASELINE_JUDGE, "ext-rater", *MODELS]
    staff = _client(world, "researcher")
    staff_pages = ("analytics:response-scores", "judging:judge-list", "annotation:campaign-detail")
    seen = "".join(staff.get(_url(n, RULES[n], world)).content.decode() for n in staff_pages)
    assert [word for word in forbidden if word not in seen] == []  # the words are real
    for page, body in bodies.items():
        leaked = [word for word in forbidden if word in body]
        assert not leaked, f"{page} shows {leaked}"


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("annotation:annotate-submit", ""),
        ("annotation:annotate-skip", ""),
        ("annotation-api:api-assignment-submit", "scores"),
        ("annotation-api:api-assignment-skip", "skip"),
    ],
)
def test_an_annotator_cannot_touch_another_annotators_lease(world, name, body):
    # given bob's active lease, and a body that would be valid for it
    other = world.other_assignment
    url = reverse(name, args=[other.pk])
    data = BODIES[body](world) if body else {"data": {"reason": "unclear"}}
    if body == "scores":
        scores = [{"skill_id": s.skill_id, "score": 4} for s in task_skills(assignment=other)]
        data = {"data": {"scores": scores}, "content_type": "application/json"}
    before = _state()
    # when
    response = _client(world, "annotator").post(url, **data)
    # then
    assert response.status_code == 404
    assert _state() == before


@pytest.mark.parametrize(
    ("persona", "expected"), list(S(401, 403, 404, 202, 202, 202)._asdict().items())
)
def test_the_score_import_api_checks_access_on_a_valid_file(world, persona, expected):
    # given a file that imports cleanly
    url = reverse("analytics-api:score-import", args=[world.project.slug])
    before = _state()
    # when
    response = _client(world, persona).post(url, **_body_score_file(world))
    # then
    assert response.status_code == expected
    if expected != 202:
        assert _state() == before


def test_a_skill_of_another_project_is_not_found_from_ones_own(world):
    """A researcher may not learn that a skill id exists in a project they are not in."""
    url = reverse("annotation:rubric-edit", args=[world.skill.pk])
    client = _client(world, "other_researcher")
    assert client.get(f"{url}?project={world.other_project.slug}").status_code == 404
    assert client.get(url).status_code == 404
