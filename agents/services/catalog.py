"""What admins rarely change and every decision reads (model prices, tool policies), kept in
each process's memory.

One `CatalogVersion` number (not Django's cache: see docs/BENCHMARKS.md, "Why the hot path
is built this way") is bumped in the transaction that changes a price or a policy (post_save /
post_delete signals), and `agents.taskrow.lock_task` reads it in the same statement that locks
the task row. A process whose copy is older reloads both tables (two statements, once per
change), so every worker sees a change at its next decision, and a decision costs no statement
for prices or policies.

Order matters for correctness: the version is read (with the lock) before the tables are
loaded, so a copy is never older than the number it is filed under; a newer copy only means
one reload more.

A queryset `update()` or raw SQL sends no signal: change prices and policies through `save()`
or `delete()` (the admin does), or call `bump()` after.

Limit profiles are not here: a task copies its profile's limits when it is created, so
decisions never read profiles.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field

from django.db.models.signals import post_delete, post_save

from agents.models import CatalogVersion, ModelPrice, ToolPolicy


@dataclass(frozen=True)
class Catalog:
    version: int | None
    prices: dict[str, ModelPrice] = field(default_factory=dict)
    policies: dict[str, ToolPolicy] = field(default_factory=dict)


_UNLOADED = object()
_current: Catalog | object = _UNLOADED
_loading = threading.Lock()


def catalog_at(version: int | None) -> Catalog:
    """This process's copy of the tables, reloaded if it is not at `version`."""
    global _current
    current = _current
    if isinstance(current, Catalog) and current.version == version:
        return current
    with _loading:
        loaded = Catalog(
            version=version,
            prices={row.model: row for row in ModelPrice.objects.all()},
            policies={row.tool: row for row in ToolPolicy.objects.all()},
        )
        _current = loaded
    return loaded


def current_version() -> int | None:
    """The version as committed now (one statement; the task lock reads it for free)."""
    return CatalogVersion.objects.filter(pk=1).values_list("number", flat=True).first()


def loaded() -> Catalog:
    """This process's copy as it is, unchecked (empty before the first decision loads it)."""
    current = _current
    return current if isinstance(current, Catalog) else Catalog(version=None)


def price_row(catalog: Catalog, model: str) -> ModelPrice | None:
    """The model's price row, else the "*" row, else None (the model is free)."""
    return catalog.prices.get(model) or catalog.prices.get("*")


def bump(*, using: str = "default", **_kwargs) -> None:
    """A price or policy changed: give the catalog a new version (in the changing transaction).

    A random number, not a counter: a counter restarts after its row is lost (a restored or
    flushed database), and a process still holding the old tables under the same number would
    never reload them.
    """
    number = secrets.randbits(62)
    versions = CatalogVersion.objects.using(using)
    if not versions.filter(pk=1).update(number=number):
        versions.bulk_create([CatalogVersion(pk=1, number=0)], ignore_conflicts=True)
        versions.filter(pk=1).update(number=number)


def connect() -> None:
    for model in (ModelPrice, ToolPolicy):
        post_save.connect(bump, sender=model, dispatch_uid=f"catalog-save-{model.__name__}")
        post_delete.connect(bump, sender=model, dispatch_uid=f"catalog-delete-{model.__name__}")
