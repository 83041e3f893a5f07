"""Hostile requests against every endpoint: the answer is the error envelope or a success.

One gunicorn started as deployed (`gunicorn.conf.py`), requests written on raw sockets one at a
time: wrong types, huge numbers, deep nesting, NUL and lone surrogates, bad JSON, bad content
types, chunked and oversized bodies, bad ids, bad tokens, wrong methods, bad query strings, a
bad Host, and what gunicorn refuses before the application runs. On `/api/` no answer is an
HTML page and none is a 5xx, and the server logs no traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest
from django.db import connection

from tests.live import database_url, gunicorn_server
from tests.raw_http import Answer, exchange, request

# Slow (a live gunicorn and every endpoint): `./dev test` leaves it out, CI runs it.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LIMIT = 64 * 1024

# Values of every JSON type, put where a field of another type belongs.
WRONG_TYPES = ["x", 7, 1.5, True, None, [1, "a"], {"k": "v"}]
HUGE_NUMBERS = [10**30, -(10**30), 2**63, -(2**63) - 1, 1e308, -1, 0]
BAD_TEXT = ["a\x00b", "\ud800", "x" * 100_000, "\u202etxt", "", " "]


@dataclass
class World:
    host: str
    agent: str  # tokens
    operator: str
    admin: str
    task: str
    model_call: int
    tool_call: int
    operation: int


@dataclass
class Case:
    name: str
    raw: bytes
    method: str = "GET"


def _world(url: str, make_agent, make_user) -> World:
    _, agent = make_agent("hostile", namespace="ns-hostile")
    make_agent("hostile-other", namespace="ns-hostile-other")
    _, operator = make_user("hostile-op")
    _, admin = make_user("hostile-admin", admin=True)
    with httpx.Client(base_url=f"{url}/api/v1/", timeout=30) as http:
        as_agent = {"Authorization": f"Bearer {agent}"}
        task = http.post("tasks", json={"goal": "be attacked"}, headers=as_agent).json()["id"]
        gate = http.post(f"tasks/{task}/model-calls", json={}, headers=as_agent).json()
        write = http.post(
            f"tasks/{task}/tool-calls",
            json={"tool": "pay", "args": {"n": 1}, "effect": "write", "operation_key": "pay-1"},
            headers=as_agent,
        ).json()
        operations = http.get("operations", headers={"Authorization": f"Bearer {operator}"})
    return World(
        host=urlsplit(url).netloc, agent=agent, operator=operator, admin=admin, task=task,
        model_call=gate["model_call"], tool_call=write["tool_call"],
        operation=operations.json()["operations"][0]["id"],
    )  # fmt: skip


def _endpoints(w: World) -> list[tuple[str, str, str, dict | None]]:
    """(method, path under /api/v1/, token, a body it accepts) for every endpoint."""
    t = f"tasks/{w.task}"
    return [
        ("POST", "tasks", w.agent, {"goal": "g", "profile": "default", "external_ref": "r",
                                    "trigger_key": "t", "limits": {"max_model_calls": 5}}),
        ("GET", "tasks", w.operator, None),
        ("GET", t, w.agent, None),
        ("POST", f"{t}/model-calls", w.agent,
         {"model": "m", "est_prompt_tokens": 10, "max_output_tokens": 10}),
        ("POST", f"{t}/model-calls/{w.model_call}/usage", w.agent,
         {"prompt_tokens": 1, "completion_tokens": 1, "output_text": "o",
          "tool_calls": [{"name": "search", "args": {"q": "a"}}]}),
        ("POST", f"{t}/tool-calls", w.agent,
         {"tool": "search", "args": {"q": "a"}, "effect": "read", "operation_key": "k",
          "job_id": "j", "call_id": "c", "model_call": w.model_call}),
        ("POST", f"{t}/tool-calls/{w.tool_call}/result", w.agent,
         {"kind": "SUCCESS", "code": "c", "data": {"a": 1}, "data_hash": "h", "wait_ms": 5,
          "job_id": "j", "attempts": 1, "duration_ms": 3, "error": "e",
          "evidence": {"revision": 0, "done": False, "committed": True, "milestone": "m"}}),
        ("GET", f"{t}/trace", w.agent, None),
        ("POST", f"{t}/finish", w.agent,
         {"evidence": {"revision": 0, "done": False}, "answer": "a"}),
        ("POST", f"{t}/stop", w.agent, {"reason": "r", "request_id": "q"}),
        ("POST", f"{t}/resume", w.operator,
         {"reason": "r", "grant": {"model_calls": 1, "cost": "0.50", "seconds": 60}}),
        ("PATCH", f"{t}/limits", w.admin, {"max_model_calls": 30, "reason": "r"}),
        ("GET", "operations", w.operator, None),
        ("GET", f"operations/{w.operation}", w.operator, None),
        ("POST", f"operations/{w.operation}/reconcile", w.operator,
         {"verdict": "COMMITTED", "note": "n", "result": {"ok": True}, "evidence": {"x": 1}}),
        ("GET", "agents/hostile-other", w.operator, None),
        ("PATCH", "agents/hostile-other", w.admin,
         {"allowed_profiles": ["default"], "reason": "r"}),
        ("POST", "agents/hostile-other/pause", w.operator, {"reason": "r"}),
        ("POST", "agents/hostile-other/unpause", w.operator, {"reason": "r"}),
        ("GET", "profiles", w.operator, None),
        ("POST", "profiles", w.admin,
         {"name": "hostile-p", "description": "d", "max_model_calls": 5}),
        ("GET", "profiles/default", w.operator, None),
        ("PATCH", "profiles/hostile-p", w.admin, {"max_model_calls": 6}),
        ("DELETE", "profiles/hostile-nothing", w.admin, None),
        ("GET", "audit", w.operator, None),
        ("GET", "schema/", w.operator, None),
    ]  # fmt: skip


def _json(value) -> bytes:
    return json.dumps(value).encode("utf-8", "surrogatepass")


def _send(w: World, method: str, path: str, token: str | None, body: bytes | None = None, *,
          content_type: str = "application/json", chunk: bool = False,
          headers: dict[str, str] | None = None, host: str | None = None) -> bytes:  # fmt: skip
    sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    if body is not None and content_type:
        sent["Content-Type"] = content_type
    target = path if path.startswith("/") else f"/api/v1/{path}"
    return request(method, target, host=host or w.host, headers=sent, body=body, chunk=chunk)


def _body_cases(w: World, method: str, path: str, token: str, body: dict) -> Iterator[Case]:
    label = f"{method} {path.replace(w.task, '{id}')}"
    for field in body:
        for value in WRONG_TYPES:
            if type(value) is not type(body[field]):
                yield Case(
                    f"{label} {field}={value!r:.20}",
                    _send(w, method, path, token, _json({**body, field: value})),
                    method,
                )
        # Out-of-range numbers where a number belongs, unstorable or odd text where text does.
        same_kind = HUGE_NUMBERS if isinstance(body[field], (int, float)) else BAD_TEXT
        for value in same_kind if not isinstance(body[field], (dict, list)) else BAD_TEXT[:2]:
            yield Case(
                f"{label} {field}={value!r:.20}",
                _send(w, method, path, token, _json({**body, field: value})),
                method,
            )
    deep: object = "bottom"
    for _ in range(120):
        deep = {"d": deep}
    for name, raw_body in [
        ("deep nesting", _json({**body, next(iter(body)): deep})),
        ("deep list", b"[" * 5000 + b"]" * 5000),
        ("NUL key", _json({**body, "a\x00": 1})),
        ("surrogate key", _json({**body, "\udc00": 1})),
        ("unknown field", _json({**body, "surprise": 1})),
        ("not an object", b"[1, 2]"),
        ("a string", b'"goal"'),
        ("null", b"null"),
        ("empty body", b""),
        ("truncated JSON", _json(body)[:-3]),
        ("invalid UTF-8", b'{"goal": "\xff\xfe"}'),
        ("NaN", b'{"x": NaN}'),
        ("1e999", b'{"x": 1e999}'),
        ("duplicate keys", b'{"a": 1, "a": 2}'),
        ("BOM", b"\xef\xbb\xbf" + _json(body)),
    ]:
        yield Case(f"{label} {name}", _send(w, method, path, token, raw_body), method)
    for content_type in ["text/plain", "application/x-www-form-urlencoded",
                         "multipart/form-data; boundary=x", "application/json; charset=latin-1",
                         "application/json; charset=bogus", ""]:  # fmt: skip
        yield Case(
            f"{label} content type {content_type!r}",
            _send(w, method, path, token, _json(body), content_type=content_type),
            method,
        )
    yield Case(f"{label} chunked", _send(w, method, path, token, _json(body), chunk=True), method)
    yield Case(
        f"{label} chunked bad JSON", _send(w, method, path, token, b'{"goal": ', chunk=True), method
    )
    oversized = _json({**body, "padding": "x" * (2 * LIMIT)})
    yield Case(f"{label} oversized", _send(w, method, path, token, oversized), method)
    yield Case(
        f"{label} oversized chunked", _send(w, method, path, token, oversized, chunk=True), method
    )
    malformed = _send(w, method, path, token, None, headers={"Transfer-Encoding": "chunked"})
    yield Case(f"{label} malformed chunks", malformed + b"zz\r\n{}\r\n0\r\n\r\n", method)


TOKENS = [
    ("no token", None), ("empty bearer", "Bearer"), ("wrong token", "Bearer lw_nonsense"),
    ("basic", "Basic YTpi"), ("long token", "Bearer " + "t" * 6000),
    ("latin-1 token", "Bearer caf\xe9"), ("two spaces", "Bearer  x y"),
]  # fmt: skip
BAD_IDS = [
    "not-a-uuid", "00000000-0000-0000-0000-000000000000", "%00", "%ff%fe", "%ed%a0%80",
    "..%2f..%2fetc", "x" * 3000, "%E2%80%AE", "1%20OR%201=1", "-1", "99999999999999999999",
]  # fmt: skip
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "BREW"]


def _endpoint_cases(w: World, method: str, path: str, token: str, body: dict | None):
    label = f"{method} {path.replace(w.task, '{id}')}"
    payload = _json(body) if body is not None else None

    def case(name: str, raw: bytes, sent: str = method) -> Case:
        return Case(f"{label} {name}", raw, sent)

    if body is not None:
        yield from _body_cases(w, method, path, token, body)
    for wrong in METHODS:
        if wrong != method:
            yield case(f"as {wrong}", _send(w, wrong, path, token, payload), wrong)
    for name, auth in TOKENS:
        headers = {"Authorization": auth} if auth else {}
        yield case(name, _send(w, method, path, None, payload, headers=headers))
    yield case("bad Host", _send(w, method, path, token, payload, host="evil.example"))
    for query in ["state=%00&cursor=%ff", "cursor=bm9wZQ&limit=-1&agent=%C3%A9", "a=%ud800"]:
        yield case(f"query {query}", _send(w, method, f"{path}?{query}", token, payload))
    named = (w.task, str(w.model_call), str(w.tool_call), str(w.operation), "hostile-other",
             "hostile-p", "default")  # fmt: skip
    for part in [p for p in named if f"/{p}" in f"/{path}"]:
        for bad in BAD_IDS:
            target = path.replace(part, bad, 1)
            yield case(f"id {bad:.20}", _send(w, method, target, token, payload))


def _raw(w: World, line: bytes, *headers: bytes, body: bytes = b"") -> bytes:
    """A request as bytes: `line`, the Host header, `headers`, then `body`."""
    head = [line, b"Host: " + w.host.encode(), *headers]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _protocol_cases(w: World) -> list[Case]:
    """What gunicorn refuses before the application runs, and other oddities of the protocol."""
    get = b"GET /api/v1/tasks HTTP/1.1"
    post = b"POST /api/v1/tasks HTTP/1.1"
    many = [b"X-%d: v" % n for n in range(150)]
    return [
        Case("path over 4 KB", _raw(w, b"GET /api/v1/" + b"a" * 5000 + b" HTTP/1.1")),
        Case("header over 8 KB", _raw(w, get, b"X: " + b"y" * 9000)),
        Case("150 headers", _raw(w, get, *many)),
        Case("NUL in path", _raw(w, b"GET /api/v1/ta\x00sks HTTP/1.1")),
        Case("byte 0xff in path", _raw(w, b"GET /api/v1/ta\xffsks HTTP/1.1")),
        Case("space in path", _raw(w, b"GET /api/v1/ta sks HTTP/1.1")),
        Case("NUL in a header", _raw(w, get, b"X-A: \x00")),
        Case("negative Content-Length", _raw(w, post, b"Content-Length: -1", body=b"{}")),
        Case("two Content-Lengths",
             _raw(w, post, b"Content-Length: 2", b"Content-Length: 3", body=b"{}")),
        Case("Content-Length and chunked",
             _raw(w, post, b"Content-Length: 2", b"Transfer-Encoding: chunked",
                  body=b"2\r\n{}\r\n0\r\n\r\n")),
        Case("gzip transfer coding",
             _raw(w, post, b"Transfer-Encoding: gzip, chunked", body=b"0\r\n\r\n")),
        Case("bare LF", b"GET /api/v1/tasks HTTP/1.1\nHost: " + w.host.encode() + b"\n\n"),
        Case("HTTP/2.0 version", _raw(w, b"GET /api/v1/tasks HTTP/2.0")),
        Case("lowercase method", _raw(w, b"get /api/v1/tasks HTTP/1.1")),
        Case("folded header", _raw(w, get, b"X-A: a", b" b")),
        Case("no Host", b"GET /api/v1/tasks HTTP/1.1\r\n\r\n"),
        Case("two Hosts", _raw(w, get, b"Host: evil.example")),
        Case("Host with NUL", b"GET /api/v1/tasks HTTP/1.1\r\nHost: a\x00b\r\n\r\n"),
        Case("Expect: 100-continue",
             _raw(w, post, b"Expect: 100-continue", b"Content-Length: 2", body=b"{}")),
        Case("Expect: teapot", _raw(w, post, b"Expect: teapot", b"Content-Length: 2", body=b"{}")),
        Case("declared longer than sent", _raw(w, post, b"Content-Length: 3", body=b"{}")),
        Case("unknown API version", _send(w, "GET", "/api/v2/tasks", w.agent)),
        Case("API root", _send(w, "GET", "/api/", w.agent)),
        Case("API without slash", _send(w, "GET", "/api", w.agent)),
        Case("dot segments", _send(w, "GET", "/api/v1/../../etc/passwd", w.agent)),
        Case("encoded slash", _send(w, "GET", "/api/v1/tasks%2f..%2f", w.agent)),
        Case("absolute form", _send(w, "GET", f"http://{w.host}/api/v1/tasks", w.agent)),
        Case("asterisk form", _send(w, "OPTIONS", "*", w.agent), "OPTIONS"),
    ]  # fmt: skip


def _cases(w: World) -> list[Case]:
    cases = [c for endpoint in _endpoints(w) for c in _endpoint_cases(w, *endpoint)]
    return cases + _protocol_cases(w)


@pytest.fixture(scope="module")
def gunicorn(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    # Persistent connections, as deployed: a fresh one per request doubles the run on
    # PostgreSQL. A small body limit keeps the oversized bodies small.
    env = {"LOOPWARDEN_MAX_BODY_BYTES": str(LIMIT), "DB_CONN_MAX_AGE": "60",
           "API_THROTTLE_RATE": "off", "CLIENT_TIMEOUT_SECONDS": "2"}  # fmt: skip
    with gunicorn_server(database_url=url, workers=1, threads=4, env=env) as server:
        yield server


def _offence(case: Case, answer: Answer) -> str | None:
    if answer.status >= 500:
        return "a 5xx"
    if answer.status < 400:
        return None
    if case.method == "HEAD":
        return None if "application/json" in answer.headers.get("content-type", "") else "HTML"
    return None if answer.envelope is not None else "not the envelope"


def _offences(url: str, cases: list[Case]) -> list[str]:
    """Each case sent on its own connection, one after the other; what each did wrong."""
    offences = []
    for case in cases:
        try:
            answer = exchange(url, case.raw, timeout=15, linger=0)
        except (ConnectionError, OSError) as exc:
            offences.append(f"{case.name}: no answer ({exc})")
            continue
        offence = _offence(case, answer)
        if offence:
            offences.append(f"{case.name}: {offence}: {answer.describe()[:200]}")
    return offences


def test_every_hostile_request_is_answered_by_the_envelope_or_a_success(
    gunicorn, make_agent, make_user
):
    world = _world(gunicorn.url, make_agent, make_user)
    cases = _cases(world)
    assert len(cases) >= 150

    offences = _offences(gunicorn.url, cases)

    log = gunicorn.log_path.read_text(errors="replace")
    assert not offences, f"{len(offences)} of {len(cases)}:\n" + "\n".join(offences)
    assert "Traceback" not in log, gunicorn.log_tail(80)


def test_the_embedded_server_answers_the_envelope_or_a_success(live_server, make_agent, make_user):
    """The same requests to Django's own server (pytest-django's `live_server`), but for what
    its HTTP parser refuses before Django runs (the protocol's own cases): a chunked body is
    refused 411 there, and everything else answered as under gunicorn."""
    world = _world(live_server.url, make_agent, make_user)
    cases = [c for endpoint in _endpoints(world) for c in _endpoint_cases(world, *endpoint)]

    offences = _offences(live_server.url, cases)

    assert not offences, f"{len(offences)} of {len(cases)}:\n" + "\n".join(offences)
