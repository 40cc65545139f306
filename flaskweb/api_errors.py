"""The REST API's shared conventions: one error shape and one pagination (docs/API.md);
flaskweb/api_schema.py documents both on every operation.

Errors are JSON objects {"detail": message, "code": code, "fields": {field: [messages]}};
`fields` is there when the request's fields were at fault. The import APIs answer their 400s
with {"detail", "code", "problems": [{file, line, field, code, message}], "problem_count"}
— the same Problem records the commands print (`problems_response`).
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.signals import got_request_exception
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response as ApiResponse
from rest_framework.views import set_rollback

from flaskweb.unavailable import (
    API_BODY,
    unavailable_cause,
    unavailable_headers,
    unavailable_note,
)

#: Problems listed in a 400 (all are counted in problem_count).
MAX_PROBLEMS_SHOWN = 1000

logger = logging.getLogger("django.request")


# --- the import APIs' 400 ---------------------------------------------------------------------


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


# --- every other error --------------------------------------------------------------------------


def _messages(errors: Any, path: str = "") -> list[tuple[str, str]]:
    """(field path, message) pairs of a ValidationError's detail, nested fields included."""
    if isinstance(errors, dict):
        return [
            pair
            for name, value in errors.items()
            for pair in _messages(value, f"{path}.{name}" if path else str(name))
        ]
    if isinstance(errors, list):
        if all(isinstance(each, str) for each in errors):
            return [(path, str(each)) for each in errors]
        return [
            pair
            for index, value in enumerate(errors)
            for pair in _messages(value, f"{path}[{index}]")
        ]
    return [(path, str(errors))]


def _summary(fields: dict) -> str:
    """One readable sentence for `detail`: the first problem, and how many more there are."""
    problems = _messages(fields)
    if not problems:
        return "the request is not valid"
    path, message = problems[0]
    first = message if path in ("", "non_field_errors", "detail") else f"{path}: {message}"
    more = len(problems) - 1
    return f"{first} (and {more} more; see fields)" if more else first


def invalid_body(fields: dict) -> dict[str, Any]:
    """The 400 body of field errors: {"detail": the first problem, "code": "invalid",
    "fields": {field: [messages]}}."""
    # v1 clients read the field messages at the top level, as DRF puts them; they stay there
    # too (docs/API.md: new clients read `fields`).
    return {**fields, "detail": _summary(fields), "code": "invalid", "fields": fields}


def state_conflict(detail: str, code: str, current: str) -> ApiResponse:
    """409: the object's state refuses the request. {"detail", "code", "status"}, where
    `status` is the object's status now (a run's, an export's, a campaign's)."""
    return ApiResponse(
        {"detail": detail, "code": code, "status": current}, status=status.HTTP_409_CONFLICT
    )


def service_error(exc) -> serializers.ValidationError:
    """A service's django.core.exceptions.ValidationError as the API's 400: its field
    errors under their fields, others under non_field_errors."""
    if hasattr(exc, "error_dict"):
        return serializers.ValidationError(exc.message_dict)
    return serializers.ValidationError({"non_field_errors": exc.messages})


def api_exception_handler(exc: Exception, context: dict) -> ApiResponse:
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]: every error as {"detail", "code"[, "fields"]};
    what Django itself answers 400 to as a 400; a lost database or Redis as a 503
    {"detail", "code": "service_unavailable"} with Retry-After (flaskweb/unavailable.py);
    and any other unexpected exception as a JSON 500 that shows no traceback (it is logged,
    and Django's got_request_exception is sent, so the test client re-raises it)."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    set_rollback()
    if isinstance(exc, (SuspiciousOperation, BadRequest)):
        # what Django answers 400 to (too many form fields, a request too large, a bad
        # Host): the same status here, and the same log as Django's own
        if isinstance(exc, SuspiciousOperation):
            logging.getLogger(f"django.security.{type(exc).__name__}").error(str(exc))
        return ApiResponse(
            {"detail": str(exc) or "bad request", "code": "bad_request"},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if not isinstance(exc, exceptions.APIException):
        request = context.get("request")
        django_request = getattr(request, "_request", None)
        cause = unavailable_cause(exc)
        if cause is not None:  # a lost database or Redis: 503 with Retry-After
            unavailable_note(django_request, cause)
            return unavailable_headers(ApiResponse(dict(API_BODY), status=503))
        logger.error(
            "Internal Server Error: %s",
            getattr(django_request, "path", "?"),
            exc_info=exc,
            extra={"status_code": 500, "request": django_request},
        )
        got_request_exception.send(sender=None, request=django_request)
        return ApiResponse(
            {"detail": "the server failed to answer this request", "code": "server_error"},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    headers = {}
    # only NotAuthenticated/AuthenticationFailed (auth_header) and Throttled (wait) carry these
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if wait:
        headers["Retry-After"] = f"{int(wait)}"
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        body = invalid_body(detail if isinstance(detail, dict) else {"non_field_errors": detail})
    elif isinstance(exc.detail, dict):  # an APIException raised with a dict of its own
        body = {"code": exc.default_code, **exc.detail}
        body.setdefault("detail", _summary(exc.detail))
    else:
        # a list detail, nested or not, is every message in order
        message = (
            exc.detail
            if not isinstance(exc.detail, list)
            else "; ".join(text for _, text in _messages(exc.detail))
        )
        code = getattr(exc.detail, "code", None) or exc.default_code
        body = {"detail": str(message), "code": code}
    return ApiResponse(body, status=exc.status_code, headers=headers)


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in a sentence.")
    code = serializers.CharField(
        help_text="invalid, parse_error, bad_request, not_authenticated, "
        "authentication_failed, permission_denied, not_found, method_not_allowed, "
        "not_acceptable, unsupported_media_type, throttled, too_large (413), server_error, "
        "service_unavailable (503: try again after Retry-After), or an "
        "operation's own code"
    )
    fields = serializers.DictField(  # type: ignore[assignment]  # a declared field, not Serializer.fields
        child=serializers.JSONField(),
        required=False,
        help_text="400 only: field -> list of messages (nested for nested fields).",
    )

    class Meta:
        ref_name = "Error"


class ProblemSerializer(serializers.Serializer):
    file = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField()
    code = serializers.CharField()
    message = serializers.CharField()

    class Meta:
        ref_name = "ImportProblem"


class ProblemsErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField()
    problems = ProblemSerializer(
        many=True, help_text=f"At most {MAX_PROBLEMS_SHOWN}; all are counted in problem_count."
    )
    problem_count = serializers.IntegerField()

    class Meta:
        ref_name = "ImportProblems"


# --- pagination ---------------------------------------------------------------------------------


class ApiPagination(LimitOffsetPagination):
    """`?limit=&offset=` pages of 100 (REST_FRAMEWORK["PAGE_SIZE"]), at most 500 a page."""

    max_limit = 500
