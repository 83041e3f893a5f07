"""The embedded broker (`filesystem://`): kombu's filesystem transport, with each message
written whole before it appears in the queue folder.

kombu's own `_put` creates the message's file in the queue folder and then writes it. A worker
that lists the folder in between (it polls every `polling_interval`) moves the still empty
file away, fails to decode it and stops for good ("Unrecoverable error: JSONDecodeError"): the
embedded default then runs no job until it is restarted. Here the message is serialized first,
written to a file whose name no queue matches, and renamed into place: a rename within one
folder is atomic, so a reader finds the whole message or none.

`register()` makes every `filesystem://` connection of the process use it (the Celery app calls
it on import, so the web process, the worker and beat all do).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        """Put `payload` onto `queue`: the same file name and content as kombu's, whole."""
        data = str_to_bytes(filesystem.dumps(payload))
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        # A leading dot: `_get` takes a file whose name after its first dot is "<queue>.msg".
        partial = os.path.join(self.data_folder_out, f".{name}.partial")
        try:
            with open(partial, "wb", buffering=0) as f:
                f.write(data)
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self) -> dict:
        # No host for folders: kombu's default ("localhost") made every worker and beat log
        # "No hostname was supplied" at start.
        return {"port": self.default_port}


def register() -> None:
    """`filesystem://` means this transport in this process."""
    TRANSPORT_ALIASES["filesystem"] = "loopwarden.broker:Transport"
