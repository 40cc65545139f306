"""Model judges: prompt templates, judge configurations, runs (job rows), judgments and the
per-skill scores they give, and the response cache that makes re-runs free.

Invariants the database holds:
- one judgment per (run, response, sample index) and one score per (judgment, skill), so a
  redelivered task upserts instead of duplicating;
- judge scores are 1-5 or N/A, like human scores;
- prompt templates are append-only versions;
- a cached LLM answer is keyed by the hash of exactly what was sent.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import Campaign, Dataset, Project, Response, Rubric, Skill
from flaskweb.db import TimestampedModel
from flaskweb.jobs import ImportJob


class TemplateSource(models.TextChoices):
    BUILTIN = "builtin", "Built in"
    CUSTOM = "custom", "Custom"
    IMPORT = "import", "Imported"


class PromptTemplate(models.Model):
    """One version of a judge prompt. Rows are never updated: editing adds a version."""

    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="prompt_templates"
    )
    key = models.SlugField(max_length=80)
    version = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    system_prompt = models.TextField(blank=True)
    user_template = models.TextField()
    with_reference = models.BooleanField(default=False)
    source = models.CharField(max_length=10, choices=TemplateSource.choices)
    content_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["key", "version"],
                condition=Q(project__isnull=True),
                name="template_builtin_version",
            ),
            models.UniqueConstraint(
                fields=["project", "key", "version"],
                condition=Q(project__isnull=False),
                name="template_project_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} v{self.version}"


class Provider(TimestampedModel):
    """An LLM API that judge calls may go to, declared by a site admin (the Django admin,
    or `manage.py judge_provider`): its base URL(s), where its key is, what it costs and
    how fast it may be called. Researchers pick a provider and a model; nothing they can
    set names an environment variable, a file or a URL outside `base_urls`, so a key is
    only ever sent to the URLs its provider declares (docs/JUDGING.md, "Providers").

    - `api_key_env` / `api_key_file`: the NAME of the workers' environment variable (or
      NAME_FILE) that holds the key, or the path of a secret file; both blank = a server
      that needs no key (a local vLLM, Ollama or llama.cpp server).
    - `is_local`: calls may reach loopback and private addresses (judging.llm.outbound refuses
      them otherwise, at connect time).
    - `approved`: no call goes out before a site admin approves the provider (the providers
      made from older judges by migration 0003 start unapproved).
    - `projects`: the projects that may use it; none = every project.
    - `shared_cache`: identical requests of different projects may be answered from one
      cache entry (by default a cached answer serves only the project that paid for it).
    """

    name = models.SlugField(max_length=60, unique=True)
    label = models.CharField(max_length=200, blank=True)
    base_urls = models.JSONField(default=list)
    api_key_env = models.CharField(max_length=100, blank=True)
    api_key_file = models.CharField(max_length=500, blank=True)
    is_local = models.BooleanField(default=False)
    approved = models.BooleanField(default=False)
    shared_cache = models.BooleanField(default=False)
    projects = models.ManyToManyField(Project, blank=True, related_name="judge_providers")
    # {"model name" or "*": {"prompt": "0.0025", "completion": "0.01"}} per 1k tokens
    prices = models.JSONField(default=dict, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.label or self.name

    @property
    def needs_key(self) -> bool:
        return bool(self.api_key_env or self.api_key_file)


class JudgeKind(models.TextChoices):
    LLM = "llm", "LLM over an OpenAI-compatible API"
    BASELINE = "baseline", "Baseline metric (no model)"
    IMPORTED = "imported", "Imported judge outputs"


class JudgeConfig(TimestampedModel):
    """How a judge scores. An LLM judge calls its provider (declared by a site admin), at
    one of the provider's base URLs; no key and no key location is stored here."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=JudgeKind.choices)
    provider = models.ForeignKey(
        Provider, null=True, blank=True, on_delete=models.PROTECT, related_name="judges"
    )
    base_url = models.URLField(max_length=500, blank=True)  # one of provider.base_urls
    model = models.CharField(max_length=200, blank=True)
    temperature = models.FloatField(default=0.0)
    max_tokens = models.PositiveIntegerField(default=1024)
    extra_params = models.JSONField(default=dict, blank=True)
    timeout_seconds = models.FloatField(default=60.0)
    max_attempts = models.PositiveSmallIntegerField(default=5)
    samples = models.PositiveSmallIntegerField(default=1)  # k samples per response
    prompt_template = models.ForeignKey(
        PromptTemplate, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    use_reference = models.BooleanField(default=True)
    baseline = models.CharField(max_length=40, blank=True)  # e.g. token-f1, rouge-l
    # The judge model's family (e.g. "gpt-4", "llama-3"), compared with the families of the
    # scored systems (ModelFamily) by the self-preference probe (docs/JUDGE_TRUST.md).
    family = models.CharField(max_length=100, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)
    price_per_1k_prompt = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    price_per_1k_completion = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judge_unique_name"),
            models.CheckConstraint(
                condition=Q(samples__gte=1, samples__lte=20), name="judge_samples_1_20"
            ),
            models.CheckConstraint(
                condition=Q(temperature__gte=0, temperature__lte=2), name="judge_temperature"
            ),
            models.CheckConstraint(condition=Q(kind__in=JudgeKind.values), name="judge_kind_valid"),
        ]

    def __str__(self) -> str:
        return self.name


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class ProbeKind(models.TextChoices):
    """A bias probe (docs/JUDGE_TRUST.md): a counterfactual run of a judge over the items of a
    finished base run with one thing changed in the prompt; its scores are compared with the
    base run's. Pointwise: PAD .. NAMES_SHOWN; pairwise: BANDWAGON, DISTRACTION."""

    PAD = "pad", "Length: response padded with a neutral restatement"
    TRUNCATE = "truncate", "Length: response truncated"
    REFERENCE = "reference", "Reference answer removed (or added)"
    RUBRIC_ORDER = "rubric_order", "Skills presented in another order"
    NAMES_SHOWN = "names_shown", "Model names shown"
    BANDWAGON = "bandwagon", "Bandwagon: a claim that most people preferred one response"
    DISTRACTION = "distraction", "Distraction: an irrelevant sentence added"


class JudgeRun(TimestampedModel):
    """A judge scoring a campaign's (or a dataset's) responses: the job row."""

    judge = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="runs")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="judge_runs")
    campaign = models.ForeignKey(
        Campaign, null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_runs"
    )
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.PENDING)
    # Pairwise mode: every other model's response to an item is compared with this model's
    # response to the same item, asked in both orders (PairJudgment). Blank: pointwise.
    pairwise_against = models.CharField(max_length=200, blank=True)
    # the exact configuration the run was started with (judge fields, template version)
    settings_snapshot = models.JSONField(default=dict)
    total = models.PositiveIntegerField(default=0)  # judgments to make (responses x samples)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    parse_failed = models.PositiveIntegerField(default=0)
    cached = models.PositiveIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    budget = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    estimate = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The stall sweep (judging.services.judge_runs_redispatch_stalled): when it last
    # enqueued this running run's missing judgments again, and how often it did.
    redispatched_at = models.DateTimeField(null=True, blank=True)
    redispatches = models.PositiveIntegerField(default=0)
    # A bias probe (ProbeKind; blank: an ordinary run): the same judge over `base_run`'s
    # responses with the prompt changed as `probe_params` say. A probe run never counts as
    # the judge's scores in reports (judging.selectors.latest_run_ids_for_project).
    probe = models.CharField(max_length=20, blank=True, choices=ProbeKind.choices)
    base_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="probe_runs"
    )
    probe_params = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="run_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(probe="") | Q(probe__in=ProbeKind.values, base_run__isnull=False),
                name="run_probe_has_base",
            ),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="run_status_updated")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.judge_id} ({self.status})"


class JudgmentStatus(models.TextChoices):
    OK = "ok", "Parsed"
    PARTIAL = "partial", "Some skills missing"
    PARSE_FAILED = "parse_failed", "Output not parseable"
    FAILED = "failed", "Call failed"


class Judgment(TimestampedModel):
    """One judge call (one sample) for one response, with everything needed to reproduce
    and audit it."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="judgments")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="judgments")
    sample_index = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=15, choices=JudgmentStatus.choices)
    request = models.JSONField(default=dict)  # effective request body (no API key)
    raw_output = models.TextField(blank=True)
    parse_method = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    from_cache = models.BooleanField(default=False)
    cache_key = models.CharField(max_length=64, blank=True)
    prompt_template = models.ForeignKey(
        PromptTemplate, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "response", "sample_index"], name="judgment_unique_sample"
            ),
            models.CheckConstraint(
                condition=Q(status__in=JudgmentStatus.values), name="judgment_status_valid"
            ),
        ]
        indexes = [models.Index(fields=["run", "status"], name="judgment_run_status")]

    def __str__(self) -> str:
        return f"judgment {self.pk} ({self.status})"


class JudgeScore(models.Model):
    """A judge's score of one response on one skill, from one judgment (sample)."""

    judgment = models.ForeignKey(Judgment, on_delete=models.CASCADE, related_name="scores")
    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="+")
    response = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="judge_scores", db_index=False
    )
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="+")
    rubric = models.ForeignKey(
        Rubric, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    is_na = models.BooleanField(default=False)
    raw_value = models.FloatField(null=True, blank=True)  # a baseline metric's own value
    feedback = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["judgment", "skill"], name="judgescore_unique"),
            models.CheckConstraint(
                condition=Q(is_na=True, score__isnull=True)
                | Q(is_na=False, score__gte=1, score__lte=5),
                name="judgescore_value_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["run", "skill"], name="judgescore_run_skill"),
            models.Index(fields=["response", "skill"], name="judgescore_response_skill"),
        ]

    def __str__(self) -> str:
        return f"{self.judgment_id}:{self.skill_id}={'N/A' if self.is_na else self.score}"


class LLMCacheEntry(models.Model):
    """A stored answer to an exact request (rendered prompt, model, parameters, sample
    index) of one project to one provider with one credential: identical requests are
    answered from here, so re-runs cost nothing. The key hashes the provider, the key's
    fingerprint and the project with the request (judging.services.calls.cache_key), so one
    project never gets another's paid answers unless the provider shares its cache."""

    key = models.CharField(max_length=64, unique=True)
    provider = models.ForeignKey(
        Provider, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    model = models.CharField(max_length=200)
    content = models.TextField()
    finish_reason = models.CharField(max_length=40, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"cache {self.key[:12]}"


class ModelFamily(models.Model):
    """The family of a system (a response's model_name) in a project, as a researcher
    declares it, e.g. "gpt-4" for gpt-4-0613: the self-preference probe compares a judge's
    scores of its own family's responses with people's (docs/JUDGE_TRUST.md)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    model_name = models.CharField(max_length=200)
    family = models.CharField(max_length=100)

    class Meta:
        ordering = ["project", "model_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "model_name"], name="modelfamily_unique_model"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_name}: {self.family}"


class Verdict(models.TextChoices):
    CHALLENGER = "challenger", "The compared response is better"
    ANCHOR = "anchor", "The anchor response is better"
    TIE = "tie", "Tie"


class PairJudgment(TimestampedModel):
    """A pairwise judgment: `response` (the challenger) against `anchor`, the anchor model's
    response to the same item, shown in one `order` (0: challenger first, 1: anchor first).
    Both orders are asked; `verdicts` is stored in terms of challenger/anchor, whatever the
    order, so the two orders of a pair compare directly (position consistency)."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="pair_judgments")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    anchor = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    order = models.PositiveSmallIntegerField()  # 0: challenger shown first; 1: anchor first
    status = models.CharField(max_length=15, choices=JudgmentStatus.choices)
    verdicts = models.JSONField(default=dict)  # skill name or "Overall" -> Verdict
    request = models.JSONField(default=dict)  # effective request body (no API key)
    raw_output = models.TextField(blank=True)
    parse_method = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    from_cache = models.BooleanField(default=False)
    cache_key = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "response", "order"], name="pairjudgment_unique_order"
            ),
            models.CheckConstraint(condition=Q(order__in=[0, 1]), name="pairjudgment_order_01"),
            models.CheckConstraint(
                condition=Q(status__in=JudgmentStatus.values), name="pairjudgment_status_valid"
            ),
        ]
        indexes = [models.Index(fields=["run", "status"], name="pairjudgment_run_status")]

    def __str__(self) -> str:
        return f"pair judgment {self.pk} ({self.status})"


# --- imports of judge outputs made elsewhere ----------------------------------------------------


class JudgeOutputImportJob(ImportJob):
    """The job row of one import of judge outputs started from the API
    (judging/output_imports/jobs.py): the uploads are stored, then a worker claims the row
    pending -> running and runs judging.output_imports.services.judge_outputs_import from the stored
    files. It ends succeeded (`result` names the runs), rejected (with its problems; nothing
    written) or failed (with the error)."""

    # no own index: outimportjob_project_created leads with project
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="+")

    class Meta(ImportJob.Meta):
        constraints = [ImportJob.status_constraint("outputimportjob_status_valid")]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="outimportjob_project_created"),
            # the stale-job check looks for old running jobs
            models.Index(fields=["status", "started_at"], name="outimportjob_status_started"),
        ]

    def __str__(self) -> str:
        return f"judge output import job {self.pk} ({self.status})"


# --- metadata runs (docs/METADATA.md) -----------------------------------------------------------


class MetadataRun(TimestampedModel):
    """A judge proposing every item's domains, three ranked skills and difficulty for a
    dataset: the job row, with the same estimate, budget, counters and state machine as a
    JudgeRun. One call per item; the answers are stored as annotation MetadataProposal rows
    with origin "run:<id>" (one per item, so a redelivered batch records nothing twice)."""

    judge = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="metadata_runs")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="metadata_runs")
    prompt_template = models.ForeignKey(PromptTemplate, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.PENDING)
    settings_snapshot = models.JSONField(default=dict)
    total = models.PositiveIntegerField(default=0)  # items to ask about
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    parse_failed = models.PositiveIntegerField(default=0)
    cached = models.PositiveIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    budget = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    estimate = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # the stall sweep, as for JudgeRun (judging.services.metadata.metadata_runs_redispatch_stalled)
    redispatched_at = models.DateTimeField(null=True, blank=True)
    redispatches = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="metadatarun_status_valid"
            ),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="metadatarun_status_updated")]

    def __str__(self) -> str:
        return f"metadata run {self.pk} of {self.judge_id} ({self.status})"
