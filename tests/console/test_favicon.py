"""`/favicon.ico`: browsers ask for it on every page that names no icon (the JSON report, the
Django admin, an error page), so it answers the brand's icon rather than a 404."""

from __future__ import annotations

import struct


def test_favicon_ico_answers_an_icon_to_anyone(anonymous):
    response = anonymous.get("/favicon.ico")

    assert response.status_code == 200
    assert response["Content-Type"] in ("image/x-icon", "image/vnd.microsoft.icon")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    reserved, kind, count = struct.unpack("<HHH", body[:6])
    assert (reserved, kind) == (0, 1) and count >= 1  # an ICO file's header: an icon, not a page
    assert "max-age" in response.get("Cache-Control", "")
