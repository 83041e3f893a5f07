"""Requests written byte by byte on a socket, for what no HTTP client will send.

httpx refuses to send a NUL in a path, a negative Content-Length or both framing headers at
once, and frames every body itself; a hostile client does none of that. `exchange` sends the
bytes as given and reads what the server answers, one response, as it came.
"""

from __future__ import annotations

import contextlib
import json
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool = False  # the server closed the connection after this answer
    extra: bytes = field(default=b"", repr=False)  # anything it sent after this answer

    @property
    def envelope(self) -> dict[str, Any] | None:
        """The error envelope, or None when the body is not one."""
        if "application/json" not in self.headers.get("content-type", ""):
            return None
        try:
            body = json.loads(self.body)
        except ValueError:
            return None
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and {"code", "message", "fields"} <= error.keys():
            return body
        return None

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def describe(self) -> str:
        return f"{self.status} {self.headers.get('content-type')} {self.body[:300]!r}"


def chunked(body: bytes, size: int = 7) -> bytes:
    """`body` in the chunked transfer coding, in chunks of `size` bytes."""
    pieces = [body[at : at + size] for at in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def request(
    method: str,
    target: str,
    *,
    host: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    chunk: bool = False,
) -> bytes:
    """A well-formed HTTP/1.1 request; `chunk` sends the body chunked, without Content-Length."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    payload = b""
    if body is not None:
        if chunk:
            lines.append("Transfer-Encoding: chunked")
            payload = chunked(body)
        else:
            lines.append(f"Content-Length: {len(body)}")
            payload = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + payload


def exchange(url: str, raw: bytes, *, timeout: float = 20.0, linger: float = 0.5) -> Answer:
    """Send `raw` to the server at `url` and read one answer.

    After the answer, waits up to `linger` seconds for more: a server that kept the
    connection open and then answered again (taking the rest of a body as a new request)
    shows that in `extra`; one that closed it shows `closed`.
    """
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        # It may answer and close before taking everything: then read what it said.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(raw)
        reader = _Reader(sock)
        answer = reader.answer(head_only=raw.startswith(b"HEAD "))
        while 100 <= answer.status < 200:  # an interim answer (100 Continue): the next one
            answer = reader.answer(head_only=raw.startswith(b"HEAD "))
        if linger <= 0:
            return answer
        sock.settimeout(linger)
        try:
            answer.extra = reader.rest()
            answer.closed = True
        except TimeoutError:
            answer.extra = bytes(reader.buffer)
        except ConnectionResetError:
            answer.closed = True
        return answer


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def _more(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def answer(self, *, head_only: bool = False) -> Answer:
        while b"\r\n\r\n" not in self.buffer:
            if not self._more():
                raise ConnectionError(f"no complete answer: {bytes(self.buffer[:300])!r}")
        head, _, rest = bytes(self.buffer).partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.buffer = bytearray(rest)
        status = int(status_line.split()[1])
        if head_only or status in (204, 304) or 100 <= status < 200:
            return Answer(status, headers, b"")
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(self.buffer) < length and self._more():
                pass
            body = bytes(self.buffer[:length])
            self.buffer = self.buffer[length:]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._dechunk()
        else:  # to the end of the connection
            while self._more():
                pass
            body, self.buffer = bytes(self.buffer), bytearray()
        return Answer(status, headers, body)

    def _dechunk(self) -> bytes:
        body = b""
        while True:
            while b"\r\n" not in self.buffer and self._more():
                pass
            size_line, _, rest = bytes(self.buffer).partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2 and self._more():
                rest = bytes(self.buffer).partition(b"\r\n")[2]
            body += rest[:size]
            self.buffer = bytearray(rest[size + 2 :])
            if size == 0:
                return body

    def rest(self) -> bytes:
        while self._more():
            pass
        return bytes(self.buffer)
