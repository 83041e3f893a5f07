"""Pages of lists that only grow (tasks, the audit log): counted up to a bound."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.utils.functional import cached_property

# Rows a list counts at most: past it the page says "10000+" and its last page is the 10000th
# row's. A count of every task read the whole index on each dashboard refresh, which a year
# of history made the slowest part of the page (docs/BENCHMARKS.md, growth phase); filters
# and search reach anything older.
COUNT_CAP = 10_000


class CappedPaginator(Paginator):
    def __init__(self, object_list, per_page, cap: int = COUNT_CAP, **kwargs) -> None:
        super().__init__(object_list, per_page, **kwargs)
        self.cap = cap

    @cached_property
    def found(self) -> int:
        return self.object_list[: self.cap + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self.found, self.cap)

    @property
    def more(self) -> bool:
        """Whether rows past the cap were left uncounted."""
        return self.found > self.cap
