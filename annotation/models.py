"""Projects, the FLASK catalogue (skills, versioned rubrics, domains), datasets and imports.

Invariants the database holds (not the code):
- an item's external id is unique in its dataset; a model answers an item at most once;
- an item ranks each of its skills once, with distinct ranks;
- rubric versions are unique per (skill, project scope) and count up from 1;
- difficulty is 1-5 or unknown (NULL).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from flaskweb.db import TimestampedModel
from flaskweb.jobs import JobStatus


class Ability(models.TextChoices):
    LOGICAL_THINKING = "logical_thinking", "Logical Thinking"
    BACKGROUND_KNOWLEDGE = "background_knowledge", "Background Knowledge"
    PROBLEM_HANDLING = "problem_handling", "Problem Handling"
    USER_ALIGNMENT = "user_alignment", "User Alignment"
    CUSTOM = "custom", "Custom"


class Difficulty(models.IntegerChoices):
    SIMPLE_LIFESTYLE = 1, "simple lifestyle knowledge"
    ADVANCED_LIFESTYLE = 2, "advanced lifestyle knowledge"
    FORMAL_EDUCATION = 3, "formal education knowledge"
    MAJOR_LEVEL = 4, "major level knowledge"
    EXPERT_LEVEL = 5, "expert level knowledge"


class Project(TimestampedModel):
    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ProjectRole(models.TextChoices):
    ADMIN = "admin", "Admin"
    RESEARCHER = "researcher", "Researcher"
    REVIEWER = "reviewer", "Reviewer"  # adjudicates disagreements (annotation/review/)
    ANNOTATOR = "annotator", "Annotator"


class ProjectMembership(TimestampedModel):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=ProjectRole.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique"),
            models.CheckConstraint(
                condition=Q(role__in=ProjectRole.values), name="membership_role_valid"
            ),
        ]


class MembershipChange(models.Model):
    """Who gave whom which role in a project, changed it or took it away, and when. The
    username is kept as text, so the record outlives the user."""

    class Action(models.TextChoices):
        ADDED = "added", "Added"
        ROLE_CHANGED = "role_changed", "Role changed"
        REMOVED = "removed", "Removed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    username = models.CharField(max_length=150)
    action = models.CharField(max_length=20, choices=Action.choices)
    role_before = models.CharField(max_length=20, blank=True)
    role_after = models.CharField(max_length=20, blank=True)
    # null: a command or seeding, not a signed-in person
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-changed_at", "-id"]
        indexes = [models.Index(fields=["project", "-changed_at"], name="membershipchange_recent")]

    def __str__(self) -> str:
        return f"{self.username} {self.action} in {self.project_id}"


class Domain(models.Model):
    """A FLASK domain (built-in when project is NULL) with its sub-domains."""

    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="domains"
    )
    key = models.SlugField(max_length=80)
    name = models.CharField(max_length=100)
    subdomains = models.JSONField(default=list, blank=True)
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["order", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"], condition=Q(project__isnull=True), name="domain_builtin_name"
            ),
            models.UniqueConstraint(
                fields=["project", "name"],
                condition=Q(project__isnull=False),
                name="domain_project_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Skill(TimestampedModel):
    """A skill of the catalogue: the 12 FLASK skills are built in (project NULL); projects
    add their own. The wording lives in versioned Rubric rows."""

    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="skills"
    )
    key = models.SlugField(max_length=80)
    name = models.CharField(max_length=100)
    ability = models.CharField(max_length=40, choices=Ability.choices)
    order = models.PositiveSmallIntegerField(default=100)

    class Meta:
        ordering = ["order", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["name"], condition=Q(project__isnull=True), name="skill_builtin_name"
            ),
            models.UniqueConstraint(
                fields=["project", "name"],
                condition=Q(project__isnull=False),
                name="skill_project_name",
            ),
            models.CheckConstraint(
                condition=Q(ability__in=Ability.values), name="skill_ability_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_builtin(self) -> bool:
        return self.project_id is None


class RubricSource(models.TextChoices):
    BUILTIN = "builtin", "Built in"
    EDIT = "edit", "Edited"
    IMPORT = "import", "Imported"


def rubric_label(*, project_slug: str | None, version: int) -> str:
    """The one name of a rubric version wherever it is shown or exported: "built-in v1" or
    "project:demo v1". A project's own versions count from 1 like the built-in ones, so
    the number alone cannot tell an edited rubric from the built-in one it came from."""
    return f"project:{project_slug} v{version}" if project_slug else f"built-in v{version}"


class Rubric(models.Model):
    """One version of a skill's rubric: a criterion and five level anchors.

    Rows are never updated: editing creates version n+1. A project may carry its own
    versions of any skill (project set); otherwise the built-in versions (project NULL)
    apply. Scores record the Rubric row they were given under.
    """

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="rubrics")
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="rubrics"
    )
    version = models.PositiveIntegerField()
    criterion = models.TextField()
    anchor_1 = models.TextField()
    anchor_2 = models.TextField()
    anchor_3 = models.TextField()
    anchor_4 = models.TextField()
    anchor_5 = models.TextField()
    source = models.CharField(max_length=20, choices=RubricSource.choices)
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["skill", "project", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["skill", "version"],
                condition=Q(project__isnull=True),
                name="rubric_builtin_version",
            ),
            models.UniqueConstraint(
                fields=["skill", "project", "version"],
                condition=Q(project__isnull=False),
                name="rubric_project_version",
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="rubric_version_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.skill.name} {self.label}"

    @property
    def label(self) -> str:
        """rubric_label of this version (reads its project: select_related("project"))."""
        slug = self.project.slug if self.project_id and self.project else None
        return rubric_label(project_slug=slug, version=self.version)

    @property
    def anchors(self) -> list[str]:
        return [self.anchor_1, self.anchor_2, self.anchor_3, self.anchor_4, self.anchor_5]


class Dataset(TimestampedModel):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="dataset_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Item(models.Model):
    """An instance: instruction + reference answer with its own skills, domains, difficulty."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=200)
    instruction = models.TextField()
    reference_answer = models.TextField(blank=True)
    difficulty = models.PositiveSmallIntegerField(null=True, blank=True, choices=Difficulty.choices)
    source_task = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # sha1 of the imported content: tells an unchanged re-import from a changed item
    content_hash = models.CharField(max_length=40, blank=True)
    domains: models.ManyToManyField[Domain, ItemDomain] = models.ManyToManyField(
        Domain, through="ItemDomain", related_name="items"
    )
    upload = models.ForeignKey(
        "DatasetUpload", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset", "id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "external_id"], name="item_unique_external"),
            models.CheckConstraint(
                condition=Q(difficulty__isnull=True) | Q(difficulty__gte=1, difficulty__lte=5),
                name="item_difficulty_1_5",
            ),
        ]
        indexes = [
            # per-difficulty and per-source-task breakdowns in analytics and filters
            models.Index(fields=["dataset", "difficulty"], name="item_dataset_difficulty"),
            models.Index(fields=["dataset", "source_task"], name="item_dataset_task"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id}:{self.external_id}"


class ItemSkill(models.Model):
    """One of an item's (usually 3) skills, ranked by relevance, with an optional
    instance-specific checklist (FLASK-Hard style)."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="item_skills")
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="item_skills")
    rank = models.PositiveSmallIntegerField()
    checklist = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["item", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["item", "skill"], name="itemskill_unique_skill"),
            models.UniqueConstraint(fields=["item", "rank"], name="itemskill_unique_rank"),
            models.CheckConstraint(condition=Q(rank__gte=1), name="itemskill_rank_positive"),
        ]
        indexes = [models.Index(fields=["skill", "item"], name="itemskill_skill_item")]

    def __str__(self) -> str:
        return f"{self.item_id}:{self.skill_id}#{self.rank}"


class ItemDomain(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="item_domains")
    domain = models.ForeignKey(Domain, on_delete=models.PROTECT, related_name="item_domains")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "domain"], name="itemdomain_unique"),
        ]
        indexes = [models.Index(fields=["domain", "item"], name="itemdomain_domain_item")]

    def __str__(self) -> str:
        return f"{self.item_id}:{self.domain_id}"


class Response(models.Model):
    """One model's (system's) answer to an item."""

    # No separate item_id index: the (item, model_name) unique index serves item lookups.
    item = models.ForeignKey(
        Item, on_delete=models.CASCADE, related_name="responses", db_index=False
    )
    model_name = models.CharField(max_length=200)
    text = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    # Provenance only. No database constraint or index: each one is checked for every
    # response at commit, which cost 2.4 s per 1M imported responses (bench/).
    upload = models.ForeignKey(
        "DatasetUpload",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "model_name"]
        constraints = [
            models.UniqueConstraint(fields=["item", "model_name"], name="response_unique_model"),
        ]
        # per-model breakdowns and "which models does this dataset have"
        indexes = [models.Index(fields=["model_name", "item"], name="response_model_item")]

    def __str__(self) -> str:
        return f"{self.item_id}:{self.model_name}"


# A dataset upload is an import job like the score and judge-output imports: one state
# machine (flaskweb.jobs), one set of statuses. REJECTED: validation found problems set to
# "reject"; FAILED: it crashed. Neither wrote anything.
UploadStatus = JobStatus


class RenderedText(models.Model):
    """A text's Markdown as sanitised HTML (annotation/rendering.py), stored once and read
    by every card that shows it (annotation/rendered_texts.py): rendering a long response
    costs milliseconds of Python, reading it back a fraction of one. Keyed by a digest of
    the renderer's version and the text, so an item or response whose text is the same
    shares the row, and a new renderer never reads an old rendering."""

    digest = models.CharField(max_length=64, primary_key=True)
    html = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.digest[:12]


class UploadSource(models.TextChoices):
    WEB = "web", "Web"
    API = "api", "API"
    CLI = "cli", "Command line"


class DatasetUpload(TimestampedModel):
    """The job row of one import (one or more files into one dataset)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="uploads")
    dataset_name = models.CharField(max_length=200)
    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads"
    )
    source = models.CharField(max_length=10, choices=UploadSource.choices)
    status = models.CharField(
        max_length=20, choices=UploadStatus.choices, default=UploadStatus.PENDING
    )
    # {"policies": {problem_code: action}, ...}
    options = models.JSONField(default=dict, blank=True)
    rows_read = models.PositiveIntegerField(default=0)
    items_created = models.PositiveIntegerField(default=0)
    items_unchanged = models.PositiveIntegerField(default=0)
    responses_created = models.PositiveIntegerField(default=0)
    responses_unchanged = models.PositiveIntegerField(default=0)
    rows_skipped = models.PositiveIntegerField(default=0)
    problem_count = models.PositiveIntegerField(default=0)
    # per-file and per-problem-class counts, models, missing-response counts
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=UploadStatus.values), name="upload_status_valid"
            ),
        ]
        indexes = [models.Index(fields=["status", "started_at"], name="upload_status_started")]

    def __str__(self) -> str:
        return f"upload {self.pk} → {self.dataset_name} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in {
            UploadStatus.SUCCEEDED,
            UploadStatus.REJECTED,
            UploadStatus.FAILED,
        }


class UploadFile(models.Model):
    upload = models.ForeignKey(DatasetUpload, on_delete=models.CASCADE, related_name="files")
    position = models.PositiveSmallIntegerField()
    # Web/API uploads are stored in MEDIA_ROOT; the CLI reads the given path in place.
    file = models.FileField(upload_to="uploads/%Y/%m/", blank=True)
    path = models.CharField(max_length=1000, blank=True)
    original_name = models.CharField(max_length=300)
    format = models.CharField(max_length=30, blank=True)  # requested; "" = detect
    detected_format = models.CharField(max_length=30, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    size_bytes = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["upload", "position"]
        constraints = [
            models.UniqueConstraint(fields=["upload", "position"], name="uploadfile_position"),
        ]

    def __str__(self) -> str:
        return self.original_name


class ImportProblem(models.Model):
    """One reported problem of an import (capped per class; counts are in the summary)."""

    upload = models.ForeignKey(DatasetUpload, on_delete=models.CASCADE, related_name="problems")
    file_name = models.CharField(max_length=300)
    line = models.PositiveIntegerField(null=True, blank=True)
    field = models.CharField(max_length=100, blank=True)
    code = models.CharField(max_length=40)
    action = models.CharField(max_length=10)
    message = models.TextField()

    class Meta:
        ordering = ["upload", "id"]
        indexes = [models.Index(fields=["upload", "code"], name="problem_upload_code")]

    def __str__(self) -> str:
        return f"{self.file_name}:{self.line} {self.code}"


# --- campaigns: people scoring responses ----------------------------------------------------


class CampaignStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    ACTIVE = "active", "Active"
    PAUSED = "paused", "Paused"
    FINISHED = "finished", "Finished"


class SkillMode(models.TextChoices):
    ITEM = "item", "Each item's own FLASK skills"
    FIXED = "fixed", "A fixed set of skills"


class QualificationRule(models.TextChoices):
    EXACT = "exact", "Exact agreement with the known score"
    WITHIN_ONE = "within1", "Within ±1 of the known score"


class CampaignMode(models.TextChoices):
    POINTWISE = "pointwise", "Score each response (1-5 per skill)"
    PAIRWISE = "pairwise", "Compare two responses (which is better)"


class PairDesign(models.TextChoices):
    ALL_PAIRS = "all_pairs", "All pairs of the chosen models"
    ANCHOR = "anchor", "Each model against an anchor model"
    SAMPLED = "sampled", "A balanced sample of pairs within a budget"


class CampaignSelection(models.TextChoices):
    """Which responses of a pointwise campaign get tasks (docs/CAMPAIGNS.md, "Active
    selection")."""

    ALL = "all", "Every response of the chosen models"
    SAMPLED = "sampled", "Only the responses drawn for people (active selection)"


class PairChoice(models.TextChoices):
    """A preference between a pair's two responses, in the task's own terms: A is
    `Task.response`, B is `Task.response_b`, whichever side each was shown on."""

    A = "a", "A is better"
    B = "b", "B is better"
    TIE = "tie", "Tie"
    BOTH_BAD = "both_bad", "Both are bad"


class PairAsk(models.TextChoices):
    SKILLS = "skills", "Per skill"
    OVERALL = "overall", "Overall only"
    BOTH = "both", "Per skill and overall"


class Campaign(TimestampedModel):
    """Annotators score a dataset's responses on skills, K annotators per response
    (pointwise), or say which of two responses to the same item is better (pairwise)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="campaigns")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="campaigns")
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    status = models.CharField(
        max_length=20, choices=CampaignStatus.choices, default=CampaignStatus.DRAFT
    )
    skill_mode = models.CharField(max_length=10, choices=SkillMode.choices, default=SkillMode.ITEM)
    fixed_skills = models.ManyToManyField(Skill, blank=True, related_name="+")
    # Which systems' responses are scored; empty = all of the dataset's.
    model_names = models.JSONField(default=list, blank=True)
    overlap = models.PositiveSmallIntegerField(default=3)  # K annotators per response
    show_reference = models.BooleanField(default=True)
    quota_per_annotator = models.PositiveIntegerField(null=True, blank=True)
    lease_seconds = models.PositiveIntegerField(default=900)
    annotators = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="campaigns"
    )
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="campaigns")
    # Route by domain expertise: annotators with declared domains get items of those
    # domains only (annotators without any declared domain get every item).
    route_by_domain = models.BooleanField(default=False)
    # Quality control
    gold_rate = models.FloatField(default=0.0)  # share of tasks served from gold/attention items
    repeat_rate = models.FloatField(default=0.0)  # share of tasks that repeat a past one
    gold_feedback = models.BooleanField(default=False)  # show gold results to annotators
    # Screening (annotation/screening/): when on, every annotator first does the campaign's
    # training tasks (gold shown with its explanation after each answer), then its
    # qualification tasks; only those who pass get real tasks. The claim reads this flag.
    screening = models.BooleanField(default=False)
    qualification_pass_mark = models.FloatField(default=0.8)  # share agreeing, per skill
    qualification_rule = models.CharField(
        max_length=10, choices=QualificationRule.choices, default=QualificationRule.WITHIN_ONE
    )
    # Recruiting platforms (annotation/study/): what a worker sees at the end.
    consent_text = models.TextField(blank=True)  # empty: no consent page
    completion_code = models.CharField(max_length=100, blank=True)
    # shown on the study's finish page above the code (empty: the fixed text only)
    completion_message = models.TextField(blank=True, default="", db_default="")
    # The language of the campaign's own texts and of its pages (a code of LANGUAGES); empty:
    # the site's default language, and the pages follow the browser among the languages the
    # campaign has texts in (CampaignTranslation; docs/LANGUAGES.md). Checked by the
    # services, not by a CHECK constraint: adding a language to LANGUAGES needs no migration.
    language = models.CharField(max_length=10, blank=True, default="", db_default="")
    # shown to a participant screened out (by the qualification or the quality rules); empty:
    # no code, a "return the study" page (never the completion code)
    screenout_code = models.CharField(max_length=100, blank=True)
    # Annotator quality before payment (annotation/study/quality.py): the researcher's rules
    # (keys of QUALITY_RULE_DEFAULTS; missing keys take the defaults), and whether a working
    # participant whose figures break a rule is screened out by itself.
    quality_rules = models.JSONField(default=dict, blank=True)
    quality_screen_out = models.BooleanField(default=False)
    # Pace: a break suggested after every N submitted tasks (null: none)
    break_every = models.PositiveIntegerField(null=True, blank=True)
    break_minutes = models.PositiveSmallIntegerField(default=5)
    # Cost estimate for researchers: an hourly wage (null: no estimate)
    hourly_wage = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    wage_currency = models.CharField(max_length=3, default="USD")
    # Review (annotation/review/): a response enters the reviewer's queue when its accepted
    # scores on a skill spread (max - min) by at least this much.
    review_spread = models.PositiveSmallIntegerField(default=2)
    # Adaptive overlap: a complete response whose scores spread by at least
    # `adaptive_spread` on a skill is asked for one more annotation, up to
    # `adaptive_max_extra` per response and `adaptive_budget` in the campaign (null: none).
    adaptive_spread = models.PositiveSmallIntegerField(null=True, blank=True)
    adaptive_max_extra = models.PositiveSmallIntegerField(default=2)
    adaptive_budget = models.PositiveIntegerField(null=True, blank=True)
    # Pairwise campaigns (mode "pairwise"): a task is a pair of responses to one item.
    mode = models.CharField(
        max_length=10, choices=CampaignMode.choices, default=CampaignMode.POINTWISE
    )
    pair_design = models.CharField(
        max_length=10, choices=PairDesign.choices, default=PairDesign.ALL_PAIRS
    )
    pair_anchor = models.CharField(max_length=200, blank=True)  # design "anchor": its model
    pair_budget = models.PositiveIntegerField(null=True, blank=True)  # design "sampled": pairs
    # the choices offered (PairChoice values, in order); empty: a, b, tie
    pair_choices = models.JSONField(default=list, blank=True)
    pair_ask = models.CharField(max_length=10, choices=PairAsk.choices, default=PairAsk.BOTH)
    pair_strength = models.BooleanField(default=False)  # ask "slightly" or "much"
    pair_rationale = models.BooleanField(default=False)  # offer a rationale box
    # Pointwise only: "all" gives every response a task; "sampled" only the responses drawn
    # for people (CampaignSample, drawn by analytics' active selection). The database
    # default lets a process of the previous release still insert campaigns mid-upgrade.
    selection = models.CharField(
        max_length=10,
        choices=CampaignSelection.choices,
        default=CampaignSelection.ALL,
        db_default=CampaignSelection.ALL,
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="campaign_unique_name"),
            models.CheckConstraint(
                condition=Q(mode__in=CampaignMode.values), name="campaign_mode_valid"
            ),
            models.CheckConstraint(
                condition=Q(pair_budget__isnull=True) | Q(pair_budget__gte=1),
                name="campaign_pair_budget",
            ),
            models.CheckConstraint(
                condition=Q(qualification_pass_mark__gte=0, qualification_pass_mark__lte=1),
                name="campaign_pass_mark",
            ),
            models.CheckConstraint(
                condition=Q(review_spread__gte=1, review_spread__lte=4),
                name="campaign_review_spread",
            ),
            models.CheckConstraint(
                condition=Q(overlap__gte=1, overlap__lte=50), name="campaign_overlap_1_50"
            ),
            models.CheckConstraint(condition=Q(lease_seconds__gte=30), name="campaign_lease_30s"),
            models.CheckConstraint(
                condition=Q(gold_rate__gte=0, gold_rate__lte=0.5), name="campaign_gold_rate"
            ),
            models.CheckConstraint(
                condition=Q(repeat_rate__gte=0, repeat_rate__lte=0.5), name="campaign_repeat_rate"
            ),
            models.CheckConstraint(
                condition=Q(status__in=CampaignStatus.values), name="campaign_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(selection__in=CampaignSelection.values), name="campaign_selection_valid"
            ),
            # a pair task is two responses: there is no inclusion probability of one response
            models.CheckConstraint(
                condition=Q(selection=CampaignSelection.ALL) | Q(mode=CampaignMode.POINTWISE),
                name="campaign_sampled_pointwise",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class CampaignSample(models.Model):
    """One response of a "sampled" campaign decided for people: drawn (it gets a task) or
    not, with the probability it was drawn with (annotation.campaigns.services.
    campaign_sample_record; analytics/active/ decides). Each response is decided once, in a
    numbered batch; rows are never changed, so the probabilities an estimate weights by are
    the ones the draws were made with."""

    # campaign_id leads campaignsample_unique: no index of its own
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="samples", db_index=False
    )
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    batch = models.PositiveIntegerField()
    probability = models.FloatField()
    drawn = models.BooleanField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "response"], name="campaignsample_unique"),
            # zero would leave a response out with certainty: no weighting recovers it
            models.CheckConstraint(
                condition=Q(probability__gt=0, probability__lte=1),
                name="campaignsample_probability",
            ),
            models.CheckConstraint(condition=Q(batch__gte=1), name="campaignsample_batch"),
        ]
        indexes = [
            # "which batches does this campaign have" (the next batch's number, a replay)
            models.Index(fields=["campaign", "batch"], name="campaignsample_batch_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.response_id} p={self.probability:.3f} {self.drawn}"


class CampaignRubric(models.Model):
    """The rubric version a campaign's skill is scored under, pinned at activation."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="rubrics")
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="+")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "skill"], name="campaignrubric_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.skill_id}→{self.rubric_id}"


class CampaignTranslation(models.Model):
    """A campaign's texts in one more language (docs/LANGUAGES.md): each empty field, and
    each skill missing from `anchors`, falls back to the campaign's own text
    (annotation.languages.selectors.campaign_texts). `language` is a code of LANGUAGES,
    checked by the services (annotation/languages/services.py)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="translations")
    language = models.CharField(max_length=10)
    consent_text = models.TextField(blank=True, default="")
    instructions = models.TextField(blank=True, default="")
    completion_message = models.TextField(blank=True, default="")
    # skill key -> its five level anchors, 1 to 5 (skills left out keep the rubric's own)
    anchors = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["campaign", "language"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "language"], name="campaigntranslation_unique"
            ),
            models.CheckConstraint(
                condition=~Q(language=""), name="campaigntranslation_language_given"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.language}"


class CampaignTextChange(models.Model):
    """The audit record of a change to a campaign's annotator-facing texts in any language:
    its own language and completion message, or a translation set or removed. Live
    campaigns may be corrected; each change says who made it, from where, and what the
    texts were before and after."""

    class Action(models.TextChoices):
        SET = "set", "Set"
        REMOVED = "removed", "Removed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    # the translation's language; empty: the campaign's own language and texts
    language = models.CharField(max_length=10, blank=True)
    action = models.CharField(max_length=10, choices=Action.choices)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    # null: a command or seeding, not a signed-in person
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    context = models.CharField(max_length=300, blank=True)  # the request or command
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-changed_at", "-id"]
        indexes = [
            models.Index(fields=["campaign", "-changed_at"], name="campaigntextchange_recent")
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.language or 'own'} {self.action}"


class CampaignItemPin(models.Model):
    """The item skills a campaign's tasks on one item ask (ranked, with their checklists),
    pinned when the campaign was activated, or when the item's first task was added to a
    campaign already running. Like CampaignRubric, it keeps what annotators are asked, and
    what gold and screening compare against, from changing under a running campaign: a
    verified change of the item's metadata reaches the campaign only when a researcher
    applies it (`verification` then names the verification applied). A draft campaign has
    no pins and reads the item's own skills.

    `skills` is [[skill id, checklist], ...], most relevant first: the shape the claim and
    submit statements read (annotation.selectors.item_skills_sql)."""

    # campaign_id leads campaignitempin_unique: no index of its own
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="item_pins", db_index=False
    )
    # indexed: "which running campaigns pin this item" (the verification page)
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    skills = models.JSONField(default=list, blank=True)
    verification = models.ForeignKey(
        "MetadataVerification",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "item"], name="campaignitempin_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.item_id} pinned"

    @property
    def skill_ids(self) -> list[int]:
        return [pair[0] for pair in self.skills]


class AnnotatorExpertise(models.Model):
    """Domains an annotator is qualified for (used when a campaign routes by domain)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "domain"], name="expertise_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.domain_id}"


class TaskKind(models.TextChoices):
    NORMAL = "normal", "Normal"
    GOLD = "gold", "Gold (known scores)"
    ATTENTION = "attention", "Attention check"
    TRAINING = "training", "Training (known scores, explained)"
    QUALIFICATION = "qualification", "Qualification test (known scores)"


#: Kinds with known scores (GoldScore rows) and no overlap limit: every annotator may get them.
KNOWN_SCORE_KINDS = (TaskKind.GOLD, TaskKind.ATTENTION, TaskKind.TRAINING, TaskKind.QUALIFICATION)


class Task(models.Model):
    """One response to be scored in one campaign, or (pairwise campaigns) one pair of
    responses to the same item: `response` is A, `response_b` is B, and `b_left` says
    that B was shown on the left (the order is drawn once per task and stored).

    `assigned` counts the leases that hold or used a slot (active + submitted) and
    `submitted` the accepted submissions; both change only inside the claim/submit/expire
    transactions that lock this row, and CHECK constraints keep them within the overlap.
    Gold and attention tasks have no overlap limit (every annotator may get them).
    """

    # campaign_id leads task_claim_order and task_unique_response: no index of its own (every
    # index is paid for on each claim; see "Indexes on the hot path" in ASSIGNMENT.md)
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="tasks", db_index=False
    )
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="tasks")
    response_b = models.ForeignKey(
        Response, null=True, blank=True, on_delete=models.CASCADE, related_name="pair_tasks"
    )
    b_left = models.BooleanField(default=False)
    kind = models.CharField(max_length=16, choices=TaskKind.choices, default=TaskKind.NORMAL)
    overlap = models.PositiveSmallIntegerField()
    assigned = models.PositiveSmallIntegerField(default=0)
    submitted = models.PositiveSmallIntegerField(default=0)
    # annotations added by adaptive overlap (annotation/review/), counted in `overlap`
    adaptive_extra = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "response", "kind"],
                condition=Q(response_b__isnull=True),
                name="task_unique_response",
            ),
            models.UniqueConstraint(
                fields=["campaign", "response", "response_b", "kind"],
                condition=Q(response_b__isnull=False),
                name="task_unique_pair",
            ),
            models.CheckConstraint(
                condition=Q(response_b__isnull=True) | ~Q(response_b=models.F("response")),
                name="task_pair_distinct",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=KNOWN_SCORE_KINDS) | Q(assigned__lte=models.F("overlap")),
                name="task_assigned_le_overlap",
            ),
            models.CheckConstraint(
                condition=Q(submitted__lte=models.F("assigned")), name="task_submitted_le_assigned"
            ),
        ]
        indexes = [
            # the claim scans open tasks, most-covered first, in pk order
            models.Index(fields=["campaign", "kind", "-assigned", "id"], name="task_claim_order"),
        ]

    def __str__(self) -> str:
        return f"task {self.pk} ({self.kind})"


class AssignmentStatus(models.TextChoices):
    ACTIVE = "active", "Active lease"
    SUBMITTED = "submitted", "Submitted"
    EXPIRED = "expired", "Expired"
    SKIPPED = "skipped", "Skipped"


class AssignmentKind(models.TextChoices):
    NORMAL = "normal", "Normal"
    REPEAT = "repeat", "Hidden repeat (test-retest)"


# --- what counts as data ----------------------------------------------------------------------
#
# A human score counts (in the report, the exports, quotas, the campaign page's throughput)
# when its assignment was submitted, is a normal assignment (not a hidden repeat) and is of
# a normal task (not gold or an attention check): the rest is quality control. This is the
# one place that says so; every read goes through one of the three forms below.


def accepted_assignment_q(*, path: str = "") -> Q:
    """The rule as a Q over assignments; `path` leads from the model filtered to the
    assignment: "" on Assignment, "assignment__" on HumanScore, "assignments__" on a user
    or a campaign (in a Count's filter)."""
    return Q(
        **{
            f"{path}status": AssignmentStatus.SUBMITTED,
            f"{path}kind": AssignmentKind.NORMAL,
            f"{path}task__kind": TaskKind.NORMAL,
        }
    )


def assignment_is_accepted(*, status: str, kind: str, task_kind: str) -> bool:
    """The rule on values already read (a row of plain values)."""
    return (
        status == AssignmentStatus.SUBMITTED
        and kind == AssignmentKind.NORMAL
        and task_kind == TaskKind.NORMAL
    )


class AssignmentQuerySet(models.QuerySet):
    def accepted(self) -> AssignmentQuerySet:
        """Submitted normal assignments of normal tasks (accepted_assignment_q)."""
        return self.filter(accepted_assignment_q())


class HumanScoreQuerySet(models.QuerySet):
    def accepted(self) -> HumanScoreQuerySet:
        """The scores that count as data (accepted_assignment_q)."""
        return self.filter(accepted_assignment_q(path="assignment__"))


class Assignment(TimestampedModel):
    """A lease of a task to one annotator."""

    objects = AssignmentQuerySet.as_manager()

    # Written on every claim and submit, so only the indexes reads need: task_id leads
    # assignment_once_per_annotator, campaign_id leads assignment_mine.
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments"
    )
    kind = models.CharField(
        max_length=10, choices=AssignmentKind.choices, default=AssignmentKind.NORMAL
    )
    status = models.CharField(
        max_length=10, choices=AssignmentStatus.choices, default=AssignmentStatus.ACTIVE
    )
    expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    active_ms = models.PositiveIntegerField(null=True, blank=True)  # focused time on task
    skip_reason = models.CharField(max_length=300, blank=True)
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=300, blank=True)
    # the language the task's page was shown in when it was submitted (a code of LANGUAGES);
    # empty: unknown (an API client that did not say, or a submission before it was recorded)
    language = models.CharField(max_length=10, blank=True, default="", db_default="")

    class Meta:
        constraints = [
            # never the same response twice to one annotator (a repeat is its own kind)
            models.UniqueConstraint(
                fields=["task", "annotator", "kind"], name="assignment_once_per_annotator"
            ),
            # one lease at a time per annotator and campaign (several tabs share it)
            models.UniqueConstraint(
                fields=["campaign", "annotator"],
                condition=Q(status="active"),
                name="assignment_one_active_lease",
            ),
            models.CheckConstraint(
                condition=Q(status__in=AssignmentStatus.values), name="assignment_status_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["campaign", "annotator", "status"], name="assignment_mine"),
            models.Index(
                fields=["expires_at"],
                name="assignment_active_expiry",
                condition=Q(status="active"),
            ),
        ]

    def __str__(self) -> str:
        return f"assignment {self.pk} ({self.status})"


class HumanScore(TimestampedModel):
    """One annotator's score of one response on one skill (1-5 or N/A)."""

    objects = HumanScoreQuerySet.as_manager()

    # Three rows per submission: only the indexes reads need. assignment_id leads
    # humanscore_unique; skills and rubrics are append-only (their PROTECT check may scan).
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    assignment = models.ForeignKey(
        Assignment, on_delete=models.CASCADE, related_name="scores", db_index=False
    )
    # Denormalised from the assignment for analytics reads (written once, with it). No own
    # index: humanscore_campaign_updated leads with campaign.
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    response = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="human_scores", db_index=False
    )
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="+", db_index=False)
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="+", db_index=False)
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    is_na = models.BooleanField(default=False)
    rationale = models.TextField(blank=True)
    time_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "skill"], name="humanscore_unique"),
            models.CheckConstraint(
                condition=Q(is_na=True, score__isnull=True)
                | Q(is_na=False, score__gte=1, score__lte=5),
                name="humanscore_value_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["response", "skill"], name="humanscore_response_skill"),
            models.Index(fields=["annotator", "campaign"], name="humanscore_annotator"),
            # what changed in a project since a report snapshot was computed
            models.Index(fields=["campaign", "updated_at"], name="humanscore_campaign_updated"),
        ]

    def __str__(self) -> str:
        return f"{self.assignment_id}:{self.skill_id}={'N/A' if self.is_na else self.score}"


class HumanPreferenceQuerySet(models.QuerySet):
    def accepted(self) -> HumanPreferenceQuerySet:
        """The preferences that count as data (accepted_assignment_q)."""
        return self.filter(accepted_assignment_q(path="assignment__"))


class HumanPreference(TimestampedModel):
    """One annotator's preference between a pairwise task's two responses on one skill
    (`skill` null: overall). `choice` is in the task's terms (PairChoice: A is
    `response_a` = Task.response), whichever side each response was shown on."""

    objects = HumanPreferenceQuerySet.as_manager()

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    assignment = models.ForeignKey(
        Assignment, on_delete=models.CASCADE, related_name="preferences", db_index=False
    )
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    response_a = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    response_b = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    skill = models.ForeignKey(
        Skill, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    rubric = models.ForeignKey(
        Rubric, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    choice = models.CharField(max_length=10, choices=PairChoice.choices)
    strength = models.PositiveSmallIntegerField(null=True, blank=True)  # 1 slightly, 2 much
    rationale = models.TextField(blank=True)
    time_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "skill"],
                condition=Q(skill__isnull=False),
                name="humanpreference_unique_skill",
            ),
            models.UniqueConstraint(
                fields=["assignment"],
                condition=Q(skill__isnull=True),
                name="humanpreference_unique_overall",
            ),
            models.CheckConstraint(
                condition=Q(choice__in=PairChoice.values), name="humanpreference_choice_valid"
            ),
            models.CheckConstraint(
                condition=Q(strength__isnull=True) | Q(strength__gte=1, strength__lte=2),
                name="humanpreference_strength_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["response_a", "response_b"], name="humanpreference_pair"),
            models.Index(fields=["campaign", "updated_at"], name="humanpreference_updated"),
            models.Index(fields=["annotator", "campaign"], name="humanpreference_annotator"),
        ]

    def __str__(self) -> str:
        return f"{self.assignment_id}:{self.skill_id or 'overall'}={self.choice}"


class GoldPreference(models.Model):
    """The known preference of a gold, attention, training or qualification pair task on
    one skill (null: overall), with the explanation shown as feedback."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="gold_preferences")
    skill = models.ForeignKey(
        Skill, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    choice = models.CharField(max_length=10, choices=PairChoice.choices)
    explanation = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["task", "skill"],
                condition=Q(skill__isnull=False),
                name="goldpreference_unique_skill",
            ),
            models.UniqueConstraint(
                fields=["task"],
                condition=Q(skill__isnull=True),
                name="goldpreference_unique_overall",
            ),
            models.CheckConstraint(
                condition=Q(choice__in=PairChoice.values), name="goldpreference_choice_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"gold {self.task_id}:{self.skill_id or 'overall'}={self.choice}"


class HumanScoreRevision(models.Model):
    """The audit trail of a score edit: who, when, before and after. Kept when the score
    is deleted (`score` becomes null; the deletion is in HumanScoreDeletion)."""

    score = models.ForeignKey(
        HumanScore, null=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    # the score's id, kept when the score is deleted
    score_ref = models.BigIntegerField(null=True, db_index=True)
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    edited_at = models.DateTimeField(auto_now_add=True)
    before = models.JSONField()
    after = models.JSONField()

    class Meta:
        ordering = ["score", "edited_at"]

    def __str__(self) -> str:
        return f"revision of {self.score_id} at {self.edited_at}"


class GoldScore(models.Model):
    """The known score of a gold or attention-check task on one skill."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="gold_scores")
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="+")
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    is_na = models.BooleanField(default=False)
    tolerance = models.PositiveSmallIntegerField(default=0)  # |given - gold| allowed
    explanation = models.TextField(blank=True)  # shown as feedback when enabled

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "skill"], name="goldscore_unique"),
            models.CheckConstraint(
                condition=Q(is_na=True, score__isnull=True)
                | Q(is_na=False, score__gte=1, score__lte=5),
                name="goldscore_value_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"gold {self.task_id}:{self.skill_id}"


class ReannotationRequest(models.Model):
    """The audit trail of one "send back for re-annotation" request: who asked, when, for
    which responses of which campaign, how many extra annotations, and what it did to each
    response's task (annotation/services/reannotation.py). Rows are only ever inserted."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="reannotation_requests", db_index=False
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    extra = models.PositiveSmallIntegerField()  # annotations wanted beyond those submitted
    response_ids = models.JSONField(default=list)  # as requested, sorted, without repeats
    # one entry per requested response: {"response", "outcome", "task", "overlap_before",
    # "overlap_after", "submitted", "eligible"}
    outcomes = models.JSONField(default=list)
    reopened = models.PositiveIntegerField(default=0)  # tasks whose overlap was raised
    campaign_status_before = models.CharField(max_length=20, choices=CampaignStatus.choices)
    campaign_status_after = models.CharField(max_length=20, choices=CampaignStatus.choices)
    campaign_overlap_before = models.PositiveSmallIntegerField()
    campaign_overlap_after = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(extra__gte=1, extra__lte=5), name="reannotation_extra_1_5"
            ),
        ]
        indexes = [
            # a campaign's request history, newest first
            models.Index(fields=["campaign", "-created_at"], name="reannotation_campaign"),
        ]

    def __str__(self) -> str:
        return f"re-annotation {self.pk} of campaign {self.campaign_id} (+{self.extra})"


class HumanScoreDeletion(models.Model):
    """The audit trail of a deleted score (annotation.audit): what it was, who deleted it
    (the signed-in user of the request, if any) and when. No foreign keys to what was
    deleted, so the record outlives it; ids are kept as numbers."""

    score_ref = models.BigIntegerField(db_index=True)
    campaign_ref = models.BigIntegerField(null=True)
    response_ref = models.BigIntegerField(null=True)
    annotator_ref = models.BigIntegerField(null=True)
    annotator_username = models.CharField(max_length=150, blank=True)
    skill_name = models.CharField(max_length=200, blank=True)
    # {"score", "is_na", "rationale", "time_ms", "rubric_id", "assignment_id", "created_at",
    #  "updated_at"}
    before = models.JSONField()
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    deleted_at = models.DateTimeField(auto_now_add=True)
    # where it happened: the request path, or the command
    context = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-deleted_at", "-id"]

    def __str__(self) -> str:
        return f"deletion of score {self.score_ref} at {self.deleted_at}"


# --- screening: training and qualification ------------------------------------------------


class ScreeningPhase(models.TextChoices):
    TRAINING = "training", "Training"
    QUALIFICATION = "qualification", "Qualification test"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Screened out"


class Screening(models.Model):
    """Where one annotator stands in a screening campaign (annotation/screening/): the phase,
    and the qualification result per skill once decided. Written only by its services."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="screenings")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    phase = models.CharField(
        max_length=15, choices=ScreeningPhase.choices, default=ScreeningPhase.TRAINING
    )
    # {skill_id (str): {"agreed": n, "total": n}} over the qualification tasks answered
    per_skill = models.JSONField(default=dict, blank=True)
    score = models.FloatField(null=True, blank=True)  # the lowest per-skill agreement
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "annotator"], name="screening_unique"),
            models.CheckConstraint(
                condition=Q(phase__in=ScreeningPhase.values), name="screening_phase_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"screening {self.campaign_id}:{self.annotator_id} {self.phase}"


# --- recruiting platforms: study links and the workers who came through them -------------


class Platform(models.TextChoices):
    PROLIFIC = "prolific", "Prolific"
    MTURK = "mturk", "Amazon Mechanical Turk"
    SONA = "sona", "SONA Systems"
    GENERIC = "generic", "Any other (?worker=)"


class StudyLink(TimestampedModel):
    """A campaign's entry link for one recruiting platform (annotation/study/). Opening
    /study/<token>/ with the platform's worker parameters signs a worker in to a
    password-less account bound to that worker id and this campaign."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="study_links")
    platform = models.CharField(max_length=10, choices=Platform.choices)
    token = models.CharField(max_length=64, unique=True)  # unguessable, in the URL
    is_open = models.BooleanField(default=True)
    # where the completion page sends the worker; {code} is replaced by the code shown.
    # Empty: the platform's default (Prolific's completion URL; MTurk's submit form).
    completion_url = models.CharField(max_length=500, blank=True)
    max_participants = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(platform__in=Platform.values), name="studylink_platform_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.platform} link of campaign {self.campaign_id}"


class ParticipantState(models.TextChoices):
    CONSENT = "consent", "Reading the consent page"
    WORKING = "working", "Working"
    COMPLETED = "completed", "Completed"
    SCREENED_OUT = "screened_out", "Screened out"
    LEFT = "left", "Left before the required work (no code)"
    DECLINED = "declined", "Declined consent"


class Participant(models.Model):
    """A worker who came through a study link: their platform ids (shown to the campaign's
    researchers and in exports, never to other annotators) and their password-less account.
    One account per (campaign, platform, worker id), one worker id per account."""

    link = models.ForeignKey(StudyLink, on_delete=models.PROTECT, related_name="participants")
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="participants", db_index=False
    )
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="participant"
    )
    platform = models.CharField(max_length=10, choices=Platform.choices)
    worker_id = models.CharField(max_length=200)  # PROLIFIC_PID, workerId, SONA id, ?worker=
    study_id = models.CharField(max_length=200, blank=True)  # STUDY_ID, hitId
    session_id = models.CharField(max_length=200, blank=True)  # SESSION_ID, assignmentId
    # MTurk's turkSubmitTo (the submit form's host), as received; validated before use
    submit_to = models.CharField(max_length=300, blank=True)
    state = models.CharField(
        max_length=15, choices=ParticipantState.choices, default=ParticipantState.CONSENT
    )
    consented_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Why the study ended for them (annotation/study/services.py END_REASONS): the quota met,
    # no task left, the qualification or quality rules failed, left early.
    end_reason = models.CharField(max_length=20, blank=True)
    # A keyed hash of the resume code the participant was shown (continuing on another
    # device needs it, not only the platform id); empty for participants admitted before
    # resume codes existed.
    resume_code_hash = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "platform", "worker_id"], name="participant_unique_worker"
            ),
            models.CheckConstraint(
                condition=Q(state__in=ParticipantState.values), name="participant_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.platform}:{self.worker_id} in campaign {self.campaign_id}"


# --- review: adjudicated scores, kept apart from the raw ones ---------------------------


class AdjudicatedScore(models.Model):
    """A reviewer's settled score of one response on one skill in one campaign, with a note
    (annotation/review/). The annotators' raw scores are never changed; exports show both
    and the report uses these only when asked to (labelled "adjudicated")."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="+")
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    is_na = models.BooleanField(default=False)
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "response", "skill"], name="adjudicated_unique"
            ),
            models.CheckConstraint(
                condition=Q(is_na=True, score__isnull=True)
                | Q(is_na=False, score__gte=1, score__lte=5),
                name="adjudicated_value_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"adjudicated {self.campaign_id}:{self.response_id}:{self.skill_id}"


# --- proposed and verified metadata (docs/METADATA.md) ------------------------------------------


class ProposalSource(models.TextChoices):
    MODEL = "model", "A model (a metadata run)"
    DATASET = "dataset", "The dataset's own metadata"


class ProposalStatus(models.TextChoices):
    OK = "ok", "Parsed"
    PARSE_FAILED = "parse_failed", "Output not parseable"
    FAILED = "failed", "Call failed"


class MetadataProposal(models.Model):
    """Metadata proposed for an item: its domains, its three skills (keys, most relevant
    first) and its difficulty, by a model in a metadata run (`run_id`, a judging.MetadataRun
    pk, kept as a number because annotation imports no downstream app) or by the dataset
    itself (the metadata that came with an import, e.g. FLASK's model-made labels).

    `origin` is "run:<id>" or "dataset": one proposal per item and origin, so a redelivered
    task or a second snapshot upserts instead of duplicating. A proposal the model's answer
    could not be read into keeps the raw text with status parse_failed and no values."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="metadata_proposals")
    origin = models.CharField(max_length=40)
    source = models.CharField(max_length=10, choices=ProposalSource.choices)
    run_id = models.PositiveIntegerField(null=True, blank=True)
    label = models.CharField(max_length=200, blank=True)  # the judge's name, or "dataset"
    status = models.CharField(max_length=15, choices=ProposalStatus.choices)
    domains = models.JSONField(default=list, blank=True)  # domain keys
    skills = models.JSONField(default=list, blank=True)  # skill keys, most relevant first
    difficulty = models.PositiveSmallIntegerField(null=True, blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "origin"]
        constraints = [
            models.UniqueConstraint(fields=["item", "origin"], name="metadataproposal_unique"),
            models.CheckConstraint(
                condition=Q(source__in=ProposalSource.values), name="metadataproposal_source"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ProposalStatus.values), name="metadataproposal_status"
            ),
            models.CheckConstraint(
                condition=Q(difficulty__isnull=True) | Q(difficulty__gte=1, difficulty__lte=5),
                name="metadataproposal_difficulty_1_5",
            ),
        ]
        indexes = [models.Index(fields=["origin", "item"], name="metadataproposal_origin")]

    def __str__(self) -> str:
        return f"{self.item_id}:{self.origin} ({self.status})"


class VerificationVerdict(models.TextChoices):
    ACCEPTED = "accepted", "Accepted"
    EDITED = "edited", "Edited"
    REJECTED = "rejected", "Rejected"


class MetadataVerification(models.Model):
    """A person's check of a proposal: accepted (its values become the item's), edited (the
    person's values do) or rejected (the item keeps what it had). `domains`, `skills` and
    `difficulty` are the item's metadata after the check, `previous` what it was before, so
    the item keeps both the proposed and the verified values with who and when. Rows are
    only added: the latest row of an item is its verified metadata."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="metadata_verifications")
    proposal = models.ForeignKey(
        MetadataProposal, on_delete=models.CASCADE, related_name="verifications"
    )
    verdict = models.CharField(max_length=10, choices=VerificationVerdict.choices)
    domains = models.JSONField(default=list, blank=True)
    skills = models.JSONField(default=list, blank=True)
    difficulty = models.PositiveSmallIntegerField(null=True, blank=True)
    previous = models.JSONField(default=dict, blank=True)
    verified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verified_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "-verified_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(verdict__in=VerificationVerdict.values),
                name="metadataverification_verdict",
            ),
            models.CheckConstraint(
                condition=Q(difficulty__isnull=True) | Q(difficulty__gte=1, difficulty__lte=5),
                name="metadataverification_difficulty_1_5",
            ),
        ]
        indexes = [
            models.Index(fields=["item", "-verified_at"], name="metadataverification_latest")
        ]

    def __str__(self) -> str:
        return f"{self.item_id}: {self.verdict}"
