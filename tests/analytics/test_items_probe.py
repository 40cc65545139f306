"""The drill-down of a bias-probe effect (docs/DRILL_DOWN.md, `probe`): the (response,
skill) pairs both the probe run and its base run scored, as many as the trust page's effect
counts, each shown with the probe run's output beside the base run's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from analytics.items.selectors import item_filters_resolve, item_selection
from devtools.openai_server import FakeOpenAIServer
from judging.models import RunStatus
from judging.services.probes import probe_run_create
from tests.judging.test_probes import base_run, dataset, drive, figures_of  # noqa: F401
from tests.judging.test_runs import llm_judge

pytestmark = pytest.mark.slow


def test_a_probe_effect_opens_exactly_its_pairs_with_the_probe_output_beside(
    project,
    dataset,  # noqa: F811
    researcher_client,
):
    # given a judge swayed by length, its base run and a padding probe run
    with FakeOpenAIServer(content_scores=True, length_bias=4.0) as server:
        judge = llm_judge(project, server, name="J")
        base = base_run(judge, dataset)
        run = drive(probe_run_create(base_run=base, probe="pad", params={}))
    assert run.status == RunStatus.DONE
    effect = figures_of(project, judge.name)["runs"][0]

    def selection(**given):
        filters, errors = item_filters_resolve(
            project=project, given={k: [v] for k, v in given.items()}
        )
        assert errors == {}
        return item_selection(project=project, filters=filters)

    # when the effect's drill-down is read, by run id and by probe kind, and per skill
    by_id = selection(judge="J", probe=str(run.pk))
    by_kind = selection(judge="J", probe="pad")

    # then it holds exactly the effect's pairs, each with the base and the probe score
    assert by_id.pairs == effect["n"] == by_kind.pairs
    assert by_id.count == effect["responses"]
    for skill, figure in effect["skills"].items():
        assert selection(judge="J", probe=str(run.pk), skill=skill).pairs == figure["n"]
    unit = next(u for units in by_id.units.values() for u in units)
    base_score, probe_score = unit.probe
    assert probe_score >= base_score  # padded, the length-swayed judge scores higher

    # and the page shows the probe run's output beside the base run's
    page = researcher_client.get(
        reverse("analytics:items", args=[project.slug]), {"judge": "J", "probe": str(run.pk)}
    )
    body = page.content.decode()
    assert page.status_code == 200
    assert f"run #{run.pk}" in body and f"base run #{base.pk}" in body
    assert "no judgment of the probe run" not in body
