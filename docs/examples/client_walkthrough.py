"""A researcher's loop with the flaskweb Python client, against `make demo`
(docs/PYTHON_CLIENT.md): a project, a dataset uploaded and imported, a campaign activated,
a judge run followed to the end, scores made elsewhere pushed in, and the judge's scores,
the export and the report read back as pandas DataFrames.

    .venv/bin/python manage.py drf_create_token admin      # prints the admin's API token
    FLASKWEB_TOKEN=<that token> .venv/bin/python docs/examples/client_walkthrough.py

Each run makes a new project (`walkthrough-<time>`), so it can be run again.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import pandas as pd
from flaskweb_client import Client, FlaskwebError

SKILLS = ["Factuality", "Comprehension", "Readability"]
# a small dataset of our own: eight questions, each answered by two made-up systems
QUESTIONS = [
    ("Which planet is closest to the Sun?", "Mercury."),
    ("How many legs does a spider have?", "Eight."),
    ("What gas do plants take in for photosynthesis?", "Carbon dioxide."),
    ("What is the boiling point of water at sea level in Celsius?", "100 degrees."),
    ("Which ocean is the largest?", "The Pacific Ocean."),
    ("What is the square root of 81?", "Nine."),
    ("Who wrote the play Romeo and Juliet?", "William Shakespeare."),
    ("What is the chemical symbol for gold?", "Au."),
]
ANSWERS = {
    "careful-bot": lambda reference: f"The answer is {reference.lower()}",
    "hasty-bot": lambda reference: "I am not sure, maybe something else.",
}


def dataset_jsonl() -> bytes:
    lines = []
    for number, (question, reference) in enumerate(QUESTIONS, start=1):
        row = {
            "id": f"walk-{number}",
            "instruction": question,
            "reference": reference,
            "skills": SKILLS,
            "domains": ["History"],
            "difficulty": 1 + number % 3,
            "responses": [
                {"model": model, "text": answer(reference)} for model, answer in ANSWERS.items()
            ],
        }
        lines.append(json.dumps(row))
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="the server")
    parser.add_argument(
        "--token",
        default=os.environ.get("FLASKWEB_TOKEN", ""),
        help="an API token of a site admin (default: $FLASKWEB_TOKEN)",
    )
    parser.add_argument(
        "--judge",
        choices=["baseline", "llm"],
        default="baseline",
        help="baseline: ROUGE-L, offline (default); llm: the demo's local-fake-judge provider, "
        "with `.venv/bin/python -m devtools.openai_server --port 8089` running",
    )
    parser.add_argument("--project", default=f"walkthrough-{int(time.time())}")
    args = parser.parse_args()
    if not args.token:
        parser.error("give --token or set FLASKWEB_TOKEN (manage.py drf_create_token admin)")

    with Client(args.base_url, token=args.token) as client:
        # 1. a project, and a dataset uploaded into it; wait=True follows the import
        project = client.create_project(args.project, name="Client walkthrough")
        upload = client.upload_dataset(
            project, ("walkthrough.jsonl", dataset_jsonl()), dataset="Walkthrough set"
        )
        dataset = upload["dataset"]
        print(f"\nimported {upload['items_created']} items into dataset {dataset}")

        # 2. a campaign for people, created and activated
        campaign = client.create_campaign(project, name="Walkthrough campaign", dataset=dataset)
        activated = client.activate_campaign(campaign)
        print(f"campaign {campaign['id']}: {activated['tasks_created']} tasks")

        # 3. a judge, and a run of it followed to the end
        if args.judge == "llm":
            judge = client.create_judge(
                project,
                name="Fake LLM judge",
                provider="local-fake-judge",
                model="fake-judge",
            )
        else:
            judge = client.create_judge(
                project, name="ROUGE-L", kind="baseline", baseline="rouge-l"
            )
        run = client.create_run(judge, dataset=dataset)
        run = client.start_run(run)
        print(f"\nrun {run['id']}: {run['status']}, {run['finished']}/{run['total']} judged")
        scores = client.scores(run)
        print(scores.head().to_string())

        # 4. scores made elsewhere (say, a rating session on paper) pushed in; NA = N/A
        rows = []
        for number in range(1, len(QUESTIONS) + 1):
            for skill in SKILLS:
                rows.append(("careful-bot", skill, 5 if skill != "Readability" else 4, number))
                rows.append(("hasty-bot", skill, 1 if number % 4 else pd.NA, number))
        people = pd.DataFrame(
            {
                "item": [f"walk-{n}" for *_, n in rows],
                "system": [system for system, *_ in rows],
                "rater": "paper-rater",
                "rater_kind": "human",
                "skill": [skill for _, skill, *_ in rows],
                "score": pd.array([score for _, _, score, _ in rows], dtype="Int64"),
            }
        )
        pushed = client.push_scores(project, people, dataset="Walkthrough set")
        print(f"\npushed {pushed['batch']['scores_created']} scores")

        # 5. the export and the report as DataFrames
        export = client.export(project, format="csv")
        print(f"\nexport: {len(export)} rows, {int(export['score'].isna().sum())} N/A")
        print(export.groupby(["rater_kind", "system"])["score"].mean().to_string())
        report = client.report(project, resamples=0)
        columns = ["judge", "skill", "level", "n", "pearson", "spearman", "too_few"]
        print("\n" + report.correlation[columns].to_string())

        # 6. a refused request is an exception with the server's fields
        try:
            client.create_project(args.project)
        except FlaskwebError as error:
            print(f"\nas expected: {error.status} {error.fields}")


if __name__ == "__main__":
    main()
