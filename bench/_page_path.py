"""One annotator's cycle in process, on the JSON API or on the participants' page path.

`page`: a study participant (entered through a Prolific study link, so a study session in the
configured session backend) posts the scoring card's form as htmx does (form-encoded, the
form's CSRF token, HX-Request) and gets the next card back: one submission and the next task
in one request, the whole middleware stack, DEBUG off. `api`: a token annotator posts
`next` and then `submit` to the JSON API (two requests per submission).

Run it under callgrind to count instructions per cycle (the difference of two runs that
differ only by their number of measured cycles takes out start-up and set-up):

    .venv/bin/python bench/_page_path.py --setup          # the database, once
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/_page_path.py --path page --cycles 60
    .venv/bin/python bench/_page_path.py --path page --cycles 200 --queries   # SQL per cycle

`--root` runs another checkout (a worktree of an earlier commit) with the same harness, on
its own database (`flaskweb_pagepath_<checkout name>`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
SUBMIT_FORM = re.compile(r'hx-post="/assignments/(\d+)/submit/"')
SCORE_FIELD = re.compile(r'name="score-(\d+)"')
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
ITEMS, MODELS = 400, 4
PROJECT, DATASET, LONG_DATASET = "pagepath", "pagepath", "pagepath-long"
#: --cold: the campaign's texts are not rendered ahead (no worker ran), each card renders
COLD = False
#: --long: the dataset whose answers are about 2,000 characters
LONG = False


def environment(root: Path) -> None:
    """Production settings (DEBUG off, no per-query recording) without the HTTPS redirect."""
    db = "flaskweb_pagepath_" + re.sub(r"\W", "_", root.name)
    os.environ.update(
        DATABASE_URL=f"postgres://root@127.0.0.1:5432/{db}",
        DJANGO_SECRET_KEY="pagepath-bench-only-not-a-secret",
        DJANGO_DEBUG="false",
        DJANGO_SECURE_SSL_REDIRECT="false",
        DJANGO_ALLOWED_HOSTS="testserver",
        FLASKWEB_VAR_DIR=str(ROOT / "bench" / "out" / "page_path" / root.name),
        DJANGO_LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
    )
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(root))
    os.chdir(root)


def setup_database(root: Path) -> None:
    import psycopg

    db = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
    with psycopg.connect("postgresql://root@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {db}")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    words = [
        "the",
        "a",
        "model",
        "answer",
        "fact",
        "claim",
        "source",
        "river",
        "year",
        "city",
        "law",
        "test",
        "value",
    ]
    for dataset, paragraphs in ((DATASET, 0), (LONG_DATASET, 4)):
        path = Path(os.environ["FLASKWEB_VAR_DIR"]) / f"{dataset}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as out:
            for i in range(ITEMS):
                text = " ".join(words[(i + j) % len(words)] for j in range(60))
                # --long: answers of about 2,000 characters, as FLASK's often are
                more = "".join(
                    f"\n\n{k + 1}. Point **{k}** with `code {i}` and [a link](https://x.org/{k}). "
                    + text
                    for k in range(paragraphs)
                )
                row = {
                    "id": f"pp-{i:05d}",
                    "instruction": f"Question **{i}**: {text}",
                    "reference": f"Reference {i}: {text}",
                    "skills": ["Factuality", "Comprehension", "Conciseness"],
                    "domains": ["History"],
                    "difficulty": 2,
                    "responses": [
                        {
                            "model": f"model-{m}",
                            "text": f"Answer {m} *to* {i}. {text}{more}\n\n- a\n- b",
                        }
                        for m in range(MODELS)
                    ],
                }
                out.write(json.dumps(row) + "\n")
        options = ["--project", PROJECT, "--dataset", dataset, "--quiet-problems"]
        if dataset == DATASET:
            options.append("--create-project")
        call_command("import_dataset", str(path), *options)


def campaign_new(*, pool=()):
    from annotation.campaigns.services import campaign_activate, campaign_create
    from annotation.models import Campaign, CampaignStatus, Dataset

    name = LONG_DATASET if LONG else DATASET
    dataset = Dataset.objects.select_related("project").get(project__slug=PROJECT, name=name)
    Campaign.objects.filter(project=dataset.project, status=CampaignStatus.ACTIVE).update(
        status=CampaignStatus.FINISHED
    )
    campaign = campaign_create(
        project=dataset.project,
        dataset=dataset,
        name=f"pagepath {time.time()}",
        overlap=3,
        annotators=list(pool),
    )
    campaign_activate(campaign=campaign)
    campaign.refresh_from_db()
    try:  # a build that stores no renderings renders on every card
        from annotation.models import RenderedText
        from annotation.services.rendered_texts import campaign_texts_render
    except ImportError:
        return campaign
    if COLD:  # nothing rendered yet: each first card renders and stores its texts
        RenderedText.objects.all().delete()
    else:  # what the worker does after an activation
        campaign_texts_render(campaign_id=campaign.pk)
    return campaign


class Page:
    """The participants' path: a study session posting each card's form."""

    def __init__(self) -> None:
        from django.test import Client

        from annotation.models import Platform
        from annotation.study.services import study_link_create

        campaign = campaign_new()
        link = study_link_create(campaign=campaign, platform=Platform.PROLIFIC)
        self.client = Client(enforce_csrf_checks=True)
        pid = f"{int(time.time() * 1e6):024x}"[-24:]
        entered = self.client.get(
            f"/study/{link.token}/",
            {"PROLIFIC_PID": pid, "STUDY_ID": "s1", "SESSION_ID": "x1"},
        )
        assert entered.status_code == 302, entered.status_code
        self.client.get("/study/")
        first = self.client.get(f"/campaigns/{campaign.pk}/annotate/")
        assert first.status_code == 200, first.status_code
        self.card = first.content.decode()
        self.n = 0

    def cycle(self) -> None:
        card = self.card
        assignment = SUBMIT_FORM.search(card)[1]
        fields = {"csrfmiddlewaretoken": CSRF_FIELD.search(card)[1], "active_ms": "12345"}
        self.n += 1
        for skill in sorted(set(SCORE_FIELD.findall(card)), key=int):
            fields[f"score-{skill}"] = str(1 + self.n % 5)
            fields[f"time-{skill}"] = "2500"
        answer = self.client.post(
            f"/assignments/{assignment}/submit/",
            urlencode(fields),
            content_type="application/x-www-form-urlencoded",
            headers={"HX-Request": "true"},
        )
        self.card = answer.content.decode()
        assert answer.status_code == 200 and "Saved." in self.card, self.card[:2000]


class Api:
    """The JSON API: next, then submit, with a token."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client
        from rest_framework.authtoken.models import Token

        user = get_user_model().objects.create_user(username=f"pp-{time.time_ns()}")
        campaign = campaign_new(pool=[user])
        token = Token.objects.create(user=user).key
        self.client = Client(headers={"Authorization": f"Token {token}"})
        self.next = f"/api/v1/annotation/campaigns/{campaign.pk}/next/"

    def cycle(self) -> None:
        task = self.client.post(self.next).json()
        body = {"scores": [{"skill_id": s["skill_id"], "score": 3} for s in task["skills"]]}
        answer = self.client.post(
            f"/api/v1/annotation/assignments/{task['assignment_id']}/submit/",
            body,
            content_type="application/json",
        )
        assert answer.status_code == 201, answer.content


def page() -> Page:
    """The harness's `page` path: an object whose cycle() is one submission and the next card
    (set-up done: database, campaign, study session, first card)."""
    return Page()


def api() -> Api:
    return Api()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(ROOT), help="the checkout to run")
    parser.add_argument("--setup", action="store_true", help="(re)create the database")
    parser.add_argument("--path", choices=["page", "api"], default="page")
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--queries", action="store_true", help="print SQL per cycle")
    parser.add_argument("--cprofile", default="", help="write a cProfile of the cycles here")
    parser.add_argument("--cold", action="store_true", help="no texts rendered ahead")
    parser.add_argument("--long", action="store_true", help="answers of ~2,000 characters")
    args = parser.parse_args()
    global COLD, LONG
    COLD, LONG = args.cold, args.long
    root = Path(args.root).resolve()
    environment(root)
    if args.setup:
        setup_database(root)
        return 0
    import django

    django.setup()
    from django.conf import settings

    # no collectstatic here: static URLs unhashed (a dictionary lookup less than production)
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    runner = page() if args.path == "page" else api()
    for _ in range(args.warm):
        runner.cycle()
    if args.queries:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            for _ in range(args.cycles):
                runner.cycle()
        print(f"{args.path}: {len(ctx) / args.cycles:.2f} SQL statements per cycle")
        for q in ctx.captured_queries[-len(ctx) // args.cycles :]:
            print("  ", q["sql"][:160].replace("\n", " "))
        return 0
    sys.path.insert(0, str(ROOT / "bench"))
    from hot_path_cpu import callgrind, callgrind_total, under_callgrind

    if under_callgrind():  # valgrind --tool=callgrind --instr-atstart=no: count the cycles only
        callgrind("-i", "on")
        callgrind("-z")
        for _ in range(args.cycles):
            runner.cycle()
        total = callgrind_total()
        callgrind("-i", "off")
        print(f"{args.path}: {total / args.cycles / 1e6:.3f} M instructions per cycle")
        return 0
    if args.cprofile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    t0 = time.process_time()
    for _ in range(args.cycles):
        runner.cycle()
    cpu = time.process_time() - t0
    if args.cprofile:
        profiler.disable()
        profiler.dump_stats(args.cprofile)
    print(f"{args.path}: {args.cycles} cycles, {cpu / args.cycles * 1000:.2f} ms CPU per cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
