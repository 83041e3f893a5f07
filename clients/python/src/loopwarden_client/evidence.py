"""The shape of a verifier's evidence: one rule, for the client and the server.

The client refuses malformed evidence where it is written, before it is sent; the server's
guard refuses it in a result (invalid_evidence) and names the same field in its report. Pure
Python, like `loopwarden_client.novelty`: the guard imports it, and it imports nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REVISION_MAX = 2**63 - 1  # the server stores a revision in a 64-bit column


def evidence_problem(evidence: Any, current_revision: int = 0) -> str | None:
    """What is wrong with a verifier's evidence, naming the field; None when it is well formed.

    `{"revision": int, "done": bool, "committed"?: bool, "milestone"?: str}`, the revision not
    below `current_revision` (the server's is the task's; the client knows only 0).
    """
    if not isinstance(evidence, Mapping):
        return f"evidence must be an object, not {type(evidence).__name__}"
    revision, done = evidence.get("revision"), evidence.get("done")
    if "revision" not in evidence:
        return "evidence['revision'] is missing: an int, the verified revision"
    if not isinstance(revision, int) or isinstance(revision, bool):
        return f"evidence['revision'] must be an int, not {revision!r}"
    if not current_revision <= revision <= REVISION_MAX:
        low = revision < current_revision
        bound = f"at least {current_revision}, the task's" if low else f"at most {REVISION_MAX}"
        return f"evidence['revision'] must be {bound}, not {revision}"
    if "done" not in evidence:
        return "evidence['done'] is missing: a bool, whether the goal is met"
    if not isinstance(done, bool):
        return f"evidence['done'] must be a bool, not {done!r}"
    committed, milestone = evidence.get("committed"), evidence.get("milestone")
    if committed is not None and not isinstance(committed, bool):
        return f"evidence['committed'] must be a bool, not {committed!r}"
    if milestone is not None and not isinstance(milestone, str):
        return f"evidence['milestone'] must be a str, not {milestone!r}"
    return None
