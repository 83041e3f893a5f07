"""The embedded broker's messages appear in the queue folder only once written whole.

kombu's filesystem transport creates a message's file and then writes it; a worker listing the
folder in between moved the empty file away, failed to decode it, and stopped for good
("Unrecoverable error: JSONDecodeError"), as a real worker did under load in the suite. Here
the reader looks at the folder at that very moment: while the message is being serialized.
"""

from __future__ import annotations

from queue import Empty
from typing import Any

import pytest
from kombu import Connection
from kombu.transport import filesystem

from tests.celery.helpers import filesystem_transport_options


@pytest.fixture
def broker(tmp_path):
    options = filesystem_transport_options(tmp_path)
    with Connection("filesystem://", transport_options=options) as conn:
        yield conn


def test_a_reader_sees_no_message_before_it_is_written_whole(broker, monkeypatch):
    writer, reader = broker.channel(), broker.channel()
    seen: list[Any] = []
    serialize = filesystem.dumps

    def serialize_and_look(payload: Any) -> str:
        text = serialize(payload)
        try:
            seen.append(reader._get("jobs"))
        except Empty:
            seen.append(None)
        return text

    monkeypatch.setattr(filesystem, "dumps", serialize_and_look)
    writer._put("jobs", {"body": "sweep"})
    monkeypatch.undo()

    assert seen == [None]
    assert reader._get("jobs") == {"body": "sweep"}
    with pytest.raises(Empty):
        reader._get("jobs")


def test_each_message_reaches_its_own_queue_once(broker):
    writer, reader = broker.channel(), broker.channel()
    for n in range(3):
        writer._put("jobs", {"n": n})
    writer._put("other", {"n": "other"})

    # (Order within one millisecond is kombu's: by the file's random name.)
    assert sorted(reader._get("jobs")["n"] for _ in range(3)) == [0, 1, 2]
    assert reader._get("other") == {"n": "other"}
    with pytest.raises(Empty):
        reader._get("jobs")
