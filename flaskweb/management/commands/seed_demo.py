"""python manage.py seed_demo: demo users, project, dataset, campaigns (the pairwise one with
the demo annotators' first choices), pilot ratings and a baseline judge run (idempotent). It
lives in the composition root because it sets up every app."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from analytics.minimums import minimum
from annotation.campaigns.services import (
    campaign_activate,
    campaign_create,
    gold_task_set,
)
from annotation.catalogue.services import catalogue_sync_builtins
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.languages.services import campaign_language_set, campaign_translation_set
from annotation.models import (
    Campaign,
    CampaignMode,
    HumanPreference,
    PairChoice,
    PairDesign,
    Platform,
    Project,
    ProjectRole,
    Response,
    Task,
    TaskKind,
    UploadSource,
)
from annotation.pace.services import campaign_pace_update
from annotation.screening.services import screening_settings_update
from annotation.screening.setup import screening_task_set
from annotation.selectors import pair_questions
from annotation.services.assignments import assignment_claim_next
from annotation.services.metadata import metadata_dataset_snapshot
from annotation.services.preferences import PreferenceInput, human_preference_submit
from annotation.services.projects import membership_set, project_get_or_create
from annotation.study.services import study_link_create, study_settings_update

DEMO_FILE = Path(__file__).resolve().parents[3] / "annotation" / "demo" / "demo_dataset.jsonl"
# Demo-only logins, printed on start; never use these outside a local demo.
DEMO_USERS = [
    ("admin", "admin-demo", ProjectRole.ADMIN, True),
    ("researcher", "researcher-demo", ProjectRole.RESEARCHER, False),
    ("annotator1", "annotator1-demo", ProjectRole.ANNOTATOR, False),
    ("annotator2", "annotator2-demo", ProjectRole.ANNOTATOR, False),
    ("annotator3", "annotator3-demo", ProjectRole.ANNOTATOR, False),
    ("reviewer", "reviewer-demo", ProjectRole.REVIEWER, False),
]
STUDY_CAMPAIGN = "Demo crowd study"
PAIRWISE_CAMPAIGN = "Demo pairwise comparison"
DEMO_ANNOTATORS = ("annotator1", "annotator2", "annotator3")
#: The pairwise campaign's pairs, and how many pairs on how many items the demo annotators
#: have judged (K = 2 each) when the demo starts: enough for the preference figures and
#: their intervals (analytics/minimums.py: 20 labels per question for the strengths, 10
#: pairs with two labels for agreement, 10 items for a bootstrap interval); claims serve
#: pairs item by item, so about two thirds of the pairs are judged and the rest left to try.
PAIR_BUDGET = 32
PAIRS_JUDGED = max(minimum("bradley_terry").n // 2, minimum("agreement").n)
ITEMS_JUDGED = minimum("interval").n
#: How the demo annotators' choices lean: the demo's systems from best to worst.
SYSTEM_ORDER = ("cobalt-70b", "basalt-13b", "delta-chat", "aurora-7b")
# Known scores of the demo's first item (Logical Correctness, Robustness, Efficiency) for the
# crowd study's screening, with what a careful annotator should notice.
SCREENING = [
    (
        TaskKind.TRAINING,
        "aurora-7b",
        {"Logical Correctness": 2, "Logical Robustness": 1, "Logical Efficiency": 3},
        "The one-liner fails when fewer than two distinct values are given (an empty list or "
        "[4, 4] raises IndexError instead of returning None), so robustness is at the bottom. "
        "Sorting is O(n log n) where one pass was asked for.",
    ),
    (
        TaskKind.TRAINING,
        "basalt-13b",
        {"Logical Correctness": 5, "Logical Robustness": 5, "Logical Efficiency": 3},
        "Correct on every edge case, including repeats and short lists. It still sorts, "
        "so it is not the single pass the instruction asked for.",
    ),
    (
        TaskKind.QUALIFICATION,
        "cobalt-70b",
        {"Logical Correctness": 5, "Logical Robustness": 5, "Logical Efficiency": 5},
        "",
    ),
    (
        TaskKind.QUALIFICATION,
        "delta-chat",
        {"Logical Correctness": 2, "Logical Robustness": 1, "Logical Efficiency": 4},
        "",
    ),
]


class Command(BaseCommand):
    help = "Create demo users, the demo project and import the demo dataset (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--base-url",
            default="http://127.0.0.1:8000",
            help="where the demo is served, for the study link printed at the end",
        )

    def handle(self, *args, **options):
        catalogue_sync_builtins()
        project, _ = project_get_or_create(slug="demo", name="Demo: everyday assistant tasks")
        if not project.description:
            Project.objects.filter(pk=project.pk).update(
                description="Sixteen instructions of our own writing, each answered by four "
                "fictional systems, to try the whole FLASK loop offline."
            )
        User = get_user_model()
        for username, password, role, is_admin in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.is_staff = user.is_superuser = is_admin
                user.email = f"{username}@demo.invalid"
                user.save()
            membership_set(project=project, user=user, role=role)
        if not project.datasets.filter(name="Demo set").exists():
            upload = dataset_upload_create(
                project=project,
                dataset_name="Demo set",
                source=UploadSource.CLI,
                files=[(FileSpec(DEMO_FILE.name), str(DEMO_FILE))],
            )
            upload = dataset_import(upload_id=upload.pk)
            self.stdout.write(
                f"demo dataset: {upload.status}, {upload.items_created} items, "
                f"{upload.responses_created} responses"
            )
        # the demo items' own metadata as their "dataset" proposal, so the verification page
        # (docs/METADATA.md) has proposals to check before any metadata run
        metadata_dataset_snapshot(dataset=project.datasets.get(name="Demo set"))
        self._campaign(project)
        self._pairwise_campaign(project)
        self._first_choices(project)
        self._baseline_judge(project)
        self._local_provider(project)
        self._pilot_ratings(project)
        link = self._crowd_study(project)
        self.stdout.write("Demo logins (local demo only):")
        for username, password, role, _ in DEMO_USERS:
            self.stdout.write(f"  {username:<11} / {password:<16} ({role})")
        base = options["base_url"].rstrip("/")
        self.stdout.write(
            f"Demo crowd study (no login; any worker id, in a private window):\n"
            f"  {base}/study/{link.token}/?worker=demo-worker-1\n"
            f"  (in Spanish or Arabic too: a browser asking for either, or the Language menu)"
        )

    def _crowd_study(self, project):
        """A campaign as a crowd study runs it: workers come through a generic study link
        (no account made by hand), agree to a consent text, train on two responses whose
        known scores are explained, pass a two-response qualification test (within 1 of the
        known score on at least 80 % per skill), then score up to 6 real tasks with a break
        suggested every 3, and get a completion code. Returns its link."""
        campaign = Campaign.objects.filter(project=project, name=STUDY_CAMPAIGN).first()
        if campaign is not None:
            return campaign.study_links.order_by("pk").first()
        User = get_user_model()
        dataset = project.datasets.get(name="Demo set")
        researcher = User.objects.get(username="researcher")
        campaign = campaign_create(
            project=project,
            dataset=dataset,
            name=STUDY_CAMPAIGN,
            overlap=2,
            quota_per_annotator=6,
            instructions=(
                "You will score answers that AI systems gave to everyday requests. For each "
                "skill, pick the level whose description fits best (1-5), or N/A when the "
                "skill does not apply. Keyboard: 1-5, n, arrows, Enter."
            ),
            created_by=researcher,
        )
        study_settings_update(
            campaign=campaign,
            consent_text=(
                "This is a demonstration study of flaskweb. You will read instructions and "
                "AI-written answers and rate them; it takes about ten minutes. We store your "
                "worker id, your ratings and how long each took, and nothing else. You may "
                "stop at any time."
            ),
            completion_code="DEMO-DONE-7Q2K",
            screenout_code="DEMO-THANKS-4PX9",
        )
        campaign_pace_update(
            campaign=campaign,
            break_every=3,
            break_minutes=2,
            hourly_wage=Decimal("12.00"),
            wage_currency="USD",
        )
        first = dataset.items.order_by("external_id").first()
        skills = {link.skill.name: link.skill_id for link in first.item_skills.all()}
        for kind, model_name, known, explanation in SCREENING:
            screening_task_set(
                campaign=campaign,
                response=first.responses.get(model_name=model_name),
                scores={skills[name]: value for name, value in known.items()},
                kind=kind,
                explanation=explanation,
            )
        screening_settings_update(campaign=campaign, screening=True, pass_mark=0.8, rule="within1")
        self._study_languages(campaign)
        campaign_activate(campaign=campaign)
        link = study_link_create(
            campaign=campaign, platform=Platform.GENERIC, created_by=researcher
        )
        self.stdout.write(f"demo crowd study: {campaign.tasks.count()} tasks, screening on")
        return link

    def _study_languages(self, campaign):
        """The study in Spanish and Arabic too (docs/LANGUAGES.md): a browser asking for either
        gets the interface and these texts in it, and the pages' Language menu switches; the
        rubric anchors stay the catalogue's English (the per-skill fallback)."""
        campaign_language_set(
            campaign=campaign,
            language="",
            completion_message="Thank you for taking part. Your code is below.",
        )
        campaign_translation_set(
            campaign=campaign,
            language="es",
            consent_text=(
                "Este es un estudio de demostración de flaskweb. Leerás instrucciones y "
                "respuestas escritas por sistemas de IA y las valorarás; lleva unos diez "
                "minutos. Guardamos tu identificador, tus valoraciones y el tiempo de cada una, "
                "y nada más. Puedes dejarlo cuando quieras."
            ),
            instructions=(
                "Valorarás respuestas que dieron sistemas de IA a peticiones cotidianas. En "
                "cada habilidad, elige el nivel cuya descripción encaja mejor (1-5), o N/A si "
                "la habilidad no se aplica. Teclado: 1-5, n, flechas, Intro."
            ),
            completion_message="Gracias por participar. Tu código está abajo.",
        )
        campaign_translation_set(
            campaign=campaign,
            language="ar",
            consent_text=(
                "هذه دراسة تجريبية لـ flaskweb. ستقرأ تعليمات وإجابات كتبتها أنظمة ذكاء "
                "اصطناعي وتقيّمها؛ تستغرق نحو عشر دقائق. نحفظ معرّفك وتقييماتك والوقت الذي "
                "استغرقه كل منها، ولا شيء غير ذلك. يمكنك التوقف في أي وقت."
            ),
            instructions=(
                "ستقيّم إجابات قدّمتها أنظمة ذكاء اصطناعي لطلبات يومية. لكل مهارة، اختر "
                "المستوى الذي يناسب وصفه أكثر (1-5)، أو «لا ينطبق» إذا لم تنطبق المهارة. "
                "لوحة المفاتيح: 1-5، n، الأسهم، Enter."
            ),
            completion_message="شكرًا لمشاركتك. رمزك أدناه.",
        )

    def _campaign(self, project):
        """A running campaign over the demo set: 3 annotators per response, one gold task."""
        if Campaign.objects.filter(project=project, name="Demo campaign").exists():
            return
        User = get_user_model()
        annotators = User.objects.filter(username__in=["annotator1", "annotator2", "annotator3"])
        dataset = project.datasets.get(name="Demo set")
        admin = User.objects.get(username="admin")
        campaign = campaign_create(
            project=project,
            dataset=dataset,
            name="Demo campaign",
            overlap=3,
            annotators=list(annotators),
            instructions=(
                "Read the instruction and the reference answer, then score the response on "
                "each skill against the level descriptions. Use N/A only when a skill truly "
                "does not apply. Keyboard: 1-5 score, n = N/A, arrows move, Enter submits."
            ),
            gold_rate=0.1,
            repeat_rate=0.05,
            gold_feedback=True,
            created_by=admin,
        )
        # The sanitiser demo's hostile answer doubles as a gold task with obvious scores.
        hostile = Response.objects.filter(
            item__dataset=dataset, item__source_task="demo-sanitiser", model_name="basalt-13b"
        ).first()
        if hostile is not None:
            skills = hostile.item.item_skills.values_list("skill_id", flat=True)
            gold_task_set(
                campaign=campaign,
                response=hostile,
                scores={skill_id: 1 for skill_id in skills},
                tolerance=1,
                explanation="The answer pastes raw, unsafe markup instead of a usable form.",
            )
        campaign_activate(campaign=campaign)
        self.stdout.write(f"demo campaign: {campaign.tasks.count()} tasks, K=3")

    def _pairwise_campaign(self, project):
        """A running pairwise campaign: a sample of 32 pairs of the four systems, balanced
        per system, 2 annotators per pair, per skill and overall, with strength."""
        if Campaign.objects.filter(project=project, name=PAIRWISE_CAMPAIGN).exists():
            return
        User = get_user_model()
        annotators = User.objects.filter(username__in=["annotator1", "annotator2", "annotator3"])
        campaign = campaign_create(
            project=project,
            dataset=project.datasets.get(name="Demo set"),
            name=PAIRWISE_CAMPAIGN,
            overlap=2,
            annotators=list(annotators),
            instructions=(
                "Read both answers to the same instruction, then say for each skill, and "
                "overall, which answer is better, or that they tie, or that both fall short. "
                "Keyboard: a or b for the better answer, then 1 (slightly) or 2 (much); t tie; "
                "x both bad; arrows move; Enter submits."
            ),
            mode=CampaignMode.PAIRWISE,
            pair_design=PairDesign.SAMPLED,
            pair_budget=PAIR_BUDGET,
            pair_choices=["a", "b", "tie", "both_bad"],
            pair_strength=True,
            created_by=User.objects.get(username="admin"),
        )
        created = campaign_activate(campaign=campaign)
        self.stdout.write(f"demo pairwise campaign: {created} pairs, K=2")

    def _first_choices(self, project: Project) -> None:
        """The demo annotators' choices on the pairwise campaign's first pairs, two each,
        claimed and submitted through the services the pair card uses, so the preference
        page has figures from the start: pairs in the order the claim serves them, until at
        least PAIRS_JUDGED pairs on ITEMS_JUDGED items have both their choices (the rest is
        left to whoever tries the demo). The three take turns, so every judged pair has two
        of them. Per question a pair has a likely answer (`_demo_choice`: the better system
        of SYSTEM_ORDER, ties, both bad), which each annotator gives three times in four,
        else an answer of their own; every sixth pair is a tie overall. Seeds are made of
        the pair and the annotator, never of the database's ids. Written once: a campaign
        with choices is left as it is."""
        campaign = Campaign.objects.get(project=project, name=PAIRWISE_CAMPAIGN)
        if HumanPreference.objects.filter(campaign=campaign).exists():
            return
        User = get_user_model()
        annotators = list(User.objects.filter(username__in=DEMO_ANNOTATORS).order_by("username"))
        started: dict[int, int] = {}  # task id -> how many choices it has from us
        complete_items: list[int] = []  # the item of each pair with both its choices
        written = idle = turn = 0
        while idle < len(annotators):
            if len(complete_items) >= PAIRS_JUDGED and len(set(complete_items)) >= ITEMS_JUDGED:
                break
            annotator = annotators[turn % len(annotators)]
            turn += 1
            lease = assignment_claim_next(campaign=campaign, annotator=annotator)
            if lease is None:
                idle += 1
                continue
            idle = 0
            task = Task.objects.select_related("response__item", "response_b").get(pk=lease.task_id)
            assert task.response_b is not None  # a pairwise campaign's tasks are pairs
            index = list(started).index(task.pk) if task.pk in started else len(started)
            a, b = task.response.model_name, task.response_b.model_name
            pair = f"{task.response.item.external_id}|{a}|{b}"
            likely, own = random.Random(pair), random.Random(f"{pair}|{annotator.username}")
            questions = pair_questions(campaign=campaign, item_id=task.response.item_id)
            asked: list[int | None] = [skill.skill_id for skill in questions.skills]
            if questions.overall:
                asked.append(None)  # the overall question
            answers = []
            for skill_id in asked:
                choice = _demo_choice(likely, a, b)
                if skill_id is None and index % 6 == 5:
                    choice = PairChoice.TIE.value
                elif own.random() >= 0.75:
                    choice = _demo_choice(own, a, b)
                strength = None
                if choice in (PairChoice.A, PairChoice.B):
                    strength = 2 if own.random() < 0.3 else 1
                answers.append(PreferenceInput(skill_id=skill_id, choice=choice, strength=strength))
            human_preference_submit(
                assignment_id=lease.pk,
                annotator=annotator,
                preferences=answers,
                active_ms=own.randint(25_000, 75_000),
            )
            written += 1
            started[task.pk] = started.get(task.pk, 0) + 1
            if started[task.pk] == campaign.overlap:
                complete_items.append(task.response.item_id)
        self.stdout.write(
            f"demo pairwise choices: {written} judgments of {len(complete_items)} pairs"
            " by the demo annotators"
        )

    def _baseline_judge(self, project):
        """An offline baseline judge run over the demo campaign, so the demo shows judge
        scores beside human ones without any model API (runs in the demo's worker)."""
        from judging.models import JudgeConfig, JudgeKind
        from judging.services import judge_config_create, judge_run_create, judge_run_start

        if JudgeConfig.objects.filter(project=project, name="ROUGE-L baseline").exists():
            return
        judge = judge_config_create(
            project=project, name="ROUGE-L baseline", kind=JudgeKind.BASELINE, baseline="rouge-l"
        )
        campaign = Campaign.objects.get(project=project, name="Demo campaign")
        run = judge_run_create(judge=judge, campaign=campaign)
        judge_run_start(run=run)
        self.stdout.write(f"demo judge run: {run.total} baseline judgments queued")

    def _local_provider(self, project):
        """A provider for the project's local fake judge (`python -m devtools.openai_server
        --port 8089`), declared as a site admin would: local, no key, approved, offered to
        the demo project only; the demo researcher can then make an LLM judge offline."""
        from judging.models import Provider
        from judging.services import provider_save

        if Provider.objects.filter(name="local-fake-judge").exists():
            return
        provider = provider_save(
            provider=Provider(
                name="local-fake-judge",
                label="Local fake judge (python -m devtools.openai_server --port 8089)",
                base_urls=["http://127.0.0.1:8089/v1"],
                is_local=True,
                approved=True,
            )
        )
        provider.projects.set([project])
        self.stdout.write("demo judge provider: local-fake-judge at http://127.0.0.1:8089/v1")

    def _pilot_ratings(self, project):
        """Made-up ratings of an earlier pilot, imported as long-format scores, so the
        analytics pages have people and a second judge to compare from the start: three
        pilot raters and an "imported LLM judge" score every response of the demo set on its
        skills, around a per-system quality with some disagreement (fixed seed: the same
        bytes every time, so a second seed imports nothing)."""
        from analytics.imports.services import ScoreImportRejected, scores_import

        rng = random.Random(20231129)
        lines = ["item,system,rater,rater_kind,skill,score"]
        responses = (
            Response.objects.filter(item__dataset__project=project, item__dataset__name="Demo set")
            .select_related("item")
            .prefetch_related("item__item_skills__skill")
            .order_by("item__external_id", "model_name")
        )
        quality = {}
        for response in responses:
            base = quality.setdefault(response.model_name, 2.2 + 2.2 * rng.random())
            for link in response.item.item_skills.all():
                truth = base + rng.uniform(-1.2, 1.2)
                for rater in ("pilot-rater-1", "pilot-rater-2", "pilot-rater-3"):
                    score = "N/A" if rng.random() < 0.03 else _likert(truth + rng.gauss(0, 0.7))
                    lines.append(_csv_line(response, rater, "human", link.skill.name, score))
                judged = _likert(truth + rng.gauss(0.3, 0.8))
                lines.append(
                    _csv_line(response, "Imported LLM judge", "judge", link.skill.name, judged)
                )
        try:
            result = scores_import(
                project_slug=project.slug,
                files=[("demo_pilot_ratings.csv", ("\n".join(lines) + "\n").encode())],
                dataset_name="Demo set",
            )
        except ScoreImportRejected as exc:  # the demo set was changed by hand
            self.stdout.write(f"demo pilot ratings not imported: {exc.problems[0]}")
            return
        if not result.already_imported:
            self.stdout.write(f"demo pilot ratings: {result.batch.scores_created} scores imported")


def _demo_choice(rng: random.Random, model_a: str, model_b: str) -> str:
    """A choice between A (`model_a`) and B on a question, drawn from `rng`: usually the
    better system of SYSTEM_ORDER, less surely the closer the two are; sometimes a tie, or
    both bad when both are among the weaker two."""
    rank = {name: i for i, name in enumerate(SYSTEM_ORDER)}
    a, b = rank.get(model_a, len(SYSTEM_ORDER)), rank.get(model_b, len(SYSTEM_ORDER))
    draw = rng.random()
    tie = 0.15 if abs(a - b) == 1 else 0.05
    if draw < tie:
        weak = min(a, b) >= len(SYSTEM_ORDER) - 2
        return PairChoice.BOTH_BAD.value if weak and rng.random() < 0.4 else PairChoice.TIE.value
    better_wins = 0.7 + 0.1 * abs(a - b)
    better, worse = (
        (PairChoice.A.value, PairChoice.B.value)
        if a < b
        else (PairChoice.B.value, PairChoice.A.value)
    )
    return better if rng.random() < better_wins else worse


def _likert(value: float) -> int:
    return min(5, max(1, round(value)))


def _csv_line(response, rater: str, kind: str, skill: str, score) -> str:
    cells = [response.item.external_id, response.model_name, rater, kind, skill, str(score)]
    return ",".join('"' + c.replace('"', '""') + '"' for c in cells)
