"""A researcher in Chromium accepts a model's proposal with one keypress while two campaigns
are running on the item: the page says beforehand and afterwards that running campaigns keep
the skills they pinned, nothing they ask changes, and the researcher then applies the
verified metadata to one campaign from the link the page gives (the affected tasks listed
first, applied at once), while the other, whose training task compares a skill the new
metadata drops, holds the item back with the reason. The editor opens without putting the
focus on a field, and names every difficulty level. Screenshots go to /tmp/metadata-shots/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from annotation.campaigns.services import campaign_activate
from annotation.metadata.selectors import item_metadata
from annotation.models import CampaignItemPin, QualificationRule, TaskKind
from annotation.screening.services import screening_settings_update
from annotation.screening.setup import screening_task_set
from annotation.services.metadata import ProposalSpec, metadata_proposals_record
from tests.annotation.test_metadata_pinning import (
    NEW,
    NEW_KEYS,
    OLD,
    asked,
    item,
    make_campaign,
    make_dataset,
    response,
    skill_ids,
    task_on,
)
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = Path("/tmp/metadata-shots")


@pytest.fixture
def running(project, researcher, tmp_path):
    """A dataset whose items a model run proposed new skills for, and two running campaigns
    over it: the demo campaign, and a crowd study whose training task is on i0 with known
    scores for Factuality and Comprehension."""
    dataset = make_dataset(project, tmp_path)
    metadata_proposals_record(
        run_id=5,
        label="Metadata judge",
        proposals=[
            ProposalSpec(item_id=pk, status="ok", domains=["math"], skills=NEW_KEYS, difficulty=3)
            for pk in dataset.items.order_by("pk").values_list("pk", flat=True)
        ],
    )
    demo = make_campaign(project, dataset, name="Demo campaign")
    crowd = make_campaign(project, dataset, name="Crowd study", activate=False)
    screening_settings_update(
        campaign=crowd, screening=True, pass_mark=0.8, rule=QualificationRule.EXACT
    )
    factuality, comprehension = skill_ids("Factuality", "Comprehension")
    screening_task_set(
        campaign=crowd,
        response=response(dataset),
        scores={factuality: 2, comprehension: 4},
        kind=TaskKind.TRAINING,
        explanation="The year is wrong.",
    )
    campaign_activate(campaign=crowd)
    crowd.refresh_from_db()
    return dataset, demo, crowd


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_one_keypress_changes_the_item_not_the_running_campaigns_until_applied(
    page, live_server, running
):
    dataset, demo, crowd = running
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    login(page, live_server, "rita", "pw-rita")
    page.goto(f"{live_server.url}/datasets/{dataset.pk}/metadata/?origin=run:5")
    effects = page.locator("[data-effects]")
    assert (
        "Campaigns already running keep the skills they pinned: 2 running campaigns use this item."
        in effects.inner_text()
    )
    assert "Demo campaign (active) asks Factuality, Comprehension, Readability" in (
        effects.inner_text()
    )
    held = page.inner_text("[data-held]")
    assert "applying it to Crowd study holds the item back: its training task" in held
    assert "known answers for Factuality, Comprehension, which the proposal drops" in held
    assert page.locator("[data-save-edit]").is_hidden()
    shot(page, "01-verify-page.png")

    # when y accepts the proposal for i0
    page.keyboard.press("y")
    page.wait_for_selector("[data-notice]")
    notice = page.inner_text("[data-notice]")
    assert "Item i0: accepted." in notice
    assert "2 running campaigns keep the skills they pinned for item i0" in notice
    shot(page, "02-after-accept.png")
    # then the item's metadata is the proposal's, and both campaigns ask what they pinned
    assert item_metadata(item=item(dataset))["skills"] == NEW_KEYS
    assert asked(demo, task_on(demo, "i0", "m2")) == OLD
    assert asked(crowd, task_on(crowd, "i0", kind=TaskKind.TRAINING)) == OLD

    # the editor of the next item: the focus on its heading, an arrow key changes nothing,
    # and the difficulty levels have names
    page.keyboard.press("e")
    page.wait_for_selector("[data-edit-heading]:focus")
    assert page.locator("[data-save-edit]").is_visible()
    values = page.evaluate(
        "() => [...document.querySelectorAll('[data-edit] select, [data-edit] input')]"
        ".map(e => e.type === 'checkbox' || e.type === 'radio' ? e.checked : e.value)"
    )
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    assert values == page.evaluate(
        "() => [...document.querySelectorAll('[data-edit] select, [data-edit] input')]"
        ".map(e => e.type === 'checkbox' || e.type === 'radio' ? e.checked : e.value)"
    )
    assert page.get_by_role("radio", name="1 — simple lifestyle knowledge").count() == 1
    levels = page.get_by_role("group", name=re.compile(r"^Difficulty"))
    assert levels.get_by_role("radio").count() == 5
    assert page.get_by_role("checkbox", name="Math").is_checked()
    shot(page, "03-editor.png")
    page.keyboard.press("Escape")

    # the researcher follows the notice's link for the demo campaign: the tasks it affects
    page.click("[data-notice] a:has-text('Demo campaign')")
    page.wait_for_selector("[data-apply-list]")
    row = page.locator(f"tr[data-item='{item(dataset).pk}']")
    assert row.locator("td").nth(1).inner_text() == ", ".join(OLD)
    assert ", ".join(NEW) in row.locator("td").nth(2).inner_text()
    assert row.locator("td").nth(3).inner_text() == "2"  # m1's and m2's tasks on i0
    shot(page, "04-apply-page.png")
    page.click("[data-apply-button]")
    page.wait_for_selector(".messages")
    assert "Applied the verified metadata of 1 item to Demo campaign" in page.inner_text(
        ".messages"
    )
    shot(page, "05-applied.png")
    assert asked(demo, task_on(demo, "i0", "m2")) == NEW
    assert asked(crowd, task_on(crowd, "i0", kind=TaskKind.TRAINING)) == OLD

    # the crowd study holds i0 back: its training task compares two dropped skills
    page.goto(f"{live_server.url}/campaigns/{crowd.pk}/metadata/apply/?item={item(dataset).pk}")
    held = page.locator("[data-refused]")
    assert "Held back: training task" in held.inner_text()
    assert "scores for Factuality, Comprehension, which the verified metadata drops" in (
        held.inner_text()
    )
    assert page.locator("[data-apply-button]").count() == 0
    shot(page, "06-held-back.png")
    pin = CampaignItemPin.objects.get(campaign=crowd, item=item(dataset))
    assert pin.verification is None
    assert errors == [] and page.dialogs == []
