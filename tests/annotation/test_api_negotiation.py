"""Content negotiation on the API's hot path (annotation/annotate/apis.py,
JsonFirstNegotiation): the plain case is answered without parsing, with DRF's answer; every
other request is negotiated by DRF."""

from __future__ import annotations

import pytest
from django.http import Http404
from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.test import APIRequestFactory

from annotation.annotate.apis import AssignmentNextApi, AssignmentSubmitApi, JsonFirstNegotiation

ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "",
    "application/json; indent=4",
    "application/json;q=0.5",
    "*/*; q=0.8",
    "application/*",
    "text/html",
    "text/html,application/json",
    "application/xml",
    "text/plain",
    "APPLICATION/JSON",
]
QUERIES = ["", "format=json", "format=api", "format=xml", "page=2"]


def _negotiate(negotiation, accept, query, suffix):
    extra = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().post(f"/x/?{query}" if query else "/x/", **extra))
    renderers = [cls() for cls in api_settings.DEFAULT_RENDERER_CLASSES]
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers, suffix)
    except (exceptions.NotAcceptable, Http404) as exc:
        return type(exc).__name__
    return type(renderer).__name__, media_type


@pytest.mark.parametrize("suffix", [None, "json", "api"])
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("accept", ACCEPTS)
def test_the_answer_is_drfs(accept, query, suffix):
    fast = _negotiate(JsonFirstNegotiation(), accept, query, suffix)
    assert fast == _negotiate(DefaultContentNegotiation(), accept, query, suffix)


def test_the_plain_case_is_json_without_parsing_the_accept_header():
    for accept in (None, "*/*", "application/json"):
        extra = {} if accept is None else {"HTTP_ACCEPT": accept}
        request = Request(APIRequestFactory().post("/x/", **extra))
        renderers = [cls() for cls in api_settings.DEFAULT_RENDERER_CLASSES]
        renderer, media_type = JsonFirstNegotiation().select_renderer(request, renderers)
        assert (renderer, media_type) == (renderers[0], "application/json")
        assert not hasattr(request, "_parsed_accept_list")  # DRF's parse never ran


def test_next_and_submit_negotiate_so():
    assert AssignmentNextApi.content_negotiation_class is JsonFirstNegotiation
    assert AssignmentSubmitApi.content_negotiation_class is JsonFirstNegotiation
