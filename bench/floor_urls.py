"""The framework's floor for `annotate_load.py --floor`: the annotator API's `next` and
`submit` URLs answered by views that do none of the work, ahead of the project's own URLs.

Everything else a request costs stays as served: gunicorn, the whole middleware stack, DRF
with the project's authentication (the token's statement), permission and content
negotiation, the JSON body read as the real submit reads it, and a card-sized JSON answer.
What the real endpoints cost above these is the work itself: the claim, the card, the
submission's read and write (bench/README.md, "Fifth pass").
"""

from __future__ import annotations

import itertools
import os

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.annotate.apis import JsonFirstNegotiation, submit_body_plain
from flaskweb.urls import urlpatterns as project_urlpatterns

_WORDS = [
    "the",
    "answer",
    "names",
    "each",
    "step",
    "and",
    "checks",
    "the",
    "result",
    "against",
    "the",
    "question",
    "asked",
]


def _text(words: int, offset: int = 0) -> str:
    return " ".join(_WORDS[(offset + i) % len(_WORDS)] for i in range(words))


def _card(assignment_id: int) -> dict:
    """A pointwise card of the load dataset's size: three skills, five anchors each."""
    return {
        "assignment_id": assignment_id,
        "expires_at": "2030-01-01T00:00:00Z",
        "instruction": _text(30),
        "response": _text(60, 3),
        "skills": [
            {
                "skill_id": skill_id,
                "name": f"Skill {skill_id}",
                "criterion": _text(16, skill_id),
                "anchors": [_text(12, level) for level in range(5)],
                "checklist": [],
            }
            for skill_id in (1, 2, 3)
        ],
    }


#: assignment ids of this process: the crowd counts its submissions by id, and each of the
#: server's processes hands out its own
_ids = itertools.count(os.getpid() * 10_000_000)


class FloorNextApi(APIView):
    content_negotiation_class = JsonFirstNegotiation

    def post(self, request, campaign_id: int):
        return Response(_card(next(_ids)))


class FloorSubmitApi(APIView):
    content_negotiation_class = JsonFirstNegotiation

    def post(self, request, assignment_id: int):
        data = submit_body_plain(request.data)
        if data is None:
            return Response({"detail": "not the plain form", "code": "invalid"}, status=400)
        body = {"assignment_id": assignment_id, "status": "submitted", "late": False}
        return Response(body, status=201)


urlpatterns = [
    path("api/v1/annotation/campaigns/<int:campaign_id>/next/", FloorNextApi.as_view()),
    path("api/v1/annotation/assignments/<int:assignment_id>/submit/", FloorSubmitApi.as_view()),
    *project_urlpatterns,
]
