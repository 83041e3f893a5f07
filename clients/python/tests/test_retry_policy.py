"""The retry policy on its own: what is sent again, after how long, how many times."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from loopwarden_client import Client
from loopwarden_client._core import REQUESTS
from loopwarden_client._retry import RetryPolicy, retry_after_seconds


def refused(status: int, code: str, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(status, json={"error": {"code": code, "message": "no"}}, headers=headers)


DECISION = REQUESTS.gate_model_call("t", model="m", est_prompt_tokens=1, max_output_tokens=1)
PLAIN = REQUESTS.get_task("t")


@pytest.mark.parametrize(
    ("status", "code"),
    [(429, "THROTTLED"), (503, "DATABASE_UNAVAILABLE"), (409, "OPERATION_CONTENDED")],
)
def test_a_refusal_made_before_anything_was_decided_is_sent_again_after_its_retry_after(
    status, code
):
    assert RetryPolicy().after_refusal(refused(status, code, "3"), tries=1) == 3.0


@pytest.mark.parametrize(
    ("status", "code"),
    [(429, "TRIGGER_LOOP"), (503, "HTTP_503"), (409, "IDEMPOTENCY_CONFLICT"), (400, "THROTTLED")],
)
def test_any_other_refusal_is_an_answer(status, code):
    assert RetryPolicy().after_refusal(refused(status, code, "1"), tries=1) is None


def test_a_success_is_an_answer():
    assert RetryPolicy().after_refusal(httpx.Response(200, json={}), tries=1) is None


def test_without_retry_after_it_waits_the_default():
    assert RetryPolicy(default_wait_seconds=1.5).after_refusal(refused(429, "THROTTLED"), 1) == 1.5


def test_a_retry_after_past_the_longest_throttle_is_raised_not_slept():
    policy = RetryPolicy(max_throttle_seconds=60.0)
    assert policy.after_refusal(refused(429, "THROTTLED", "60"), 1) == 60.0
    assert policy.after_refusal(refused(429, "THROTTLED", "61"), 1) is None


def test_it_stops_at_max_tries_sends():
    policy = RetryPolicy(max_tries=3)
    assert policy.after_refusal(refused(429, "THROTTLED", "1"), tries=2) == 1.0
    assert policy.after_refusal(refused(429, "THROTTLED", "1"), tries=3) is None
    assert policy.after_lost(httpx.ConnectError("down"), PLAIN, tries=3) is None


def test_a_connection_never_made_is_sent_again_doubling_whatever_the_request():
    policy = RetryPolicy(max_tries=5, first_reconnect_seconds=0.5)
    waits = [policy.after_lost(httpx.ConnectTimeout("t"), PLAIN, tries) for tries in (1, 2, 3, 4)]
    assert waits == [0.5, 1.0, 2.0, 4.0]


def test_a_lost_answer_is_sent_again_only_for_a_decision():
    policy = RetryPolicy()
    lost = httpx.ReadTimeout("answer lost")
    assert policy.after_lost(lost, DECISION, tries=1) == 0.5
    assert policy.after_lost(lost, PLAIN, tries=1) is None


def test_a_decision_gets_one_request_id_and_keeps_one_it_has():
    policy = RetryPolicy()
    sent = policy.identified(DECISION)
    assert len(sent.body["request_id"]) == 32
    assert policy.identified(sent) is sent
    assert policy.identified(DECISION).body["request_id"] != sent.body["request_id"]
    assert policy.identified(PLAIN) is PLAIN


def test_a_wait_doubles_from_the_servers_least_up_to_the_longest_then_gives_up():
    policy = RetryPolicy(max_wait_seconds=15.0, default_wait_seconds=1.0)
    waits = [policy.before_asking_again(None, tries, max_tries=7) for tries in range(1, 8)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 15.0, 15.0, None]
    assert policy.before_asking_again(20_000, 3, max_tries=7) == 20.0  # never under the least


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("-4") == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
    later = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after_seconds(later) <= 30


def test_the_client_asks_its_policy():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return refused(503, "DATABASE_UNAVAILABLE", "7")

    slept: list[float] = []
    client = Client("http://lw/api/v1/", "tok", transport=httpx.MockTransport(handler),
                    sleep=slept.append, max_throttle_tries=2)  # fmt: skip
    assert client.retry == RetryPolicy(max_tries=2) and client.max_throttle_tries == 2
    with pytest.raises(Exception, match="DATABASE_UNAVAILABLE"):
        client.get_task("t")
    assert slept == [7.0] and len(seen) == 2
