"""Cursor pagination for the API's lists: a page, and a `next` link to the one after it.

Keyset pagination on columns that never change (ids, creation times), so rows created while a
client pages through a list never shift a page or show a row twice. The cursor is the last
row's key, written so that every string the schema's pattern admits is a valid cursor: a
client cannot forge one that breaks the query, only one that starts at another place.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.utils.urls import replace_query_param

DEFAULT_LIMIT = 100
MAX_LIMIT = 500

NUMBER = r"^[0-9]{1,18}$"
NUMBER_PAIR = r"^[0-9]{1,18}\.[0-9]{1,18}$"
TIME_AND_UUID = r"^[0-9]{1,18}\.[0-9a-f]{32}$"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A cursor past any real row starts at the top; the clamp keeps the date one every database and
# Python itself can hold.
_LATEST_MICROS = (datetime(9000, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)


class PageQuery(serializers.Serializer):
    """`cursor` and `limit` of a list request (other query parameters are the view's)."""

    limit = serializers.RegexField(
        r"^[0-9]{1,9}$", required=False, error_messages={"invalid": "A whole number."}
    )

    def __init__(self, *args, cursor_pattern: str = NUMBER, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["cursor"] = serializers.RegexField(
            cursor_pattern, required=False, error_messages={"invalid": "Not a cursor of this list."}
        )

    def validate_limit(self, value: str) -> int:
        if not 1 <= int(value) <= MAX_LIMIT:
            raise serializers.ValidationError(f"From 1 to {MAX_LIMIT}.")
        return int(value)


def page_parameters(cursor_pattern: str = NUMBER) -> list[OpenApiParameter]:
    return [
        OpenApiParameter(
            "cursor",
            {"type": "string", "pattern": cursor_pattern},
            required=False,
            description="Where the page starts: copy it from the previous page's `next` link.",
        ),  # fmt: skip
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            required=False,
            description=f"Rows per page, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT}).",
        ),  # fmt: skip
    ]


def read_page_query(request, cursor_pattern: str = NUMBER) -> tuple[str | None, int]:
    """(cursor, limit) from the query string; a malformed one answers 400."""
    query = PageQuery(data=request.query_params.dict(), cursor_pattern=cursor_pattern)
    query.is_valid(raise_exception=True)
    return query.validated_data.get("cursor"), query.validated_data.get("limit", DEFAULT_LIMIT)


def next_link(request, cursor: str | None) -> str | None:
    if cursor is None:
        return None
    return replace_query_param(request.build_absolute_uri(), "cursor", cursor)


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _moment(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=min(micros, _LATEST_MICROS))


def newest_first(
    request, query: QuerySet, *, time_field: str = "created_at"
) -> tuple[list, str | None]:
    """A page of `query` ordered newest first by (`time_field`, uuid pk), and its next link."""
    cursor, limit = read_page_query(request, TIME_AND_UUID)
    query = query.order_by(f"-{time_field}", "-pk")
    if cursor:
        micros, hex_id = cursor.split(".")
        moment, last = _moment(int(micros)), uuid.UUID(hex_id)
        # The first condition alone is a range of the time index, so a deep page starts where
        # the cursor is instead of filtering every newer row (a year of tasks: issue 43).
        query = query.filter(**{f"{time_field}__lte": moment}).filter(
            Q(**{f"{time_field}__lt": moment}) | Q(pk__lt=last)
        )
    rows = list(query[: limit + 1])
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    last_row = rows[-1]
    return rows, next_link(request, f"{_micros(getattr(last_row, time_field))}.{last_row.pk.hex}")


def by_id(request, query: QuerySet, *, descending: bool = False) -> tuple[list, str | None]:
    """A page of `query` ordered by its integer pk, and its next link."""
    cursor, limit = read_page_query(request, NUMBER)
    query = query.order_by("-pk" if descending else "pk")
    if cursor:
        query = query.filter(**{"pk__lt" if descending else "pk__gt": int(cursor)})
    rows = list(query[: limit + 1])
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, next_link(request, str(rows[-1].pk))
