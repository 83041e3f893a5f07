from __future__ import annotations

import os
import sys

from django.core.wsgi import get_wsgi_application

from loopwarden.env import ConfigError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loopwarden.settings")
try:
    application = get_wsgi_application()
except ConfigError as exc:
    print(f"loopwarden: {exc}", file=sys.stderr)
    # 3 is gunicorn's "worker failed to boot": it stops the server instead of respawning.
    raise SystemExit(3) from None
