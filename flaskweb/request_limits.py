"""Request bodies refused by their size before they are read.

Invariant: no request body is read past its endpoint's limit. A declared Content-Length over
the limit is answered 413 before a byte is read: before the CSRF middleware (which reads
request.POST, and so spools multipart files to disk) and before the view. A body without a
Content-Length (chunked) is read through a counter that stops at the limit, and the request
is answered 413 whatever the code that was reading it made of the error.

Limits: FLASKWEB_MAX_BODY_BYTES for every endpoint; the upload endpoints (UPLOAD_URL_NAMES)
take FLASKWEB_MAX_UPLOAD_BYTES of files plus FLASKWEB_MAX_BODY_BYTES of form fields and
multipart framing, from a signed-in user or a token request only (an anonymous upload is
refused by the view anyway, after the CSRF middleware would have read it). The views check
the files' own total against FLASKWEB_MAX_UPLOAD_BYTES, with a message naming them.
"""

from __future__ import annotations

from io import IOBase

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse

#: The endpoints that take files, by URL name. Every other endpoint takes small bodies only,
#: so a new upload endpoint that is not listed here refuses large files (413) until it is.
UPLOAD_URL_NAMES = frozenset(
    {
        "annotation:upload-create",
        "annotation-api:api-upload-create",
        "annotation:rubric-import",
        "judging:template-import",
        "judging-api:judge-output-import",
        "analytics:score-import",
        "analytics-api:score-import",
        "analytics:preference-import",
        "analytics-api:preference-import",
    }
)

_REFUSED = "_flaskweb_body_refused"  # request attribute: the limit a read ran past


class RequestBodyTooLarge(RequestDataTooBig):
    """A body without a Content-Length ran past its endpoint's limit while being read."""


def body_limit(request, view_name: str) -> int:
    """The most bytes the request's body may have at the endpoint named `view_name`."""
    limit = settings.FLASKWEB_MAX_BODY_BYTES
    if view_name in UPLOAD_URL_NAMES and (
        request.user.is_authenticated or "HTTP_AUTHORIZATION" in request.META
    ):
        limit += settings.FLASKWEB_MAX_UPLOAD_BYTES
    return limit


def declared_length(request) -> int | None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
    return length if length >= 0 else None


def refusal(request, limit: int) -> HttpResponse:
    """413, said without reading the body: the API's error shape under /api/, text otherwise."""
    detail = f"the request body is larger than {limit:,} bytes, the limit of this address"
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": detail, "code": "too_large"}, status=413)
    return HttpResponse(
        f"Request too large: {detail}.\n", status=413, content_type="text/plain; charset=utf-8"
    )


class _CountedBody(IOBase):
    """A body stream that raises RequestBodyTooLarge, and marks the request, once more than
    `limit` bytes have been read from it; it never asks its stream for more than one byte
    past the limit."""

    def __init__(self, stream, limit: int, request) -> None:
        self._stream, self._limit, self._request = stream, limit, request
        self._count = 0

    def _counted(self, data: bytes) -> bytes:
        self._count += len(data)
        if self._count > self._limit:
            setattr(self._request, _REFUSED, self._limit)
            raise RequestBodyTooLarge(f"the request body is larger than {self._limit:,} bytes")
        return data

    def _size(self, size: int | None) -> int:
        room = self._limit + 1 - self._count
        return room if size is None or size < 0 else min(size, room)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        return self._counted(self._stream.read(self._size(size)))

    def readline(self, size: int | None = -1, /) -> bytes:
        return self._counted(self._stream.readline(self._size(size)))


class RequestSizeLimitMiddleware:
    """Refuses (413) a request whose body is over its endpoint's limit, before it is read.
    Listed before the CSRF middleware, whose process_view reads request.POST."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        limit = getattr(request, _REFUSED, None)
        if limit is not None:  # a counted read ran past the limit: whatever answered, refuse
            return refusal(request, limit)
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        length = declared_length(request)
        unknown = length is None and (
            "HTTP_TRANSFER_ENCODING" in request.META or "CONTENT_LENGTH" in request.META
        )
        if not unknown and (length or 0) <= settings.FLASKWEB_MAX_BODY_BYTES:
            return None  # no body, or one small enough anywhere
        limit = body_limit(request, request.resolver_match.view_name)
        if length is not None:
            return refusal(request, limit) if length > limit else None
        # Django reads a body without a valid Content-Length as empty (its stream is limited
        # to 0 bytes); whatever reads it anyway, through wsgi.input or the request's stream,
        # is counted.
        request.environ["wsgi.input"] = _CountedBody(request.environ["wsgi.input"], limit, request)
        request._stream = _CountedBody(request._stream, limit, request)
        return None

    def process_exception(self, request, exception):
        if isinstance(exception, RequestBodyTooLarge):
            return refusal(request, getattr(request, _REFUSED, 0))
        return None
