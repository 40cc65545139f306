"""Scores brought in from outside (crowd exports, other tools, published ratings) for
agreement and human-judge correlation, and the scale each skill is scored on.

Invariants the database holds:
- a rater (of one kind) scores a response on a skill at most once;
- a score is either N/A (no value) or a value, never both or neither;
- a project declares at most one scale per skill, with low < high;
- the same input bytes are imported into a project at most once.

A skill without a SkillScale row is scored on the default scale: integers 1 to 5.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from annotation.models import Campaign, Dataset, PairChoice, Project, Response, Skill
from flaskweb.db import TimestampedModel
from flaskweb.jobs import ImportJob
from judging.models import JudgeRun

#: The scale of every skill that has no SkillScale row.
DEFAULT_LOW, DEFAULT_HIGH, DEFAULT_CONTINUOUS = 1.0, 5.0, False


class RaterKind(models.TextChoices):
    HUMAN = "human", "Human"
    JUDGE = "judge", "Judge"


class ScoreImport(TimestampedModel):
    """One successful import of long-format score files (rejected imports leave no row)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="+")
    # [{"name", "format", "sha256", "bytes", "rows"}], in the order given
    files = models.JSONField(default=list, blank=True)
    # of the bytes: one file's own hash; several files: hash of their sorted hashes
    input_sha256 = models.CharField(max_length=64)
    rows_read = models.PositiveIntegerField(default=0)
    scores_created = models.PositiveIntegerField(default=0)
    scores_unchanged = models.PositiveIntegerField(default=0)
    items_created = models.PositiveIntegerField(default=0)
    responses_created = models.PositiveIntegerField(default=0)
    # {"skills": {name: {"low", "high", "continuous"}}, "judge_scale": "skill" | "raw"}
    scales = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # created skills, raters per kind, N/A count, rows per kind
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # makes "same bytes again" a no-op even when two imports race
            models.UniqueConstraint(
                fields=["project", "input_sha256"], name="scoreimport_unique_input"
            ),
        ]

    def __str__(self) -> str:
        return f"score import {self.pk} ({self.input_sha256[:12]})"


class ImportedScore(models.Model):
    """One rater's score of one response on one skill, as imported."""

    batch = models.ForeignKey(ScoreImport, on_delete=models.CASCADE, related_name="scores")
    # no own index: (project, skill, rater_kind) leads with project
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    # no own index: the unique constraint leads with response
    response = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="+")
    rater = models.CharField(max_length=200)
    rater_kind = models.CharField(max_length=10, choices=RaterKind.choices)
    value = models.FloatField(null=True, blank=True)  # None: N/A
    is_na = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["response", "skill", "rater", "rater_kind"], name="importedscore_unique"
            ),
            models.CheckConstraint(
                condition=Q(is_na=True, value__isnull=True) | Q(is_na=False, value__isnull=False),
                name="importedscore_na_xor_value",
            ),
            models.CheckConstraint(
                condition=Q(rater_kind__in=RaterKind.values), name="importedscore_kind_valid"
            ),
        ]
        indexes = [
            # analytics reads one skill's human or judge scores of a project at a time
            models.Index(
                fields=["project", "skill", "rater_kind"], name="importedscore_proj_skill_kind"
            ),
        ]

    def __str__(self) -> str:
        shown = "N/A" if self.is_na else self.value
        return f"{self.rater_kind}:{self.rater} {self.response_id}/{self.skill_id}={shown}"


class PreferenceImport(TimestampedModel):
    """One successful import of long-format preference labels (analytics.imports.preferences;
    rejected imports leave no row)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=300, blank=True)  # the file's name, as given
    input_sha256 = models.CharField(max_length=64)
    rows_read = models.PositiveIntegerField(default=0)
    labels_created = models.PositiveIntegerField(default=0)
    labels_unchanged = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "input_sha256"], name="preferenceimport_unique_input"
            ),
        ]

    def __str__(self) -> str:
        return f"preference import {self.pk} ({self.input_sha256[:12]})"


class ImportedPreference(models.Model):
    """One rater's imported preference between two responses to one item on one skill
    (`skill` null: overall), in the A/B terms of the file (A = `response_a`)."""

    batch = models.ForeignKey(
        PreferenceImport, on_delete=models.CASCADE, related_name="preferences"
    )
    # no own index: importedpreference_project leads with project
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    response_a = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    response_b = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    skill = models.ForeignKey(
        Skill, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    rater = models.CharField(max_length=200)
    choice = models.CharField(max_length=10, choices=PairChoice.choices)
    strength = models.PositiveSmallIntegerField(null=True, blank=True)  # 1 slightly, 2 much
    rationale = models.TextField(blank=True)
    b_left = models.BooleanField(null=True, blank=True)  # None: the shown order is unknown
    time_ms = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=200, blank=True)  # the file's campaign column

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["response_a", "response_b", "skill", "rater"],
                condition=Q(skill__isnull=False),
                name="importedpreference_unique_skill",
            ),
            models.UniqueConstraint(
                fields=["response_a", "response_b", "rater"],
                condition=Q(skill__isnull=True),
                name="importedpreference_unique_overall",
            ),
            models.CheckConstraint(
                condition=Q(choice__in=PairChoice.values), name="importedpreference_choice_valid"
            ),
            models.CheckConstraint(
                condition=Q(strength__isnull=True) | Q(strength__gte=1, strength__lte=2),
                name="importedpreference_strength_valid",
            ),
            models.CheckConstraint(
                condition=~Q(response_a=F("response_b")), name="importedpreference_distinct"
            ),
        ]
        indexes = [models.Index(fields=["project", "rater"], name="importedpreference_project")]

    def __str__(self) -> str:
        return f"{self.rater} {self.response_a_id}/{self.response_b_id}={self.choice}"


class SkillScale(models.Model):
    """A non-default scale of a skill in a project. No row: integers 1 to 5."""

    # no own index: the unique constraint leads with project
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="+")
    low = models.FloatField()
    high = models.FloatField()
    continuous = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "skill"], name="skillscale_unique"),
            models.CheckConstraint(condition=Q(low__lt=F("high")), name="skillscale_low_lt_high"),
        ]

    def __str__(self) -> str:
        kind = "continuous" if self.continuous else "integer"
        return f"{self.skill_id}: {self.low:g}-{self.high:g} {kind}"


# --- exports ------------------------------------------------------------------------------------


class ExportKind(models.TextChoices):
    LONG = "long", "Long table (one row per score)"
    FLASK_REVIEW = "flask_review", "FLASK review file (one judge)"
    WIDE = "wide", "Wide table (one column per rater)"
    PREFERENCES = "preferences", "Preferences (one row per pairwise label)"
    JUDGE_TRAINING = "judge_training", "Judge-training tasks (people's judgments)"
    HF_DATASET = "hf_dataset", "Hugging Face dataset (Parquet files and a dataset card, zipped)"


class ExportFormat(models.TextChoices):
    CSV = "csv", "CSV"
    JSONL = "jsonl", "JSON Lines"
    PARQUET = "parquet", "Parquet"
    ZIP = "zip", "Zip archive"


class ExportStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    EXPIRED = "expired", "Expired (file deleted)"


class ExportJob(TimestampedModel):
    """The job row of one export of a project's scores (analytics/exports.py): claimed
    pending -> running by a conditional update, finished done (with its file) or failed
    (with the error). Formats: docs/EXPORTS.md."""

    # no own index: exportjob_project_created leads with project
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=ExportKind.choices)
    format = models.CharField(max_length=10, choices=ExportFormat.choices)
    # {"skill": [...], "rater_kind": "", "judge": [...], "campaign": "", "dataset": "",
    #  "system": [...], "run": id or None}, as cleaned by analytics.exports.export_options_clean
    filters = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=10, choices=ExportStatus.choices, default=ExportStatus.PENDING
    )
    file = models.FileField(upload_to="exports/%Y/%m/", blank=True, max_length=300)
    rows = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ExportStatus.values), name="exportjob_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=ExportKind.values), name="exportjob_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(format__in=ExportFormat.values), name="exportjob_format_valid"
            ),
        ]
        indexes = [
            # the exports page and API list a project's jobs, newest first
            models.Index(fields=["project", "-created_at"], name="exportjob_project_created"),
            # the stale-job check looks for old running jobs
            models.Index(fields=["status", "started_at"], name="exportjob_status_started"),
        ]

    def __str__(self) -> str:
        return f"export {self.pk} ({self.kind}, {self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in {ExportStatus.DONE, ExportStatus.FAILED}

    @property
    def filters_shown(self) -> list[str]:
        """The filters as "name: value, value" labels (for the exports page)."""
        shown = []
        for name, value in (self.filters or {}).items():
            if isinstance(value, dict):  # a judge-training export's options
                value = [f"{key}={json.dumps(v)}" for key, v in value.items()]
            values = value if isinstance(value, list) else [value]
            shown.append(f"{name}: {', '.join(str(v) for v in values)}")
        return shown


# --- import jobs --------------------------------------------------------------------------


class ScoreImportJob(ImportJob):
    """The job row of one score import started from the page or the API
    (analytics/import_jobs.py): the uploads are stored, then a worker claims the row
    pending -> running and runs analytics.imports.scores_import from the stored files. It
    ends succeeded (with its ScoreImport, or the earlier one for the same bytes), rejected
    (with its problems; nothing written) or failed (with the error)."""

    # no own index: scoreimportjob_project_created leads with project. None until the job
    # has made the project a site admin asked it to create.
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    batch = models.ForeignKey(
        ScoreImport, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta(ImportJob.Meta):
        constraints = [ImportJob.status_constraint("scoreimportjob_status_valid")]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="scoreimportjob_project_created"),
            # the stale-job check looks for old running jobs
            models.Index(fields=["status", "started_at"], name="scoreimportjob_status_started"),
        ]

    def __str__(self) -> str:
        return f"score import job {self.pk} ({self.status})"


class PreferenceImportJob(ImportJob):
    """The job row of one preference-label import started from the page or the API
    (analytics/imports/jobs.py): the upload is stored, then a worker claims the row
    pending -> running and runs analytics.imports.preferences_import from the stored file.
    It ends succeeded (with its PreferenceImport, or the earlier one for the same bytes),
    rejected (with its problems; nothing written) or failed (with the error)."""

    # no own index: prefimportjob_project_created leads with project
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    batch = models.ForeignKey(
        PreferenceImport, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta(ImportJob.Meta):
        constraints = [ImportJob.status_constraint("prefimportjob_status_valid")]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="prefimportjob_project_created"),
            # the stale-job check looks for old running jobs
            models.Index(fields=["status", "started_at"], name="prefimportjob_status_started"),
        ]

    def __str__(self) -> str:
        return f"preference import job {self.pk} ({self.status})"


# --- report snapshots ---------------------------------------------------------------------------


class SnapshotStatus(models.TextChoices):
    PENDING = "pending", "Waiting for a worker"
    RUNNING = "running", "Computing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


#: A snapshot in one of these is being computed (or is about to be): one per key at a time.
IN_FLIGHT = (SnapshotStatus.PENDING, SnapshotStatus.RUNNING)


class ReportSnapshot(TimestampedModel):
    """One computation of a project's analytics report (project + filters + resamples +
    compared judge pairs, together `params`, hashed into `key`) by a worker on the
    `analytics` queue (analytics/report/snapshots.py). Pages and the API serve the latest
    done snapshot of a key at once; a refresh adds a new row, and at most one row per key is
    pending or running (the constraint below makes a second request find the first).

    `watermark` says what the inputs were when the computation started: {"as_of": ISO time,
    "human": rows, "judge": rows, "judges": names, "responses": n} — the page counts what
    changed after `as_of`. `stale` is set once scores changed after it (beat, or a page view
    that saw the change). The report itself and what the dashboard draws from it are stored
    apart, one SnapshotPart each, so a page reads only what it shows."""

    # no own index: snapshot_project_key_done leads with project
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=64)
    # {"skills", "judges", "systems", "domains", "difficulties", "resamples", "compare",
    #  "compare_all"}: lists sorted, as analytics.report.snapshots.snapshot_params cleans them
    params = models.JSONField(default=dict)
    # no filters, the default resamples and pairs: the one beat keeps fresh
    is_default = models.BooleanField(default=False)
    status = models.CharField(
        max_length=10, choices=SnapshotStatus.choices, default=SnapshotStatus.PENDING
    )
    stale = models.BooleanField(default=False)
    progress = models.FloatField(default=0.0)  # 0 to 1
    phase = models.CharField(max_length=200, blank=True)
    watermark = models.JSONField(default=dict, blank=True)
    # "requested" by a person, "default" (first view), "beat" (stale refresh)
    reason = models.CharField(max_length=20, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    size_bytes = models.PositiveBigIntegerField(default=0)  # the report's JSON, uncompressed
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=SnapshotStatus.values), name="reportsnapshot_status_valid"
            ),
            # a refresh while one is computing finds that one (deduplicated)
            models.UniqueConstraint(
                fields=["project", "key"],
                condition=Q(status__in=["pending", "running"]),
                name="reportsnapshot_one_in_flight",
            ),
        ]
        indexes = [
            # the latest done snapshot of a key
            models.Index(
                fields=["project", "key", "status", "-finished_at"],
                name="snapshot_project_key_done",
            ),
            # the health check looks for old running ones; beat for stale default ones
            models.Index(fields=["status", "started_at"], name="snapshot_status_started"),
        ]

    def __str__(self) -> str:
        return f"report snapshot {self.pk} ({self.status})"

    @property
    def is_in_flight(self) -> bool:
        return self.status in IN_FLIGHT


class SnapshotPart(models.Model):
    """One stored part of a snapshot, zlib-compressed JSON text (key order kept, floats
    exact): "report" (what `analytics_report` prints) and the dashboard's precomputed views
    (analytics/report/parts.py)."""

    snapshot = models.ForeignKey(ReportSnapshot, on_delete=models.CASCADE, related_name="parts")
    name = models.CharField(max_length=40)
    data = models.BinaryField()
    size_bytes = models.PositiveBigIntegerField(default=0)  # uncompressed

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "name"], name="snapshotpart_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} of snapshot {self.snapshot_id}"


# --- active selection: which responses of a campaign go to people (analytics/active/) ---------


class SelectionSource(models.TextChoices):
    SPREAD = "spread", "Spread of one run's k samples"
    JUDGES = "judges", "Disagreement between judges (two runs or more)"
    CALIBRATION = "calibration", "The judge's error by score level, fitted on the labels so far"


#: What a batch's uncertainties came from: a source, or none (every response alike).
SOURCE_USED = [*SelectionSource.choices, ("uniform", "Uniform (no information)")]


class SelectionPlan(TimestampedModel):
    """How a "sampled" campaign draws its responses for people (docs/CAMPAIGNS.md, "Active
    selection"): from the judge runs' uncertainty (`source`), within `budget` responses
    (expected) in batches of `batch_size`, with `uniform_share` of the design uniform.

    `frame` is the campaign's responses that the runs scored on every skill asked, in the
    random order `seed` gave them when the plan was made: batch t decides the next
    `batch_size` undecided ones. Source, budget, batch size and uniform share may change for
    later batches (each batch records the values it used); the runs, the frame and the seed
    never do."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="+")
    runs = models.ManyToManyField(JudgeRun, related_name="+")
    source = models.CharField(max_length=15, choices=SelectionSource.choices)
    budget = models.PositiveIntegerField()  # responses for people, in expectation, in all
    batch_size = models.PositiveIntegerField()  # responses decided per batch
    uniform_share = models.FloatField(default=0.2)
    seed = models.BigIntegerField()
    frame = models.JSONField(default=list)  # response ids, in the seeded order
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(source__in=SelectionSource.values), name="selectionplan_source_valid"
            ),
            models.CheckConstraint(condition=Q(budget__gte=1), name="selectionplan_budget"),
            models.CheckConstraint(condition=Q(batch_size__gte=1), name="selectionplan_batch_size"),
            # a zero share would let a response with no uncertainty be left out for sure
            models.CheckConstraint(
                condition=Q(uniform_share__gt=0, uniform_share__lte=1),
                name="selectionplan_uniform_share",
            ),
        ]

    def __str__(self) -> str:
        return f"selection plan of campaign {self.campaign_id}"


class SelectionBatch(models.Model):
    """One batch a plan drew: what it decided, with the settings and the uncertainty it
    used (the draws themselves are the campaign's CampaignSample rows of this batch)."""

    plan = models.ForeignKey(SelectionPlan, on_delete=models.CASCADE, related_name="batches")
    number = models.PositiveIntegerField()
    size = models.PositiveIntegerField()  # responses decided
    budget = models.FloatField()  # this batch's share of the budget: the expected draws
    drawn = models.PositiveIntegerField()  # responses drawn for people
    p_min = models.FloatField()
    p_max = models.FloatField()
    source = models.CharField(max_length=15, choices=SelectionSource.choices)  # asked
    source_used = models.CharField(max_length=15, choices=SOURCE_USED)
    note = models.CharField(max_length=300, blank=True)  # why it fell back, if it did
    labels = models.PositiveIntegerField(default=0)  # labeled frame responses at the draw
    # the plan's settings when it was drawn
    plan_budget = models.PositiveIntegerField()
    batch_size = models.PositiveIntegerField()
    uniform_share = models.FloatField()
    # the calibration model per skill: {"skill": {"lambda", "labels", "rms": {level: value}}}
    fit = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["plan", "number"]
        constraints = [
            # a second request for the same batch finds the first (never two draws)
            models.UniqueConstraint(fields=["plan", "number"], name="selectionbatch_unique"),
            models.CheckConstraint(condition=Q(number__gte=1), name="selectionbatch_number"),
        ]

    def __str__(self) -> str:
        return f"batch {self.number} of plan {self.plan_id}"
