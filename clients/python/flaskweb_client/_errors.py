"""The errors the client raises: one class per HTTP status the API documents (docs/API.md,
"Errors"), each carrying the status and the server's error fields, and two for background
jobs (one that ended without success, one that did not end in time)."""

from __future__ import annotations

from typing import Any


class FlaskwebError(Exception):
    """Any error of the flaskweb API or of a job it runs.

    - `status`: the HTTP status (None for a job that failed or timed out);
    - `detail`: the server's one-sentence message;
    - `code`: its stable code (`invalid`, `not_found`, `run_state`, `rejected`, ...);
    - `fields`: `{field: [messages]}` when the request's fields were at fault (400);
    - `problems` and `problem_count`: an import's problems (`{file, line, field, code,
      message}`), the first 1,000 and how many there were in all;
    - `body`: the whole decoded answer (or job), for anything else it says.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        code: str = "",
        fields: dict[str, Any] | None = None,
        problems: list[dict[str, Any]] | None = None,
        problem_count: int | None = None,
        body: Any = None,
        method: str = "",
        url: str = "",
    ) -> None:
        self.detail = detail
        self.status = status
        self.code = code
        self.fields = fields or {}
        self.problems = problems or []
        self.problem_count = problem_count if problem_count is not None else len(self.problems)
        self.body = body
        self.method = method
        self.url = url
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"{self.method} {self.url}: " if self.method else ""
        status = f"{self.status} " if self.status is not None else ""
        code = f" [{self.code}]" if self.code else ""
        message = f"{where}{status}{self.detail}{code}"
        for problem in self.problems[:5]:
            line = problem.get("line")
            at = f"{problem.get('file', '')}:{line}" if line is not None else problem.get("file")
            message += f"\n  {at}: {problem.get('field', '')}: {problem.get('message', '')}"
        if self.problem_count > 5:
            message += f"\n  ... {self.problem_count - 5} more problem(s)"
        return message


class ClientError(FlaskwebError):
    """A 4xx answer: the request was refused; sending it again unchanged will not help."""


class BadRequestError(ClientError):
    """400: the request is not valid; `fields` (or `problems`, for an import) say why."""


class AuthenticationError(ClientError):
    """401: no token, or one that does not exist or belongs to an inactive user."""


class PermissionDeniedError(ClientError):
    """403: your role in the project does not allow this."""


class NotFoundError(ClientError):
    """404: no such object, or one you may not know about."""


class MethodNotAllowedError(ClientError):
    """405: the path exists, but not with this method."""


class ConflictError(ClientError):
    """409: a run, an export or a campaign is in the wrong state (`body["status"]`)."""


class PayloadTooLargeError(ClientError):
    """413: the body is larger than the endpoint takes."""


class UnsupportedMediaTypeError(ClientError):
    """415: the body's media type is not one the operation reads."""


class RateLimitedError(ClientError):
    """429: too many requests; raised once the client's bounded retries are spent."""


class ServerError(FlaskwebError):
    """A 5xx answer."""


class ServiceUnavailableError(ServerError):
    """503: the database or Redis did not answer for a moment; raised once the retries are
    spent, or at once for a write that may have been done (read before you repeat it)."""


class JobFailedError(FlaskwebError):
    """A background job (dataset upload, judge run, export, score import, report snapshot)
    ended without success: `body` is the job as the server last described it, `detail`
    its error, `problems` what an import found."""


class JobTimeoutError(FlaskwebError):
    """A job did not finish within the time given to `wait`; it goes on on the server."""


_BY_STATUS: dict[int, type[FlaskwebError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


def error_for(status: int, body: Any, *, method: str = "", url: str = "") -> FlaskwebError:
    """The error to raise for an answer with this status and decoded body."""
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ClientError)
    fields: dict[str, Any] = {}
    if isinstance(body, dict):
        detail = str(body.get("detail") or f"HTTP {status}")
        code = str(body.get("code") or "")
        found = body.get("fields")
        if isinstance(found, dict):
            fields = found
        problems = body.get("problems")
        count = body.get("problem_count")
        return cls(
            detail,
            status=status,
            code=code,
            fields=fields,
            problems=problems if isinstance(problems, list) else None,
            problem_count=count if isinstance(count, int) else None,
            body=body,
            method=method,
            url=url,
        )
    text = str(body or "").strip()
    return cls(text[:300] or f"HTTP {status}", status=status, body=body, method=method, url=url)
