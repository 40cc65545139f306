"""The REST API's JSON parser (the default in settings.REST_FRAMEWORK, so every API view of
every app reads JSON bodies through it): DRF's JSONParser decodes with the standard
library as it is, where a body nested 3,000 levels deep raises RecursionError (a 500) and a
key given twice silently keeps its last value. This one decodes with the rule every input
of the project follows (annotation.parsers.json_loads_strict) and answers a 400 naming
what is wrong."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from annotation.parsers import JsonRefused, json_loads_strict


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            return json_loads_strict(stream.read().decode(encoding))
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding} ({exc.reason})")
        except JsonRefused as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
