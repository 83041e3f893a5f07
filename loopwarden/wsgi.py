from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from loopwarden.startup import one_line_on_config_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loopwarden.settings")
# 3 is gunicorn's "worker failed to boot": it stops the server instead of respawning.
with one_line_on_config_error(3):
    application = get_wsgi_application()
