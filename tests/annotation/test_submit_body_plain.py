"""The submit's plain-body reader (annotation.annotate.apis.submit_body_plain) returns what
AssignmentSubmitApi.InputSerializer would, or None and leaves the body to it."""

import pytest

from annotation.annotate.apis import MAX_TIME_MS, AssignmentSubmitApi, submit_body_plain
from annotation.services.assignments import MAX_RATIONALE


def _serializer(body):
    serializer = AssignmentSubmitApi.InputSerializer(data=body)
    if not serializer.is_valid():
        return None
    data = serializer.validated_data
    return {**data, "scores": [dict(row) for row in data["scores"]]}


ROW = {"skill_id": 3, "score": 4}
ACCEPTED = [
    {"scores": [ROW]},
    {"scores": [ROW, {"skill_id": 9, "score": None}]},
    {"scores": [{**ROW, "rationale": "because", "time_ms": 1200}], "active_ms": 5000},
    {"scores": [{**ROW, "rationale": "", "time_ms": None}], "active_ms": None},
    {"scores": [{**ROW, "time_ms": 0}], "active_ms": MAX_TIME_MS},
    {"scores": [{**ROW, "rationale": "x" * MAX_RATIONALE}]},
    {"scores": [{**ROW, "rationale": "día ✓"}]},
    {"scores": [ROW], "next": True, "language": "es"},
    {"scores": [ROW], "next": False, "language": "en"},
    {"scores": [{"skill_id": 1, "score": 1}, {"skill_id": 2, "score": 5}]},
]
LEFT_TO_THE_SERIALIZER = [
    None,
    [],
    "scores",
    {},
    {"scores": []},
    {"scores": ROW},
    {"scores": [ROW], "preferences": []},
    {"scores": [ROW], "extra": 1},
    {"scores": [{**ROW, "extra": 1}]},
    {"scores": [{"skill_id": 3}]},
    {"scores": [{"score": 4}]},
    {"scores": [{**ROW, "score": 0}]},
    {"scores": [{**ROW, "score": 6}]},
    {"scores": [{**ROW, "score": 4.0}]},
    {"scores": [{**ROW, "score": "4"}]},
    {"scores": [{**ROW, "score": True}]},
    {"scores": [{**ROW, "score": "N/A"}]},
    {"scores": [{**ROW, "skill_id": 0}]},
    {"scores": [{**ROW, "skill_id": True}]},
    {"scores": [{**ROW, "skill_id": "3"}]},
    {"scores": [{**ROW, "skill_id": 2**63}]},
    {"scores": [{**ROW, "skill_id": None}]},
    {"scores": [{**ROW, "time_ms": -1}]},
    {"scores": [{**ROW, "time_ms": MAX_TIME_MS + 1}]},
    {"scores": [{**ROW, "time_ms": 1.5}]},
    {"scores": [{**ROW, "rationale": None}]},
    {"scores": [{**ROW, "rationale": " padded "}]},
    {"scores": [{**ROW, "rationale": "x" * (MAX_RATIONALE + 1)}]},
    {"scores": [{**ROW, "rationale": "nul\x00"}]},
    {"scores": [{**ROW, "rationale": "lone \ud800"}]},
    {"scores": [{**ROW, "rationale": 5}]},
    {"scores": [ROW], "active_ms": -5},
    {"scores": [ROW], "active_ms": "5"},
    {"scores": [ROW], "next": None},
    {"scores": [ROW], "next": "true"},
    {"scores": [ROW], "next": 1},
    {"scores": [ROW], "language": ""},
    {"scores": [ROW], "language": None},
    {"scores": [ROW], "language": "xx"},
    {"scores": [ROW], "language": ["es"]},
]


@pytest.mark.parametrize("body", ACCEPTED)
def test_a_plain_body_reads_as_the_serializer_reads_it(body):
    expected = _serializer(body)
    assert expected is not None
    assert submit_body_plain(body) == expected


@pytest.mark.parametrize("body", LEFT_TO_THE_SERIALIZER, ids=repr)
def test_anything_else_is_left_to_the_serializer(body):
    assert submit_body_plain(body) is None
