"""The `embedding` similarity provider, against a local server speaking the embeddings API.

The server answers POST /v1/embeddings in OpenAI's wire format; nothing in the product is
patched. Texts about refunds embed to one direction, anything else to another, so the
embedding provider sees rephrasings the lexical one cannot ("how do refunds work").
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.cache import cache

from agents.models import ToolPolicy

from .helpers import execute, new_task, request_tool

pytestmark = pytest.mark.django_db

REPHRASINGS = ["refund policy", "how do refunds work", "can I get my money back"]


class EmbeddingsServer:
    """A tiny OpenAI-compatible embeddings endpoint on 127.0.0.1 (mode: ok, slow, error, nan,
    trickle).

    `slow` answers nothing and `trickle` sends its answer a byte at a time, each for far longer
    than any timeout a test sets (until `close`): a client that waited them out would get the
    vectors and decide otherwise, so no test depends on how busy the machine is.
    """

    NEVER_SECONDS = 60

    def __init__(self):
        self.mode = "ok"
        self.requests: list[dict] = []
        self.released = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                )
                if server.mode == "slow":
                    server.released.wait(server.NEVER_SECONDS)
                if server.mode == "error":
                    self.send_response(503)
                    self.end_headers()
                    return
                data = [
                    {"object": "embedding", "index": i, "embedding": server.vector(text)}
                    for i, text in enumerate(body["input"])
                ]
                if server.mode == "nan":  # a broken model: Python's json reads NaN back
                    for row in data:
                        row["embedding"] = [float("nan")] * 3
                payload = json.dumps(
                    {"object": "list", "data": data, "model": body["model"],
                     "usage": {"prompt_tokens": 1, "total_tokens": 1}}
                ).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (timeout)
                    if server.mode == "trickle":  # each byte well within the timeout
                        # Padded (JSON allows trailing spaces) to last NEVER_SECONDS.
                        padded = payload.ljust(server.NEVER_SECONDS * 100)
                        for i in range(len(padded)):
                            if server.released.wait(0.01):
                                return
                            self.wfile.write(padded[i : i + 1])
                            self.wfile.flush()
                        return
                    self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @staticmethod
    def vector(text: str) -> list[float]:
        lowered = text.lower()
        if "refund" in lowered or "money back" in lowered:
            return [0.99, 0.1, 0.0]
        return [0.0, 0.2, 0.98]

    def close(self):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint(settings):
    cache.clear()
    server = EmbeddingsServer()
    settings.EMBEDDINGS_URL = server.url
    settings.EMBEDDINGS_MODEL = "test-embed"
    settings.EMBEDDINGS_KEY = "sk-test"
    # Generous: an answer the server gives at once is never late, however busy the machine.
    settings.EMBEDDINGS_TIMEOUT_MS = 20_000
    ToolPolicy.objects.create(
        tool="search", near_duplicate_threshold=0.9, similarity_provider="embedding"
    )
    yield server
    server.close()
    cache.clear()


def rephrase(api, task_id):
    for q in REPHRASINGS[:2]:
        execute(api, task_id, "search", {"q": q})
    return request_tool(api, task_id, "search", {"q": REPHRASINGS[2]})


def test_the_embedding_provider_catches_rephrasings_lexical_similarity_misses(agent_api, endpoint):
    task = new_task(agent_api)

    answer = rephrase(agent_api, task["id"])

    assert answer["decision"] == "BLOCK"
    assert answer["reason"] == "near_duplicate"
    first = endpoint.requests[0]
    assert first["path"] == "/v1/embeddings"
    assert first["auth"] == "Bearer sk-test"
    assert first["model"] == "test-embed"


def test_vectors_are_cached_by_fingerprint_so_only_new_calls_are_embedded(agent_api, endpoint):
    task = new_task(agent_api)

    rephrase(agent_api, task["id"])

    inputs = [text for req in endpoint.requests for text in req["input"]]
    assert len(inputs) == len(set(inputs)) == 3


@pytest.mark.parametrize("mode", ["slow", "error", "trickle"])
def test_a_slow_or_failing_endpoint_falls_back_to_lexical_and_is_logged(
    agent_api, endpoint, mode, caplog, settings
):
    settings.EMBEDDINGS_TIMEOUT_MS = 300
    endpoint.mode = mode
    task = new_task(agent_api)

    answer = rephrase(agent_api, task["id"])

    # Lexically the three rephrasings are far apart: the call executes. Had the client waited
    # for the slow or trickling answer, the vectors would have blocked it as a near duplicate.
    assert answer["decision"] == "EXECUTE"
    assert "falls back to lexical" in caplog.text


def test_lexical_policies_never_call_the_endpoint(agent_api, endpoint):
    # Through save(), as the admin does: policies are cached per process and a change is seen
    # by its post_save signal (a queryset update() sends none).
    policy = ToolPolicy.objects.get(tool="search")
    policy.similarity_provider = "lexical"
    policy.save()
    task = new_task(agent_api)

    answer = rephrase(agent_api, task["id"])

    assert answer["decision"] == "EXECUTE"
    assert endpoint.requests == []


def test_vectors_that_are_not_numbers_are_no_evidence_of_likeness(agent_api, endpoint):
    # NaN cosines compared as 1.0: three unrelated searches were near duplicates.
    endpoint.mode = "nan"
    task = new_task(agent_api)
    for q in ("shipping rates to Canada", "warranty for laptops"):
        execute(agent_api, task["id"], "search", {"q": q})

    answer = request_tool(agent_api, task["id"], "search", {"q": "gift card balance"})

    assert answer["decision"] == "EXECUTE"
