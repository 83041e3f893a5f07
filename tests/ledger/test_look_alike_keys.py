"""Two operation keys that look the same are the same key: keys are compared after Unicode NFC,
and a key holding a character that shows nothing (a control, zero-width or bidirectional-format
character) is refused with a 400, so no look-alike of a committed key executes again."""

from __future__ import annotations

import unicodedata

import pytest

from ledger.models import Operation
from tests.api.helpers import evidence, execute, get_task, new_task, request_tool, row_counts

pytestmark = pytest.mark.django_db

KEY = unicodedata.normalize("NFC", "pay-café-1")
PAYMENT = {"invoice": "café-1", "amount": "12.00"}
COMMITTED = {"kind": "SUCCESS", "data": {"paid": True}, "evidence": evidence(1, committed=True)}


def pay(api, task_id: str, key: str) -> dict:
    return api.post(
        f"tasks/{task_id}/tool-calls",
        {"tool": "pay", "args": PAYMENT, "effect": "write", "operation_key": key},
    )


@pytest.fixture
def paid(agent_api):
    """The payment under its NFC key, committed in a task of its own."""
    task = new_task(agent_api)["id"]
    execute(agent_api, task, "pay", PAYMENT, "write", operation_key=KEY, result=COMMITTED)
    return task


def test_the_nfd_spelling_of_a_committed_key_is_that_key(agent_api, paid):
    nfd = unicodedata.normalize("NFD", KEY)
    assert nfd != KEY

    answer = pay(agent_api, new_task(agent_api)["id"], nfd)

    assert answer.status_code == 200, answer.body
    assert answer.body["decision"] == "REUSE"
    assert answer.body["result"] == {"paid": True}
    assert list(Operation.objects.values_list("operation_key", flat=True)) == [KEY]


def test_a_key_is_stored_as_its_nfc_form(agent_api):
    task = new_task(agent_api)["id"]

    asked = request_tool(
        agent_api, task, "pay", PAYMENT, "write", operation_key=unicodedata.normalize("NFD", KEY)
    )

    assert asked["decision"] == "EXECUTE"
    assert Operation.objects.get().operation_key == KEY


@pytest.mark.parametrize(
    "look_alike",
    [
        "pay-caf\u200be-1",  # zero-width space
        "pay-café\u200d-1",  # zero-width joiner
        "pay-café\u200c-1",  # zero-width non-joiner
        "\u2060pay-café-1",  # word joiner
        "pay-café-1\ufeff",  # zero-width no-break space (byte order mark)
        "pay-caf\u00ade-1",  # soft hyphen
        "\u202epay-café-1",  # right-to-left override
        "pay-café-1\u202c",  # pop directional formatting
        "\u2066pay-café-1\u2069",  # left-to-right isolate ... pop directional isolate
        "pay-café\u200e-1",  # left-to-right mark
        "pay-café\u061c-1",  # Arabic letter mark
        "pay-café-1\x01",  # a control character
        "pay-café-1\t",
        "pay-café-1\n",
        "pay-café-1\x85",  # next line (C1 control)
        "pay-café-1\u2028",  # line separator
        "pay-café\ufe0f-1",  # variation selector
        "pay-café-1\U000e0041",  # tag latin capital letter A
        "pay-café-1\u3164",  # Hangul filler
    ],
)
def test_a_key_with_an_invisible_character_is_refused(agent_api, paid, look_alike):
    task = new_task(agent_api)["id"]
    before_counts, before_task = row_counts(), get_task(agent_api, task)

    answer = pay(agent_api, task, look_alike)

    assert answer.status_code == 400, answer.body
    error = answer.body["error"]
    assert error["code"] == "OPERATION_KEY_INVALID"
    assert set(error["fields"]) == {"operation_key"}
    assert (row_counts(), get_task(agent_api, task)) == (before_counts, before_task)


def test_a_key_too_long_once_composed_is_refused_not_a_database_error(agent_api):
    """NFC may lengthen a text (U+0958 composes to two characters): the column's bound is the
    key's once normalized."""
    task = new_task(agent_api)["id"]
    grows = "\u0958" * 300
    assert len(unicodedata.normalize("NFC", grows)) == 600

    answer = pay(agent_api, task, grows)

    assert answer.status_code == 400, answer.body
    assert set(answer.body["error"]["fields"]) == {"operation_key"}


def test_keys_of_other_scripts_and_visible_symbols_are_taken(agent_api):
    task = new_task(agent_api)["id"]

    for key in ("zahlung-größe-1", "支払い-1", "платёж 1", "pay-€-1", "دفع-١"):
        asked = request_tool(agent_api, task, "pay", {"key": key}, "write", operation_key=key)
        assert asked["decision"] == "EXECUTE", key
