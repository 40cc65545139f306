"""The OpenAPI schema class of the REST API (REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]).

Its own module: drf-spectacular's AutoSchema imports rest_framework.generics, which imports
the default pagination class (flaskweb.api_errors) while it loads.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema

from flaskweb.api_errors import ErrorSerializer

_ERRORS = {
    "401": "No credentials, or an unknown token (code not_authenticated / authentication_failed).",
    "403": "Your role in the project does not allow this (code permission_denied).",
    "404": "No such object, or one you may not know about (code not_found).",
    "503": "The database or Redis did not answer for a moment (code service_unavailable): "
    "send the request again after Retry-After seconds.",
}
_INVALID = "The request is not valid (code invalid): `fields` names each problem."
_MEDIA_TYPE = "The body's media type is not one the operation reads (code unsupported_media_type)."


class ApiAutoSchema(AutoSchema):
    """Tags each operation with its app (annotation, judging, analytics) and documents the
    error responses every operation can give, unless the view documents its own."""

    def get_tags(self) -> list[str]:
        return [type(self.view).__module__.split(".")[0]]

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        error = self.resolve_serializer(ErrorSerializer(), "response").ref
        wanted = dict(_ERRORS)
        if "requestBody" in operation or any(
            p["in"] == "query" for p in operation.get("parameters", [])
        ):
            wanted["400"] = _INVALID
        if "requestBody" in operation:
            wanted["415"] = _MEDIA_TYPE
        responses = operation["responses"]
        for code, description in wanted.items():
            if code not in responses:
                responses[code] = {
                    "content": {"application/json": {"schema": error}},
                    "description": description,
                }
        operation["responses"] = dict(sorted(responses.items()))
        return operation
