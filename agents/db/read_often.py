"""Rows every decision reads (the token, the agent, the task, its calls), built from the
database without `Model.__init__`."""

from __future__ import annotations

from django.db import models
from django.db.models import signals
from django.db.models.base import ModelState


class ReadOften(models.Model):
    """A model whose rows every decision reads: `from_db` puts the values into the instance's
    `__dict__` in one update (in `_meta.concrete_fields` order, with the `_state` Django gives),
    rather than through `__init__`, which sets each field one attribute at a time. Only for a
    row with every field loaded and no `pre_init`/`post_init` receiver; anything else is
    Django's `from_db` itself.
    """

    class Meta:
        abstract = True

    @classmethod
    def from_db(cls, db, field_names, values):
        attnames = cls.__dict__.get("_read_often_attnames")
        if attnames is None:
            attnames = tuple(f.attname for f in cls._meta.concrete_fields)
            cls._read_often_attnames = attnames
        if (
            len(values) != len(attnames)
            or signals.pre_init.has_listeners(cls)
            or signals.post_init.has_listeners(cls)
        ):
            return super().from_db(db, field_names, values)
        new = cls.__new__(cls)
        new.__dict__.update(zip(attnames, values, strict=True))
        state = new._state = ModelState()
        state.adding = False
        state.db = db
        return new
