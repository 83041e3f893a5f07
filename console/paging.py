"""Pages of lists that only grow (tasks, the audit log): counted up to a bound."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

# Rows a list counts at most: past it the page says "10000+" and its last page is the 10000th
# row's. A count of every task read the whole index on each dashboard refresh, which a year
# of history made the slowest part of the page (docs/BENCHMARKS.md, growth phase); filters
# and search reach anything older.
COUNT_CAP = 10_000


class CappedPaginator(Paginator):
    def __init__(self, object_list: QuerySet, per_page: int, cap: int | None = None) -> None:
        super().__init__(object_list, per_page)
        self.rows = object_list
        self.cap = COUNT_CAP if cap is None else cap

    @cached_property
    def found(self) -> int:
        return self.rows.order_by()[: self.cap + 1].count()  # no sort to count

    @cached_property
    def count(self) -> int:
        return min(self.found, self.cap)

    @property
    def more(self) -> bool:
        """Whether rows past the cap were left uncounted."""
        return self.found > self.cap
