"""Whether a process is still running, for the gunicorn hooks and worker (no Django)."""

from __future__ import annotations

import os


def alive(pid: int | None) -> bool:
    """True while process `pid` runs (another user's counts as running)."""
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
