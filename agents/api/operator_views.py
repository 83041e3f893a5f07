"""Operator and admin API: ledger, reconciliation, agent pause, limit profiles."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors
from agents.api import serializers as s
from agents.api.auth import agent_of
from agents.api.permissions import require_perm
from agents.api.views import ANY, _valid
from agents.errors import BadInput, NotFound
from agents.guard import types as g
from agents.models import Agent, Event, LimitProfile
from agents.services import admin, operator
from ledger import services as ledger_services
from ledger.models import Operation


def visible_operations(request):
    agent = agent_of(request)
    if agent is not None:
        return Operation.objects.filter(namespace=agent.namespace)
    require_perm(request, "ledger.view_operation")
    return Operation.objects.all()


class OperationList(APIView):
    @extend_schema(responses=ANY)
    def get(self, request):
        query = visible_operations(request).order_by("claimed_at", "id")
        state = request.query_params.get("state", "")
        if state:
            if state not in g.OPERATION_STATES:
                raise BadInput(
                    f"Unknown operation state {state!r}.",
                    code="BAD_STATE",
                    fields={"state": "invalid"},
                )
            query = query.filter(state=state)
        masks = selectors.redactor(operator=agent_of(request) is None)
        return Response(
            {"operations": [selectors.operation_json(o, masks=masks) for o in query[:500]]}
        )


class OperationDetail(APIView):
    @extend_schema(responses=ANY)
    def get(self, request, operation_id):
        operation = visible_operations(request).filter(pk=operation_id).first()
        if operation is None:
            raise NotFound("No such operation.", code="OPERATION_NOT_FOUND")
        masks = selectors.redactor(operator=agent_of(request) is None)
        return Response(selectors.operation_json(operation, with_history=True, masks=masks))


class OperationReconcile(APIView):
    @extend_schema(request=s.ReconcileIn, responses=ANY)
    def post(self, request, operation_id):
        require_perm(request, "ledger.reconcile_operation")
        data = _valid(s.ReconcileIn, request)
        operation = ledger_services.operation_reconcile(
            operation_id=operation_id, actor=operator.actor_name(request.user),
            user=request.user, **data,
        )  # fmt: skip
        masks = selectors.redactor(operator=True)
        return Response(selectors.operation_json(operation, with_history=True, masks=masks))


class AgentPause(APIView):
    paused = True

    @extend_schema(request=s.PauseIn, responses=ANY)
    def post(self, request, name):
        require_perm(request, "agents.pause_agent")
        data = _valid(s.PauseIn, request)
        agent = operator.agent_set_paused(
            name=name, paused=self.paused, user=request.user, reason=data["reason"]
        )
        return Response({"name": agent.name, "paused": agent.paused,
                         "paused_reason": agent.paused_reason})  # fmt: skip


class AgentUnpause(AgentPause):
    paused = False


class AgentDetail(APIView):
    """An agent as operators see it; admins change the profiles it may use."""

    def _get(self, name) -> Agent:
        try:
            return Agent.objects.select_related("default_profile").get(name=name)
        except Agent.DoesNotExist:
            raise NotFound("No such agent.", code="AGENT_NOT_FOUND") from None

    @extend_schema(responses=ANY)
    def get(self, request, name):
        require_perm(request, "agents.view_agent")
        return Response(selectors.agent_json(self._get(name)))

    @extend_schema(request=s.AgentPatchIn, responses=ANY)
    def patch(self, request, name):
        require_perm(request, "agents.change_agent")
        data = _valid(s.AgentPatchIn, request)
        agent = admin.agent_set_allowed_profiles(
            name=name, profiles=data["allowed_profiles"], user=request.user, reason=data["reason"]
        )
        return Response(selectors.agent_json(self._get(agent.name)))


class ProfileSerializer(serializers.ModelSerializer):
    class Meta:
        model = LimitProfile
        exclude = ["id"]
        read_only_fields = ["created_at", "updated_at"]

    def validate(self, attrs):
        from agents.guard import core

        limit_names = set(g.Limits.names())
        try:
            core.validate_limits({k: v for k, v in attrs.items() if k in limit_names}, partial=True)
        except g.LimitError as exc:
            raise serializers.ValidationError(exc.fields) from None
        return attrs


def _audit_profile(request, kind: str, profile: LimitProfile, detail: dict) -> None:
    Event.objects.create(
        kind=kind,
        actor=operator.actor_name(request.user),
        actor_user=request.user,
        reason=profile.name,
        detail=detail,
    )


class ProfileList(APIView):
    @extend_schema(responses=ANY)
    def get(self, request):
        require_perm(request, "agents.view_limitprofile")
        return Response({"profiles": ProfileSerializer(LimitProfile.objects.all(), many=True).data})

    @extend_schema(request=ProfileSerializer, responses={201: ANY})
    def post(self, request):
        require_perm(request, "agents.add_limitprofile")
        serializer = ProfileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        profile = admin.profile_save(user=request.user, values=dict(serializer.validated_data))
        return Response(ProfileSerializer(profile).data, status=status.HTTP_201_CREATED)


class ProfileDetail(APIView):
    def _get(self, name) -> LimitProfile:
        try:
            return LimitProfile.objects.get(name=name)
        except LimitProfile.DoesNotExist:
            raise NotFound("No such profile.", code="PROFILE_NOT_FOUND") from None

    @extend_schema(responses=ANY)
    def get(self, request, name):
        require_perm(request, "agents.view_limitprofile")
        return Response(ProfileSerializer(self._get(name)).data)

    @extend_schema(request=ProfileSerializer, responses=ANY)
    def patch(self, request, name):
        require_perm(request, "agents.change_limitprofile")
        profile = self._get(name)
        serializer = ProfileSerializer(profile, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        profile = admin.profile_save(
            user=request.user, values=dict(serializer.validated_data), name=name
        )
        return Response(ProfileSerializer(profile).data)

    @extend_schema(responses={204: None})
    def delete(self, request, name):
        require_perm(request, "agents.delete_limitprofile")
        profile = self._get(name)
        with transaction.atomic():
            _audit_profile(request, "profile_deleted", profile, {})
            profile.delete()  # tasks keep their copied limits; their profile link is cleared
        return Response(status=status.HTTP_204_NO_CONTENT)
