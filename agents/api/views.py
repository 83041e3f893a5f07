"""Runner API: thin views that validate the envelope and call one service each."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import roles, selectors
from agents.api import envelope, pagination
from agents.api import responses as r
from agents.api import serializers as s
from agents.api.auth import TokenCheckedByLock, agent_of
from agents.api.fields import JSON_INT_MAX
from agents.api.permissions import decision_owner, require_agent, require_perm
from agents.errors import BadInput, NotFound
from agents.guard import terms
from agents.models import Task
from agents.services import answers, operator, runner, tasks

_DIGITS = re.compile(r"[0-9]{1,16}")


def _valid(serializer_class, request) -> dict:
    data = request.data
    checked = envelope.validated(serializer_class, data)  # the decision bodies, DRF's rules
    if checked is not None:
        return checked
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def row_id(value: str, *, what: str, code: str) -> int:
    """A path's integer id; anything else names no row (404), never a database error."""
    if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= JSON_INT_MAX:
        raise NotFound(f"No such {what}.", code=code)
    return int(value)


def id_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name, {"type": "integer", "minimum": 1, "maximum": JSON_INT_MAX},
        OpenApiParameter.PATH, description=description,
    )  # fmt: skip


TASK_ID = OpenApiParameter(
    "task_id", {"type": "string", "format": "uuid"}, OpenApiParameter.PATH,
    description="The task's id (a UUID). Another agent's task answers 404.",
)  # fmt: skip


def visible_task(request, task_id) -> Task:
    """An agent sees only its own tasks (others answer 404); users need view_task."""
    agent = agent_of(request)
    if agent is None:
        require_perm(request, roles.VIEW_TASK)
    query = Task.objects.select_related("agent", "profile")
    if agent is not None:
        query = query.filter(agent=agent)
    try:
        return query.get(pk=task_id)
    except (Task.DoesNotExist, ValueError, ValidationError):  # not a UUID: 404
        raise NotFound("No such task.", code="TASK_NOT_FOUND") from None


class TaskList(APIView):
    @extend_schema(
        operation_id="task_list",
        summary="List tasks",
        description="Agents see their own tasks; operators every task (needs view_task). "
        "Newest first, a page at a time: follow `next` until it is null.",
        parameters=[
            OpenApiParameter("state", {"type": "string", "enum": list(terms.TASK_STATES)}),
            OpenApiParameter("agent", {"type": "string"}, description="An agent's name."),
            *pagination.page_parameters(pagination.TIME_AND_UUID),
        ],
        responses=r.answers({200: r.TaskPage}),
    )
    def get(self, request):
        agent = agent_of(request)
        if agent is None:
            require_perm(request, roles.VIEW_TASK)
        state = request.query_params.get("state")
        if state is not None and state not in terms.TASK_STATES:  # `state=` names no state either
            raise BadInput(
                f"Unknown state {state!r}.", code="BAD_STATE", fields={"state": "invalid"}
            )
        agent_name = request.query_params.get("agent", "")
        query = selectors.tasks_for(agent=agent, state=state or "", agent_name=agent_name)
        rows, next_link = pagination.newest_first(request, query)
        masks = selectors.redactor(operator=agent is None)
        return Response({"tasks": [selectors.task_json(t, masks) for t in rows], "next": next_link})

    @extend_schema(
        operation_id="task_create",
        summary="Create a task",
        description="Agent tokens only. The task copies its profile's limits, tightened by "
        "`limits`. 409 AGENT_PAUSED while the agent is paused; 403 PROFILE_NOT_ALLOWED; "
        "429 TRIGGER_LOOP when one trigger_key creates too many tasks.",
        request=s.TaskCreateIn,
        responses=r.answers({201: r.Task}, 409, body=True),
    )
    def post(self, request):
        agent = require_agent(request)
        data = _valid(s.TaskCreateIn, request)
        task = tasks.task_create(agent=agent, **data)
        return Response(selectors.task_json(task), status=status.HTTP_201_CREATED)


class TaskDetail(APIView):
    @extend_schema(
        operation_id="task_get",
        summary="Read a task",
        description="State, limits, usage, remaining budget, verified revision and, once "
        "terminal, the stop report.",
        parameters=[TASK_ID],
        responses=r.answers({200: r.Task}),
    )
    def get(self, request, task_id):
        masks = selectors.redactor(operator=agent_of(request) is None)
        return Response(selectors.task_json(visible_task(request, task_id), masks))


class TaskTrace(APIView):
    @extend_schema(
        operation_id="task_trace",
        summary="Read a task's trace",
        description="Model calls and tool calls in `seq` order, and the task's events in "
        "order. Each page holds up to `limit` calls and up to `limit` events; follow `next` "
        "and concatenate `calls` and `events` until `next` is null.",
        parameters=[TASK_ID, *pagination.page_parameters(pagination.NUMBER_PAIR)],
        responses=r.answers({200: r.TracePage}),
    )
    def get(self, request, task_id):
        task = visible_task(request, task_id)
        masks = selectors.redactor(operator=agent_of(request) is None)
        cursor, limit = pagination.read_page_query(request, pagination.NUMBER_PAIR)
        after_seq, after_event = (int(part) for part in (cursor or "0.0").split("."))
        page = selectors.trace_page(
            task, after_seq=after_seq, after_event=after_event, limit=limit, masks=masks
        )
        link = pagination.next_link(request, page.next_cursor)
        return Response({"task": str(task.pk), "calls": page.calls, "events": page.events,
                         "next": link})  # fmt: skip


class ModelCallGate(TokenCheckedByLock, APIView):
    @extend_schema(
        operation_id="model_call_gate",
        summary="Ask before a paid model call",
        description="Checks, in order: task terminal, agent paused, deadline, model-call "
        "budget, token budget, cost budget, the agent's daily cap. ALLOW reserves the "
        "estimate; report the usage afterwards. Agent tokens only. 409 REQUEST_ID_REUSED: "
        "the request_id was given to another request of the task.",
        parameters=[TASK_ID],
        request=s.ModelCallIn,
        responses=r.answers({200: r.MODEL_CALL_DECISION}, 409, body=True),
    )
    def post(self, request, task_id):
        agent = decision_owner(request)
        data = _valid(s.ModelCallIn, request)
        task, call, outcome = runner.model_call_gate(task_id=task_id, agent=agent, **data)
        return Response(answers.model_call_answer(task, call, outcome))


class ModelCallUsage(TokenCheckedByLock, APIView):
    # The money was spent: the report is recorded even with text the database cannot hold
    # (stored encoded, see agents.db.storable), never refused for it.
    records_reports = True

    @extend_schema(
        operation_id="model_call_usage",
        summary="Report a model call's usage",
        description="Settles the reservation with the actual cost and records the tool calls "
        "the model asked for. Always recorded, even after the task stopped: the money was "
        "spent. 409 USAGE_ALREADY_REPORTED on a second report.",
        parameters=[TASK_ID, id_parameter("model_call_id", "The `model_call` of the ALLOW.")],
        request=s.UsageIn,
        responses=r.answers({200: r.USAGE_DECISION}, 409, body=True),
    )
    def post(self, request, task_id, model_call_id):
        agent = decision_owner(request)
        call_id = row_id(model_call_id, what="model call", code="MODEL_CALL_NOT_FOUND")
        data = _valid(s.UsageIn, request)
        task, outcome = runner.model_call_usage(
            task_id=task_id, agent=agent, model_call_id=call_id, **data
        )
        return Response(answers.usage_answer(task, outcome))


class ToolCallRequest(TokenCheckedByLock, APIView):
    @extend_schema(
        operation_id="tool_call_request",
        summary="Ask before a tool execution",
        description="Fingerprints the call and checks, in order: task terminal, agent paused, "
        "deadline, request budget, the write's ledger row (operation_key), same call, short "
        "cycle, near duplicate, execution budget. Answers EXECUTE, REUSE, BLOCK, WAIT or "
        "STOP; see each variant. Agent tokens only.",
        parameters=[TASK_ID],
        request=s.ToolRequestIn,
        responses=r.answers({200: r.TOOL_CALL_DECISION}, 409, body=True),
    )
    def post(self, request, task_id):
        agent = decision_owner(request)
        data = _valid(s.ToolRequestIn, request)
        task, call, outcome = runner.tool_call_request(
            task_id=task_id,
            agent=agent,
            tool=data["tool"],
            args=data["args"],
            effect=data["effect"],
            operation_key=data.get("operation_key") or None,
            job_id=data.get("job_id") or None,
            call_id=data.get("call_id", ""),
            model_call_id=data.get("model_call"),
            request_id=data.get("request_id", ""),
        )
        return Response(answers.tool_call_answer(task, call, outcome))


class ToolCallResult(TokenCheckedByLock, APIView):
    # The tool ran: a committed write must reach the ledger, so the result is recorded even
    # with text the database cannot hold (stored encoded, see agents.db.storable).
    records_reports = True

    @extend_schema(
        operation_id="tool_call_result",
        summary="Report a tool's result",
        description="A result for an EXECUTE'd call is always accepted and recorded, even "
        "after the task stopped: a committed write must reach the ledger (the answer is then "
        "STOP). A write's SUCCESS with evidence.committed true commits its operation; "
        "committed false marks it NOT_COMMITTED; anything else leaves it UNKNOWN. 409 "
        "RESULT_ALREADY_REPORTED or TOOL_CALL_NOT_EXECUTED.",
        parameters=[TASK_ID, id_parameter("tool_call_id", "The `tool_call` of the EXECUTE.")],
        request=s.ToolResultIn,
        responses=r.answers({200: r.TOOL_RESULT_DECISION}, 409, body=True),
    )
    def post(self, request, task_id, tool_call_id):
        agent = decision_owner(request)
        call_id = row_id(tool_call_id, what="tool call", code="TOOL_CALL_NOT_FOUND")
        data = _valid(s.ToolResultIn, request)
        duration = data.pop("duration_ms", None)
        request_id = data.pop("request_id", "")
        result = terms.ToolResult(
            kind=data["kind"],
            data=data.get("data"),
            data_hash=data.get("data_hash") or None,
            wait_ms=data.get("wait_ms"),
            job_id=data.get("job_id") or None,
            attempts=data.get("attempts", 1),
            evidence=data.get("evidence"),
            code=data.get("code") or None,
            error=data.get("error") or None,
        )
        task, call, outcome = runner.tool_call_result(
            task_id=task_id, agent=agent, tool_call_id=call_id, result=result,
            duration_ms=duration, request_id=request_id,
        )  # fmt: skip
        return Response(answers.result_answer(task, outcome))


class TaskFinish(APIView):
    @extend_schema(
        operation_id="task_finish",
        summary="Finish a task",
        description="`evidence.done == true` with a valid revision: COMPLETED/goal_met; "
        "otherwise PARTIAL/goal_unverified. The agent's own claim never makes a task "
        "COMPLETED. Agent tokens only.",
        parameters=[TASK_ID],
        request=s.FinishIn,
        responses=r.answers({200: r.Task}, 409, body=True),
    )
    def post(self, request, task_id):
        agent = require_agent(request)
        data = _valid(s.FinishIn, request)
        task = runner.task_finish(task_id=task_id, agent=agent, **data)
        return Response(selectors.task_json(task))


class TaskStop(APIView):
    @extend_schema(
        operation_id="task_stop",
        summary="Stop a task",
        description="An agent stops its own task (STOPPED/agent_stop); an operator with "
        "stop_task any task (STOPPED/operator_stop). Idempotent: a stopped task answers as it "
        "is, and a repeat with the same request_id answers the same.",
        parameters=[TASK_ID],
        request=s.StopIn,
        responses=r.answers({200: r.Task}, 409, body=True),
    )
    def post(self, request, task_id):
        data = _valid(s.StopIn, request)
        agent = agent_of(request)
        if agent is None:
            require_perm(request, roles.STOP_TASK)
            task, _stopped = operator.task_stop(task_id=task_id, user=request.user, **data)
        else:
            task, _stopped = operator.task_stop(task_id=task_id, agent=agent, **data)
        return Response(selectors.task_json(task, selectors.redactor(operator=agent is None)))


class TaskResume(APIView):
    @extend_schema(
        operation_id="task_resume",
        summary="Resume a stopped task",
        description="Operators with resume_task. Starts the next phase: usage stays, each "
        "grant raises its limit, `seconds` moves the deadline, the window stays, `stagnant` "
        "starts from 0. 409 while any operation of the task is UNKNOWN or IN_FLIGHT, or the "
        "task is RUNNING or COMPLETED; 409 DEADLINE_PASSED when the deadline would still be "
        "past after the grant, with the least `grant.seconds` that puts it ahead of now in "
        "`error.fields.seconds_needed` (a number) and in the message. A non-admin's grant is "
        "bounded; larger grants answer 403 and need an admin.",
        parameters=[TASK_ID],
        request=s.ResumeIn,
        responses=r.answers({200: r.Task}, 409, body=True),
    )
    def post(self, request, task_id):
        require_perm(request, roles.RESUME_TASK)
        data = _valid(s.ResumeIn, request)
        task = operator.task_resume(
            task_id=task_id, user=request.user, reason=data["reason"], grant=data.get("grant")
        )
        return Response(selectors.task_json(task, selectors.redactor(operator=True)))


class TaskLimits(APIView):
    @extend_schema(
        operation_id="task_limits_update",
        summary="Change a task's limits",
        description="Admins only (change_task_limits). Any limit field; usage is untouched; "
        "a new deadline_seconds moves the deadline by the difference.",
        parameters=[TASK_ID],
        request=s.LimitsPatchIn,
        responses=r.answers({200: r.Task}, 409, body=True),
    )
    def patch(self, request, task_id):
        require_perm(request, roles.CHANGE_TASK_LIMITS)
        data = dict(_valid(s.LimitsPatchIn, request))
        reason = data.pop("reason", "")
        task = operator.task_set_limits(
            task_id=task_id, user=request.user, changes=data, reason=reason
        )
        return Response(selectors.task_json(task, selectors.redactor(operator=True)))
