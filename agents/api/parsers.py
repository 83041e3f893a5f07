"""The one JSON parser of the API: where the body's depth and text are checked, once.

Size is bounded before this runs (`DATA_UPLOAD_MAX_MEMORY_SIZE`, set from
`LOOPWARDEN_MAX_BODY_BYTES`; the exception handler answers 413). Depth is bounded here, before
anything downstream (serializers, the fingerprint, the JSON encoder of the database driver)
walks the body recursively. Text the database cannot hold is refused here, or encoded when the
view records reports (see `agents.db.storable`): no endpoint checks it on its own.
"""

from __future__ import annotations

import codecs

from django.conf import settings
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

from agents.db import storable
from agents.errors import BadInput


class BodyTooDeep(BadInput):
    code = "BODY_TOO_DEEP"


class UnsupportedText(BadInput):
    code = "UNSUPPORTED_TEXT"


def _is_text_encoding(encoding: str) -> bool:
    """Whether `encoding` decodes bytes to text: `bytes.decode` refuses the other codecs with
    a LookupError (for a non-empty input); a text codec's own error for this byte says yes."""
    try:
        b"a".decode(encoding)
    except LookupError:
        return False
    except ValueError:  # UnicodeDecodeError and the like: a text codec that refuses the byte
        pass
    return True


def _too_deep(path: str, limit: int) -> BodyTooDeep:
    return BodyTooDeep(
        f"The body nests JSON deeper than {limit} levels (LOOPWARDEN_MAX_JSON_DEPTH) at {path}.",
        fields={path: f"nested deeper than {limit} levels"},
    )


class GuardedJSONParser(JSONParser):
    """JSON, no deeper than the limit, with text the database can hold.

    A view that records reports of what already happened sets `records_reports = True`: its
    unstorable strings are encoded instead of refused.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.LOOPWARDEN_MAX_JSON_DEPTH
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        if not _is_text_encoding(encoding):
            # `charset=rot13`, `zlib`, `base64`...: codecs Python knows (so Django keeps the
            # charset) that turn bytes into bytes; no JSON text is sent in them.
            raise UnsupportedMediaType(media_type)
        try:
            # DRF's JSONParser.parse, with the numbers checked too.
            data = json.load(
                codecs.getreader(encoding)(stream),
                parse_constant=storable.refuse_constant,  # as storable.loads reads JSON
                parse_float=storable.finite_float,
            )
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            # The decoder nests a C call per level; far past the limit it gives up first.
            raise _too_deep("body", limit) from None
        view = (parser_context or {}).get("view")
        try:
            return storable.admit(
                data, max_depth=limit, encode=getattr(view, "records_reports", False)
            )
        except storable.TooDeep as exc:
            raise _too_deep(exc.path, limit) from None
        except storable.UnstorableText as exc:
            raise UnsupportedText(
                str(exc),
                fields={exc.path: f"{'a key holds ' if exc.in_key else ''}{exc.what}"},
            ) from None
