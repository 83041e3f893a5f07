"""Text the database cannot hold (NUL, lone surrogates): one rule, applied at the API boundary.

Agent input carrying it is refused with a 400 `UNSUPPORTED_TEXT` naming the field, and changes
nothing. A report of what already happened (a tool result, a model call's usage) is never refused
for it: it is stored in an encoded form and served back exactly as it was sent, so a committed
write always reaches the ledger and spent money is always recorded.

PostgreSQL is where this bites (jsonb refuses `\\u0000` and lone surrogate escapes, text columns
refuse NUL); the same tests run on SQLite.
"""

from __future__ import annotations

import json

import pytest

from agents.db import storable
from agents.models import LimitProfile, ModelCall, SeenHash, ToolCall
from ledger.models import Operation

from .helpers import evidence, gate, new_task, request_tool, row_counts

pytestmark = pytest.mark.django_db

NUL = "a\x00b"
SURROGATE = "a\ud800b"
UNSTORABLE = [pytest.param(NUL, id="NUL"), pytest.param(SURROGATE, id="lone surrogate")]


def post_raw(api, path: str, body) -> object:
    """Send `body` as JSON text written with \\u escapes, the way a client would send it."""
    return api.post(path, raw=json.dumps(body, ensure_ascii=True))


def answer_of(response) -> dict:
    """The JSON answer, parsed the way a client parses it (lone surrogates stay lone)."""
    return json.loads(response.content.decode("utf-8"))


def assert_unsupported_text(response, field: str) -> dict:
    assert response.status_code == 400, response.content[:500]
    error = answer_of(response)["error"]
    assert error["code"] == "UNSUPPORTED_TEXT", error
    assert field in error["fields"], error
    assert field in error["message"], error
    return error


# --- agent input is refused ------------------------------------------------------------------


@pytest.mark.parametrize("text", UNSTORABLE)
def test_it_refuses_unstorable_text_in_tool_args_and_records_nothing(agent_api, text):
    task = new_task(agent_api)
    before = row_counts()

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/tool-calls",
        {"tool": "search", "args": {"query": {"words": ["ok", text]}}, "effect": "read"},
    )

    assert_unsupported_text(response, "args.query.words[1]")
    assert row_counts() == before


@pytest.mark.parametrize("text", UNSTORABLE)
def test_it_refuses_unstorable_text_in_a_key(agent_api, text):
    task = new_task(agent_api)

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/tool-calls",
        {"tool": "search", "args": {text: 1}, "effect": "read"},
    )

    error = assert_unsupported_text(response, "args")
    assert "key" in error["message"]


@pytest.mark.parametrize("text", UNSTORABLE)
@pytest.mark.parametrize(
    "path, body, field",
    [
        ("tasks", lambda t: {"goal": t}, "goal"),
        ("tasks", lambda t: {"goal": "x", "external_ref": t}, "external_ref"),
        ("tasks", lambda t: {"goal": "x", "trigger_key": t}, "trigger_key"),
        ("{task}/model-calls", lambda t: {"model": t}, "model"),
        ("{task}/tool-calls", lambda t: {"tool": t, "args": {}, "effect": "read"}, "tool"),
        (
            "{task}/tool-calls",
            lambda t: {"tool": "pay", "args": {}, "effect": "write", "operation_key": t},
            "operation_key",
        ),
        ("{task}/finish", lambda t: {"answer": t}, "answer"),
        (
            "{task}/finish",
            lambda t: {"evidence": {"revision": 1, "milestone": t}},
            "evidence.milestone",
        ),
        ("{task}/stop", lambda t: {"reason": t}, "reason"),
    ],
)
def test_every_agent_input_refuses_it_the_same_way(agent_api, text, path, body, field):
    task = new_task(agent_api)
    before = row_counts()
    url = path.replace("{task}", f"tasks/{task['id']}")

    response = post_raw(agent_api, url, body(text))

    assert_unsupported_text(response, field)
    assert row_counts() == before


def test_operator_input_is_refused_too(agent_api, operator_api, admin_api):
    task = new_task(agent_api)

    assert_unsupported_text(
        post_raw(operator_api, f"tasks/{task['id']}/stop", {"reason": NUL}), "reason"
    )
    assert_unsupported_text(post_raw(admin_api, "agents/agent-a/pause", {"reason": NUL}), "reason")
    assert_unsupported_text(
        post_raw(admin_api, "profiles", {"name": "p1", "description": SURROGATE}), "description"
    )


# --- a write's result is recorded, encoded, and served back exactly --------------------------


def _committed_write(agent_api, task_id: str, data, **extra) -> dict:
    asked = request_tool(
        agent_api, task_id, "pay", {"invoice": 42}, "write", operation_key="pay-42"
    )
    assert asked["decision"] == "EXECUTE"
    response = post_raw(
        agent_api,
        f"tasks/{task_id}/tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "data": data,
         "evidence": {"revision": 1, "done": False, "committed": True, **extra}},
    )  # fmt: skip
    assert response.status_code == 200, response.content[:500]
    return answer_of(response)


@pytest.mark.parametrize("text", UNSTORABLE)
def test_a_committed_write_with_unstorable_data_reaches_the_ledger(
    agent_api, patient_profile, text
):
    task = new_task(agent_api, profile="patient")
    data = {"x": text, text: [text, {"deeper": text}], "plain": "stays plain"}

    answered = _committed_write(agent_api, task["id"], data)

    assert answered["decision"] == "CONTINUE"
    operation = Operation.objects.get(operation_key="pay-42")
    assert operation.state == "COMMITTED"
    again = request_tool(agent_api, task["id"], "pay", {"invoice": 42}, "write",
                         operation_key="pay-42")  # fmt: skip
    assert again["decision"] == "REUSE"
    assert again["result"] == data


@pytest.mark.parametrize("text", UNSTORABLE)
def test_an_unstorable_milestone_is_recorded_and_reported_as_sent(agent_api, text):
    task = new_task(agent_api)

    _committed_write(agent_api, task["id"], {"ok": True}, milestone=text)

    asked = request_tool(agent_api, task["id"], "search", {"q": "next"})
    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "evidence": evidence(2, done=True)},
    )
    assert response.status_code == 200
    body = answer_of(agent_api.get(f"tasks/{task['id']}"))
    assert body["state"] == "COMPLETED"
    assert body["report"]["completed"] == [text]


@pytest.mark.parametrize("text", UNSTORABLE)
def test_a_failed_tool_with_unstorable_error_and_code_is_recorded(agent_api, text):
    task = new_task(agent_api)
    asked = request_tool(agent_api, task["id"], "search", {"q": "x"})

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "FATAL", "code": text, "error": f"boom {text}", "data": [text],
         "job_id": text, "data_hash": text},
    )  # fmt: skip

    assert response.status_code == 200, response.content[:500]
    assert answer_of(response)["state"] == "FAILED"
    call = ToolCall.objects.get(pk=asked["tool_call"])
    assert call.reported_at is not None
    assert call.result_kind == "FATAL"
    assert storable.decode(call.result_code) == text
    assert storable.decode(call.result_error) == f"boom {text}"
    assert storable.decode(call.result_data) == [text]


def test_text_that_looks_encoded_round_trips_unchanged(agent_api, patient_profile):
    """The encoding's own prefix, sent as plain text, is not mistaken for an encoding."""
    tricky = storable.ENCODED_PREFIX + "a\\u0000b"
    task = new_task(agent_api, goal=tricky, profile="patient")
    assert task["goal"] == tricky

    data = {"x": tricky, tricky: tricky, "nul": NUL}
    _committed_write(agent_api, task["id"], data)
    again = request_tool(agent_api, task["id"], "pay", {"invoice": 42}, "write",
                         operation_key="pay-42")  # fmt: skip
    assert again["result"] == data

    asked = request_tool(agent_api, task["id"], "search", {"q": tricky})
    assert asked["decision"] == "EXECUTE"
    assert storable.decode(ToolCall.objects.get(pk=asked["tool_call"]).args) == {"q": tricky}


# --- a usage report is recorded: the money was spent -----------------------------------------


@pytest.mark.parametrize("text", UNSTORABLE)
def test_a_usage_report_with_unstorable_tool_call_args_is_recorded(agent_api, price, text):
    task = new_task(agent_api)
    call = gate(agent_api, task["id"], model="gpt-x", est_prompt_tokens=100, max_output_tokens=100)[
        "model_call"
    ]
    asked = [{"name": "search", "args": {"q": text}}]

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/model-calls/{call}/usage",
        {"prompt_tokens": 100, "completion_tokens": 100, "tool_calls": asked,
         "output_text": f"I will search {text}"},
    )  # fmt: skip

    assert response.status_code == 200, response.content[:500]
    row = ModelCall.objects.get(pk=call)
    assert row.settled_at is not None
    assert str(row.cost) == "0.300000"
    assert row.signature
    assert storable.decode(row.tool_calls) == asked


def test_three_identical_unstorable_plans_still_trip_repeated_output(agent_api, price):
    """The signature is taken over the encoded args: equal plans stay equal."""
    task = new_task(agent_api)
    plan = [{"name": "search", "args": {"q": NUL}}]
    answers = []
    for _ in range(3):
        call = gate(
            agent_api, task["id"], model="gpt-x", est_prompt_tokens=100, max_output_tokens=100
        )["model_call"]
        response = post_raw(
            agent_api,
            f"tasks/{task['id']}/model-calls/{call}/usage",
            {"prompt_tokens": 10, "completion_tokens": 10, "tool_calls": plan},
        )
        answers.append(answer_of(response))

    assert answers[-1]["decision"] == "STOP", answers
    assert answers[-1]["reason"] == "repeated_output"


# --- query strings and paths -----------------------------------------------------------------


def test_a_nul_in_a_query_string_answers_the_envelope(agent_api, operator_api):
    for api, path in [
        (agent_api, "tasks?agent=%00"),
        (operator_api, "tasks?agent=a%00b"),
        (operator_api, "tasks?state=%00"),
        (operator_api, "operations?state=RUNNING%00"),
    ]:
        response = api.get(path)
        assert response.status_code == 400, (path, response.content[:300])
        assert response.body["error"]["code"] == "UNSUPPORTED_TEXT"


def test_a_nul_in_a_path_answers_the_envelope(agent_api, operator_api, admin_api):
    for api, method, path in [
        (admin_api, "get", "profiles/a%00b"),
        (admin_api, "patch", "profiles/a%00b"),
        (admin_api, "delete", "profiles/a%00b"),
        (operator_api, "post", "agents/a%00b/pause"),
        (operator_api, "post", "agents/a%00b/unpause"),
        (agent_api, "get", "tasks/a%00b"),
    ]:
        response = getattr(api, method)(path)
        assert response.status_code in (400, 404), (path, response.content[:300])
        assert response.body["error"]["code"] in ("UNSUPPORTED_TEXT", "NOT_FOUND"), path


def test_the_console_report_filters_answer_400_not_500(client, make_user):
    client.force_login(make_user("olivia")[0])

    for path in ["/reports/daily/?agent=%00", "/reports/daily.csv?agent=a%00b", "/?agent=%00"]:
        response = client.get(path)
        assert response.status_code == 400, (path, response.status_code)


# --- a report's length limits count the text as sent, not its stored encoding ---------------
# (each NUL or surrogate takes six characters encoded, and the tag four more)


@pytest.mark.parametrize("char", ["\x00", "\ud800"], ids=["NUL", "lone surrogate"])
def test_a_write_result_whose_code_fits_as_sent_reaches_the_ledger(agent_api, patient_profile,
                                                                  char):  # fmt: skip
    task = new_task(agent_api, profile="patient")
    code = ("E" + char) * 50  # 100 characters: the limit, as sent
    asked = request_tool(agent_api, task["id"], "pay", {"invoice": 7}, "write",
                         operation_key="pay-7")  # fmt: skip

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "code": code, "data_hash": char * 128, "job_id": char * 200,
         "data": {"paid": True}, "evidence": evidence(1, committed=True)},
    )  # fmt: skip

    assert response.status_code == 200, response.content[:500]
    assert Operation.objects.get(operation_key="pay-7").state == "COMMITTED"
    stored = ToolCall.objects.get(pk=asked["tool_call"]).result_code
    assert len(stored) <= 100  # the column's size
    assert code.startswith(storable.decode(stored))  # as much of it as the column holds


def test_a_code_over_the_limit_as_sent_is_still_refused(agent_api):
    task = new_task(agent_api)
    asked = request_tool(agent_api, task["id"], "search", {"q": "x"})

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "FATAL", "code": "E\x00" * 50 + "E"},
    )

    assert response.status_code == 400
    assert "code" in answer_of(response)["error"]["fields"]


def test_a_novelty_result_whose_data_hash_fits_as_sent_is_recorded(agent_api, agent):
    profile, _ = LimitProfile.objects.update_or_create(
        name="novelty", defaults={"progress_mode": "novelty"}
    )
    agent[1].allowed_profiles.add(profile)
    task = new_task(agent_api, profile="novelty")
    asked = request_tool(agent_api, task["id"], "search", {"q": "x"})

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "data_hash": "h\x00" * 64},
    )

    assert response.status_code == 200, response.content[:500]
    assert ToolCall.objects.get(pk=asked["tool_call"]).reported_at is not None
    (seen,) = SeenHash.objects.filter(task_id=task["id"]).values_list("hash", flat=True)
    assert len(seen) <= 128  # the column's size


def test_a_usage_report_whose_tool_names_fit_as_sent_is_recorded(agent_api, price):
    task = new_task(agent_api)
    call = gate(agent_api, task["id"], model="gpt-x", est_prompt_tokens=10, max_output_tokens=10)[
        "model_call"
    ]
    asked = [{"name": "n\x00" * 100, "args": {}}]  # 200 characters: the limit, as sent

    response = post_raw(
        agent_api,
        f"tasks/{task['id']}/model-calls/{call}/usage",
        {"prompt_tokens": 10, "completion_tokens": 10, "tool_calls": asked},
    )

    assert response.status_code == 200, response.content[:500]
    row = ModelCall.objects.get(pk=call)
    assert row.settled_at is not None
    assert storable.decode(row.tool_calls) == asked
