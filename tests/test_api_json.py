"""Hostile JSON bodies on the REST API: one parser (annotation.api_parsers.StrictJSONParser,
the default of every API view) refuses a body nested too deeply — once a RecursionError and
a 500 — and a key given twice in one object, with a 400 naming what is wrong, on every
endpoint that takes JSON."""

from __future__ import annotations

import pytest

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import HumanScore
from annotation.parsers import MAX_JSON_DEPTH, JsonRefused, json_depth_exceeds, json_loads_strict
from tests.annotation.test_annotate_api import claim, make_dataset, scores_for, submit_url
from tests.clients import token_client

DEEP = "[" * 3000 + "]" * 3000


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)


@pytest.fixture
def campaign(project, dataset, annotator, researcher):
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="C",
        overlap=1,
        annotators=[annotator],
        created_by=researcher,
    )
    campaign_activate(campaign=campaign)
    return campaign


def _bodies(valid: dict) -> dict[str, str]:
    """The endpoint's valid body made hostile two ways, as raw JSON text."""
    import json

    text = json.dumps(valid)
    first_key = next(iter(valid))
    return {
        "deep": text[:-1] + f', "extra": {DEEP}}}',
        "deep object": text[:-1] + ', "extra": ' + '{"a":' * 3000 + "1" + "}" * 3000 + "}",
        "duplicate": text[:-1] + f", {json.dumps(first_key)}: {json.dumps(valid[first_key])}}}",
    }


def _endpoints(project, campaign, annotator, researcher):
    alice = token_client(annotator)
    task = claim(alice, campaign)
    rita = token_client(researcher)
    return [
        ("post", alice, submit_url(task["assignment_id"]), scores_for(task)),
        (
            "post",
            rita,
            f"/api/v1/annotation/projects/{project.slug}/campaigns/",
            {"name": "N", "dataset": campaign.dataset_id},
        ),
        ("patch", rita, f"/api/v1/annotation/campaigns/{campaign.pk}/", {"name": "Renamed"}),
        ("post", rita, f"/api/v1/projects/{project.slug}/exports/", {"kind": "long"}),
    ]


def test_a_deep_or_duplicate_key_body_is_a_400_on_every_json_endpoint(
    project, campaign, annotator, researcher
):
    for method, client, url, valid in _endpoints(project, campaign, annotator, researcher):
        for case, body in _bodies(valid).items():
            # when
            response = getattr(client, method)(url, body, content_type="application/json")
            # then
            assert response.status_code == 400, (url, case, response.content[:300])
            detail = response.json()["detail"]
            if case == "duplicate":
                assert f"the key '{next(iter(valid))}' appears twice" in detail, detail
            else:
                assert f"nested too deeply: deeper than {MAX_JSON_DEPTH} levels" in detail
    assert not HumanScore.objects.exists()
    assert campaign.__class__.objects.count() == 1
    campaign.refresh_from_db()
    assert campaign.name == "C"


def test_the_member_api_reads_bodies_with_the_same_parser(project, admin_user):
    url = f"/api/v1/annotation/projects/{project.slug}/members/"
    response = token_client(admin_user).post(
        url,
        '{"username": "a", "role": "annotator", "role": "admin"}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "the key 'role' appears twice" in response.json()["detail"]


# --- the rule itself (pure) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, depth",
    [
        ("[]", 1),
        ('{"a": [{"b": "[[[[["}]}', 3),
        ('["\\"[[[[", {"k]": ["x"]}]', 3),  # brackets inside strings do not count
        ("[" * 100 + "]" * 100, 100),
    ],
)
def test_nesting_is_measured_from_the_text_ignoring_strings(text, depth):
    assert not json_depth_exceeds(text, depth)
    assert json_depth_exceeds(text, depth - 1) == (depth - 1 < text.count("[") + text.count("{"))


def test_the_strict_decoder_refuses_depth_and_duplicates_and_keeps_the_rest():
    assert json_loads_strict('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    assert json_loads_strict('{"a": {"a": 1}}') == {"a": {"a": 1}}  # same key, two objects
    for text, message in [
        ("[" * 101 + "]" * 101, "deeper than 100 levels"),
        ("[" * 100_000, "deeper than 100 levels"),
        ('{"a": 1, "b": {"c": 2, "c": 3}}', "the key 'c' appears twice"),
        ('{"a": 1', "not valid JSON"),
        ('"' + '\\"' * 50_000, "not valid JSON"),  # an unterminated string: a linear scan
    ]:
        with pytest.raises(JsonRefused, match=message):
            json_loads_strict(text)


def test_an_api_exception_with_a_nested_list_detail_answers_its_messages_not_a_crash():
    # given an exception whose detail nests lists (DRF allows it; none of ours raises one yet)
    from rest_framework.exceptions import APIException

    from flaskweb.api_errors import api_exception_handler

    class Refused(APIException):
        status_code = 409
        default_code = "refused"

    # when the handler answers it
    response = api_exception_handler(Refused(detail=[["first"], "second"]), {})

    # then it is the exception's own status with every message, in order
    assert response.status_code == 409
    assert response.data == {"detail": "first; second", "code": "refused"}
