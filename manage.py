#!/usr/bin/env python
from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loopwarden.settings")
    try:
        from django.core.management import execute_from_command_line
    except ImportError:
        sys.exit(
            f"loopwarden: this python ({sys.executable}) has no Django: run "
            ".venv/bin/python manage.py ... (./dev run or ./dev test creates .venv), or "
            "source .venv/bin/activate first"
        )

    from loopwarden.startup import explained_errors

    with explained_errors(migrating=sys.argv[1:2] == ["migrate"]):
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
