"""Runner API: thin views that validate the envelope and call one service each."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors
from agents.api import serializers as s
from agents.api.auth import agent_of
from agents.api.permissions import require_agent, require_perm
from agents.errors import NotFound
from agents.guard import types as g
from agents.models import Task
from agents.services import operator, runner, tasks

ANY = OpenApiResponse(description="JSON, see DESIGN.md section 6")


def _valid(serializer_class, request) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def visible_task(request, task_id) -> Task:
    """An agent sees only its own tasks (others answer 404); users need view_task."""
    agent = agent_of(request)
    if agent is None:
        require_perm(request, "agents.view_task")
    query = Task.objects.select_related("agent", "profile")
    if agent is not None:
        query = query.filter(agent=agent)
    try:
        return query.get(pk=task_id)
    except (Task.DoesNotExist, ValueError, ValidationError):  # not a UUID: 404
        raise NotFound("No such task.", code="TASK_NOT_FOUND") from None


def stop_body(task: Task, outcome_decision: str = g.STOP, **extra) -> dict:
    return {"decision": outcome_decision, "state": task.state, "reason": task.reason or None,
            "report": task.report, **extra}  # fmt: skip


class TaskList(APIView):
    @extend_schema(responses=ANY)
    def get(self, request):
        agent = agent_of(request)
        if agent is None:
            require_perm(request, "agents.view_task")
        state = request.query_params.get("state", "")
        if state and state not in g.TASK_STATES:
            return Response(
                {"error": {"code": "BAD_STATE", "message": f"Unknown state {state!r}.",
                           "fields": {"state": "invalid"}}},
                status=400,
            )  # fmt: skip
        rows = selectors.tasks_for(
            agent=agent, state=state, agent_name=request.query_params.get("agent", "")
        )[:500]
        return Response({"tasks": [selectors.task_json(t) for t in rows]})

    @extend_schema(request=s.TaskCreateIn, responses={201: ANY})
    def post(self, request):
        agent = require_agent(request)
        data = _valid(s.TaskCreateIn, request)
        task = tasks.task_create(agent=agent, **data)
        return Response(selectors.task_json(task), status=status.HTTP_201_CREATED)


class TaskDetail(APIView):
    @extend_schema(responses=ANY)
    def get(self, request, task_id):
        return Response(selectors.task_json(visible_task(request, task_id)))


class TaskTrace(APIView):
    @extend_schema(responses=ANY)
    def get(self, request, task_id):
        task = visible_task(request, task_id)
        masks = selectors.redactor(operator=agent_of(request) is None)
        return Response(selectors.trace_json(task, masks=masks))


class ModelCallGate(APIView):
    @extend_schema(request=s.ModelCallIn, responses=ANY)
    def post(self, request, task_id):
        agent = require_agent(request)
        data = _valid(s.ModelCallIn, request)
        task, call, outcome = runner.model_call_gate(task_id=task_id, agent=agent, **data)
        if outcome.decision == g.ALLOW:
            return Response({"decision": g.ALLOW, "model_call": call.pk, "round": call.round})
        return Response(stop_body(task, model_call=call.pk))


class ModelCallUsage(APIView):
    # The money was spent: the report is recorded even with text the database cannot hold
    # (stored encoded, see agents.storable), never refused for it.
    records_reports = True

    @extend_schema(request=s.UsageIn, responses=ANY)
    def post(self, request, task_id, model_call_id):
        agent = require_agent(request)
        data = _valid(s.UsageIn, request)
        task, outcome = runner.model_call_usage(
            task_id=task_id, agent=agent, model_call_id=model_call_id, **data
        )
        if outcome.decision == g.STOP:
            return Response(stop_body(task))
        return Response({"decision": outcome.decision})


class ToolCallRequest(APIView):
    @extend_schema(request=s.ToolRequestIn, responses=ANY)
    def post(self, request, task_id):
        agent = require_agent(request)
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
        )
        body = {"decision": outcome.decision, "tool_call": call.pk,
                "fingerprint": call.fingerprint or None}  # fmt: skip
        if outcome.decision == g.EXECUTE:
            body["lease_expires_at"] = (
                call.lease_expires_at.isoformat() if call.lease_expires_at else None
            )
        elif outcome.decision == g.REUSE:
            body["result"] = outcome.result
        elif outcome.decision == g.BLOCK:
            body["reason"] = outcome.reason
            body["observation"] = outcome.observation
        elif outcome.decision == g.WAIT:
            body["retry_after_ms"] = outcome.retry_after_ms
        else:
            body.update(stop_body(task))
        return Response(body)


class ToolCallResult(APIView):
    # The tool ran: a committed write must reach the ledger, so the result is recorded even
    # with text the database cannot hold (stored encoded, see agents.storable).
    records_reports = True

    @extend_schema(request=s.ToolResultIn, responses=ANY)
    def post(self, request, task_id, tool_call_id):
        agent = require_agent(request)
        data = _valid(s.ToolResultIn, request)
        duration = data.pop("duration_ms", None)
        result = g.ToolResult(
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
            task_id=task_id, agent=agent, tool_call_id=tool_call_id, result=result,
            duration_ms=duration,
        )  # fmt: skip
        if outcome.decision == g.STOP:
            return Response(stop_body(task))
        body = {"decision": outcome.decision, "revision": task.revision}
        if outcome.wait_ms is not None:
            body["wait_ms"] = outcome.wait_ms
        return Response(body)


class TaskFinish(APIView):
    @extend_schema(request=s.FinishIn, responses=ANY)
    def post(self, request, task_id):
        agent = require_agent(request)
        data = _valid(s.FinishIn, request)
        task = runner.task_finish(task_id=task_id, agent=agent, **data)
        return Response(selectors.task_json(task))


class TaskStop(APIView):
    @extend_schema(request=s.StopIn, responses=ANY)
    def post(self, request, task_id):
        data = _valid(s.StopIn, request)
        agent = agent_of(request)
        if agent is None:
            require_perm(request, "agents.stop_task")
            task = operator.task_stop(task_id=task_id, user=request.user, **data)
        else:
            task = operator.task_stop(task_id=task_id, agent=agent, **data)
        return Response(selectors.task_json(task))


class TaskResume(APIView):
    @extend_schema(request=s.ResumeIn, responses=ANY)
    def post(self, request, task_id):
        require_perm(request, "agents.resume_task")
        data = _valid(s.ResumeIn, request)
        task = operator.task_resume(
            task_id=task_id, user=request.user, reason=data["reason"], grant=data.get("grant")
        )
        return Response(selectors.task_json(task))


class TaskLimits(APIView):
    @extend_schema(request=s.LimitsPatchIn, responses=ANY)
    def patch(self, request, task_id):
        require_perm(request, "agents.change_task_limits")
        data = _valid(s.LimitsPatchIn, request)
        task = operator.task_set_limits(
            task_id=task_id, user=request.user, changes=data["limits"], reason=data["reason"]
        )
        return Response(selectors.task_json(task))
