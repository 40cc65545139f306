"""One shape for every 400 of the import APIs: {"detail", "code", "problems": [{file, line,
field, code, message}], "problem_count"} — the same Problem records the commands print."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response as ApiResponse

#: Problems listed in a 400 (all are counted in problem_count).
MAX_PROBLEMS_SHOWN = 1000


def problems_response(detail: str, code: str, problems: list[dict[str, Any]]) -> ApiResponse:
    return ApiResponse(
        {
            "detail": detail,
            "code": code,
            "problems": problems[:MAX_PROBLEMS_SHOWN],
            "problem_count": len(problems),
        },
        status=status.HTTP_400_BAD_REQUEST,
    )


def field_problems(errors: dict) -> list[dict[str, Any]]:
    """A serializer's errors as problems of the request's fields."""
    problems = []
    for name, messages in errors.items():
        if isinstance(messages, dict):  # a list field: {index: [messages]}
            messages = [m for each in messages.values() for m in each]
        for message in messages:
            problems.append(
                {"file": "", "line": None, "field": name, "code": "invalid", "message": message}
            )
    return problems
