"""The one JSON renderer of the API: reported text comes back out exactly as it went in.

Strings stored encoded (see `agents.db.storable`) are decoded here, so a REUSE answer, a trace or
an operation shows what the agent reported. A decoded lone surrogate cannot be written as
UTF-8: such an answer is written with ASCII escapes (`\\ud800`), which is the same JSON.
"""

from __future__ import annotations

from rest_framework.renderers import JSONRenderer

from agents.db import storable


class FaithfulJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        data = storable.decode(data)
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            self.ensure_ascii = True  # this instance renders this one response
            return super().render(data, accepted_media_type, renderer_context)
