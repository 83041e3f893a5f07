"""Task ids that sort by their creation time (UUID version 7, RFC 9562).

Every trace row is indexed by its task's id first (`model_call_seq`, `tool_call_seq`: task,
seq). With random ids (version 4) a fresh task's first rows land on a random leaf of indexes
that grow with the whole history (128 MB each at 5 million trace rows): a decision reads that
leaf from outside PostgreSQL's buffers and, after a checkpoint, writes a full-page image of it.
Ids that grow with time put today's tasks on the indexes' right edge, a few pages every
decision shares (docs/BENCHMARKS.md, "Growth"). Still 74 random bits: an id is no easier to
guess than it needs to be (every read of a task checks who asks anyway).
"""

from __future__ import annotations

import os
import time
import uuid

_RAND_A = (1 << 12) - 1
_RAND_B = (1 << 62) - 1


def uuid7() -> uuid.UUID:
    """48 bits of Unix time in milliseconds, the version (7), 12 random bits, the variant (10),
    62 random bits."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        (ms & ((1 << 48) - 1)) << 80
        | 0x7 << 76
        | (rand >> 62 & _RAND_A) << 64
        | 0b10 << 62
        | rand & _RAND_B
    )
    return uuid.UUID(int=value)
