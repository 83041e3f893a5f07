"""Agents run in worker processes (a process pool, a job queue): a refusal raised there is
pickled back to the caller, and must arrive as the same `LoopwardenError`, status, code and
fields, as a `TaskStopped` does."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest
from loopwarden_client import Client, LoopwardenError


def fetch_missing_task(api: str, token: str) -> None:
    with Client(api, token) as client:
        client.get_task("0192d9d2-0000-7000-8000-000000000000")


def test_a_refusal_raised_in_a_worker_process_reaches_the_caller_whole(live):
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool, pytest.raises(LoopwardenError) as caught:
        pool.submit(fetch_missing_task, live.api, live.agent_token).result(timeout=60)
    assert (caught.value.status, caught.value.code) == (404, "TASK_NOT_FOUND")
    assert str(caught.value).startswith("404 TASK_NOT_FOUND: ")
