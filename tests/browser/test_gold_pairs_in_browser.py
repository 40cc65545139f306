"""Gold pairs in a real Chromium: a researcher sets a gold pair on the campaign page (the
htmx form swaps the section with the new list), then an annotator scoring with the keyboard
alone gets it among the real pairs and, as the campaign gives gold feedback, sees the known
answers next to theirs by the sides they saw, with the explanation; Enter moves on."""

from __future__ import annotations

import json

import pytest

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    GoldPreference,
    Task,
    TaskKind,
    UploadSource,
)
from tests.browser.conftest import login
from tests.browser.layout import LAPTOP

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MODELS = ("secret-model-alpha", "secret-model-beta")


@pytest.fixture
def campaign(project, tmp_path, annotator) -> Campaign:
    rows = [
        {
            "id": f"q{i}",
            "instruction": f"Question number {i}",
            "skills": ["Factuality", "Comprehension", "Readability"],
            "responses": [
                {"model": MODELS[0], "text": f"First answer {i}."},
                {"model": MODELS[1], "text": f"Second answer {i}."},
            ],
        }
        for i in range(3)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    upload = dataset_upload_create(
        project=project,
        dataset_name="Pair set",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    dataset = dataset_import(upload_id=upload.pk).dataset
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Which is better",
        overlap=1,
        annotators=[annotator],
        mode=CampaignMode.PAIRWISE,
        gold_rate=0.5,  # every second task is a gold one
        gold_feedback=True,
    )
    campaign_activate(campaign=campaign)
    return campaign


def set_gold_pair_on_the_page(page, live_server, campaign) -> Task:
    page.set_viewport_size(LAPTOP)
    login(page, live_server, "rita", "pw-rita")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    page.click("#gold-tasks summary")
    form = page.locator("#gold-form")
    form.locator("input[name=item]").fill("q2")
    # beta named A (better overall), alpha B (better on Factuality); A shown on the left
    form.locator("select[name=model_a]").select_option(MODELS[1])
    form.locator("select[name=model_b]").select_option(MODELS[0])
    form.locator("select[name=kind]").select_option("gold")
    form.locator("select[name=shown]").select_option("a_left")
    form.locator("select[name=choice_overall]").select_option("a")
    form.locator("xpath=.//label[contains(., 'Factuality')]/select").select_option("b")
    form.locator("textarea[name=explanation]").fill("Beta answers the question; alpha is *exact*.")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#gold-tasks .messages >> text=is now a gold")
    row = page.locator("#gold-list tbody tr")
    assert row.count() == 1
    assert "overall: b" in row.inner_text() and "Factuality: a" in row.inner_text()
    task = Task.objects.get(campaign=campaign, kind=TaskKind.GOLD)
    # stored in the pair's terms: A = alpha (sorts first), B = beta, shown on the left
    assert (task.response.model_name, task.response_b.model_name, task.b_left) == (
        MODELS[0],
        MODELS[1],
        True,
    )
    known = dict(GoldPreference.objects.filter(task=task).values_list("skill__name", "choice"))
    assert known == {None: "b", "Factuality": "a"}
    return task


def answer_with_keys(page, keys: list[str]) -> None:
    action = page.get_attribute("[data-pair-form]", "hx-post")
    for key in keys:
        page.wait_for_timeout(60)
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "prev => { const f = document.querySelector('[data-pair-form]');"
        " return !f || f.getAttribute('hx-post') !== prev }",
        arg=action,
    )


def test_a_researcher_sets_a_gold_pair_and_an_annotator_sees_its_feedback(
    chromium, page, live_server, project, researcher, annotator, campaign
):
    gold = set_gold_pair_on_the_page(page, live_server, campaign)

    context = chromium.new_context(viewport=LAPTOP)
    alice = context.new_page()
    alice.set_default_timeout(20_000)
    try:
        login(alice, live_server, "alice", "pw-alice")
        alice.goto(f"{live_server.url}/campaigns/{campaign.pk}/annotate/")
        # the first task is a real pair: the left response is better everywhere
        alice.wait_for_selector("[data-pair-row]:focus")
        first = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
        assert first.task.kind == TaskKind.NORMAL
        answer_with_keys(alice, ["a", "a", "a", "a"])
        # the second is the gold pair, which looks like any other
        alice.wait_for_selector("[data-pair-row]:focus")
        lease = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
        assert lease.task_id == gold.pk
        html = alice.content()
        assert "gold" not in html.lower() and "expected" not in html.lower()
        answer_with_keys(alice, ["a", "a", "a", "a"])
        # then the feedback: beta (B) was on the left, so "left" matches beta better overall
        table = alice.wait_for_selector("[data-gold-feedback]")
        rows = {
            cells[0]: cells[1:]
            for cells in (
                [c.strip() for c in tr.inner_text().split("\t")]
                for tr in table.query_selector_all("tbody tr")
            )
        }
        assert rows["Overall"] == ["Left (A) is better", "Left (A) is better", "✓ matches"]
        assert rows["Factuality"] == ["Left (A) is better", "Right (B) is better", "✗ differs"]
        assert set(rows) == {"Factuality", "Overall"}  # only questions with a known choice
        card = alice.inner_text("#task-card")
        assert "Left and right are the sides you saw" in card
        assert "alpha is exact." in card  # the explanation, as Markdown
        assert alice.locator("#task-card em", has_text="exact").count() == 1
        assert not any(name in alice.content() for name in MODELS)
        # the "Next task" link has the focus: Enter brings the next pair
        assert alice.evaluate("document.activeElement.matches('[data-next-task]')")
        alice.keyboard.press("Enter")
        alice.wait_for_selector("[data-pair-row]:focus")
        assert (
            Assignment.objects.filter(annotator=annotator, status=AssignmentStatus.ACTIVE)
            .exclude(task_id__in=[first.task_id, gold.pk])
            .exists()
        )
    finally:
        context.close()
