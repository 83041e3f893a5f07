"""Operator and admin API: ledger, reconciliation, agent pause, limit profiles, audit log."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import roles, selectors
from agents.api import pagination
from agents.api import responses as r
from agents.api import serializers as s
from agents.api.auth import agent_of
from agents.api.permissions import require_perm
from agents.api.views import _valid, id_parameter, row_id
from agents.errors import BadInput, NotFound
from agents.guard import terms
from agents.models import Agent, LimitProfile
from agents.services import configuration, operator
from ledger import services as ledger_services
from ledger.models import Operation

OPERATION_ID = id_parameter("operation_id", "The operation's id.")
AGENT_NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="The agent's name.")
PROFILE_NAME = OpenApiParameter(
    "name", str, OpenApiParameter.PATH, description="The profile's name."
)


def visible_operations(request):
    agent = agent_of(request)
    if agent is not None:
        return Operation.objects.filter(namespace=agent.namespace)
    require_perm(request, roles.VIEW_OPERATION)
    return Operation.objects.all()


class OperationList(APIView):
    @extend_schema(
        operation_id="operation_list",
        summary="List ledger operations",
        description="Agents see their namespace's operations; operators all (needs "
        "view_operation). In ledger order, oldest first, a page at a time: follow `next` "
        "until it is null.",
        parameters=[
            OpenApiParameter("state", {"type": "string", "enum": list(terms.OPERATION_STATES)}),
            *pagination.page_parameters(pagination.NUMBER),
        ],
        responses=r.answers({200: r.OperationPage}),
    )
    def get(self, request):
        query = visible_operations(request)
        state = request.query_params.get("state")
        if state is not None:  # `state=` names no state either
            if state not in terms.OPERATION_STATES:
                raise BadInput(
                    f"Unknown operation state {state!r}.",
                    code="BAD_STATE",
                    fields={"state": "invalid"},
                )
            query = query.filter(state=state)
        masks = selectors.redactor(operator=agent_of(request) is None)
        rows, next_link = pagination.by_id(request, query)
        return Response(
            {
                "operations": [selectors.operation_json(o, masks=masks) for o in rows],
                "next": next_link,
            }
        )


class OperationDetail(APIView):
    @extend_schema(
        operation_id="operation_get",
        summary="Read an operation",
        description="The ledger row with its reconciliations, oldest first.",
        parameters=[OPERATION_ID],
        responses=r.answers({200: r.OperationDetail}),
    )
    def get(self, request, operation_id):
        pk = row_id(operation_id, what="operation", code="OPERATION_NOT_FOUND")
        operation = visible_operations(request).filter(pk=pk).first()
        if operation is None:
            raise NotFound("No such operation.", code="OPERATION_NOT_FOUND")
        masks = selectors.redactor(operator=agent_of(request) is None)
        return Response(selectors.operation_json(operation, with_history=True, masks=masks))


class OperationReconcile(APIView):
    @extend_schema(
        operation_id="operation_reconcile",
        summary="Reconcile an UNKNOWN operation",
        description="Operators with reconcile_operation give the verdict on an operation "
        "whose outcome nobody knows; append-only, audited. 409 OPERATION_NOT_UNKNOWN when "
        "it is not UNKNOWN.",
        parameters=[OPERATION_ID],
        request=s.ReconcileIn,
        responses=r.answers({200: r.OperationDetail}, 409, body=True),
    )
    def post(self, request, operation_id):
        require_perm(request, roles.RECONCILE)
        pk = row_id(operation_id, what="operation", code="OPERATION_NOT_FOUND")
        data = _valid(s.ReconcileIn, request)
        operation = ledger_services.operation_reconcile(
            operation_id=pk, actor=operator.actor_name(request.user),
            user=request.user, **data,
        )  # fmt: skip
        masks = selectors.redactor(operator=True)
        return Response(selectors.operation_json(operation, with_history=True, masks=masks))


class AgentPause(APIView):
    paused = True

    @extend_schema(
        operation_id="agent_pause",
        summary="Pause an agent",
        description="The kill switch: the agent's next gate or tool request stops its task "
        "with agent_paused, and it cannot create tasks (409 AGENT_PAUSED). Needs pause_agent.",
        parameters=[AGENT_NAME],
        request=s.PauseIn,
        responses=r.answers({200: r.AgentPaused}, body=True),
    )
    def post(self, request, name):
        require_perm(request, roles.PAUSE_AGENT)
        data = _valid(s.PauseIn, request)
        agent, _changed = operator.agent_set_paused(
            name=name, paused=self.paused, user=request.user, reason=data["reason"]
        )
        shown = selectors.agent_json(agent)
        return Response({key: shown[key] for key in ("name", "paused", "paused_reason")})


class AgentUnpause(AgentPause):
    paused = False

    @extend_schema(
        operation_id="agent_unpause",
        summary="Unpause an agent",
        description="Lifts the kill switch; tasks it stopped stay stopped. Needs pause_agent.",
        parameters=[AGENT_NAME],
        request=s.PauseIn,
        responses=r.answers({200: r.AgentPaused}, body=True),
    )
    def post(self, request, name):
        return super().post(request, name)


class AgentDetail(APIView):
    """An agent as operators see it; admins change the profiles it may use."""

    def _get(self, name) -> Agent:
        try:
            return Agent.objects.select_related("default_profile").get(name=name)
        except Agent.DoesNotExist:
            raise NotFound("No such agent.", code="AGENT_NOT_FOUND") from None

    @extend_schema(
        operation_id="agent_get",
        summary="Read an agent",
        description="Its namespace, default profile, the profiles an admin granted it (a task "
        "may name only those or the default; any other answers 403 PROFILE_NOT_ALLOWED), its "
        "daily cost cap and its pause. Needs view_agent.",
        parameters=[AGENT_NAME],
        responses=r.answers({200: r.AgentDetail}),
    )
    def get(self, request, name):
        require_perm(request, roles.VIEW_AGENT)
        return Response(selectors.agent_json(self._get(name)))

    @extend_schema(
        operation_id="agent_update",
        summary="Grant an agent profiles",
        description="Admins (change_agent) set the profiles the agent may name at task "
        "creation besides its default; unknown names answer 400; audited. Without "
        "`allowed_profiles` nothing changes.",
        parameters=[AGENT_NAME],
        request=s.AgentPatchIn,
        responses=r.answers({200: r.AgentDetail}, body=True),
    )
    def patch(self, request, name):
        require_perm(request, roles.CHANGE_AGENT)
        data = _valid(s.AgentPatchIn, request)
        agent = configuration.agent_set_allowed_profiles(
            name=name, profiles=data.get("allowed_profiles"), user=request.user,
            reason=data["reason"],
        )  # fmt: skip
        return Response(selectors.agent_json(self._get(agent.name)))


class ProfileSerializer(serializers.ModelSerializer):
    """A limit profile as stored: the limits a new task copies."""

    class Meta:
        model = LimitProfile
        exclude = ["id"]


class ProfilePage(serializers.Serializer):
    profiles = ProfileSerializer(many=True)


class ProfileList(APIView):
    @extend_schema(
        operation_id="profile_list",
        summary="List limit profiles",
        description="Needs view_limitprofile. Profiles are few; the list is whole.",
        responses=r.answers({200: ProfilePage}),
    )
    def get(self, request):
        require_perm(request, roles.VIEW_PROFILE)
        return Response({"profiles": ProfileSerializer(LimitProfile.objects.all(), many=True).data})

    @extend_schema(
        operation_id="profile_create",
        summary="Create a limit profile",
        description="Admins (add_limitprofile). Missing limits take the section 5 defaults. "
        "409 PROFILE_EXISTS when the name is taken.",
        request=s.ProfileIn,
        responses=r.answers({201: ProfileSerializer}, 409, body=True),
    )
    def post(self, request):
        require_perm(request, roles.ADD_PROFILE)
        data = _valid(s.ProfileIn, request)
        profile = configuration.profile_save(user=request.user, values=dict(data))
        return Response(ProfileSerializer(profile).data, status=status.HTTP_201_CREATED)


class ProfileDetail(APIView):
    def _get(self, name) -> LimitProfile:
        try:
            return LimitProfile.objects.get(name=name)
        except LimitProfile.DoesNotExist:
            raise NotFound("No such profile.", code="PROFILE_NOT_FOUND") from None

    @extend_schema(
        operation_id="profile_get",
        summary="Read a limit profile",
        parameters=[PROFILE_NAME],
        responses=r.answers({200: ProfileSerializer}),
    )
    def get(self, request, name):
        require_perm(request, roles.VIEW_PROFILE)
        return Response(ProfileSerializer(self._get(name)).data)

    @extend_schema(
        operation_id="profile_update",
        summary="Change a limit profile",
        description="Admins (change_limitprofile). Only the fields given change; tasks already "
        "created keep the limits they copied. 409 PROFILE_EXISTS when renamed to a taken name.",
        parameters=[PROFILE_NAME],
        request=s.ProfileIn(partial=True),
        responses=r.answers({200: ProfileSerializer}, 409, body=True),
    )
    def patch(self, request, name):
        require_perm(request, roles.CHANGE_PROFILE)
        self._get(name)
        serializer = s.ProfileIn(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        profile = configuration.profile_save(
            user=request.user, values=dict(serializer.validated_data), name=name
        )
        return Response(ProfileSerializer(profile).data)

    @extend_schema(
        operation_id="profile_delete",
        summary="Delete a limit profile",
        description="Admins (delete_limitprofile). Tasks keep their copied limits; their "
        "profile link is cleared.",
        parameters=[PROFILE_NAME],
        responses=r.answers({204: OpenApiResponse(description="Deleted.")}),
    )
    def delete(self, request, name):
        require_perm(request, roles.DELETE_PROFILE)
        configuration.profile_delete(user=request.user, name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditQuery(serializers.Serializer):
    # An empty filter is no filter, as in the console's form.
    kind = serializers.CharField(
        required=False, allow_blank=True, max_length=40, trim_whitespace=False
    )
    actor = serializers.CharField(
        required=False, allow_blank=True, max_length=150, trim_whitespace=False
    )
    agent = serializers.CharField(
        required=False, allow_blank=True, max_length=64, trim_whitespace=False
    )
    task = serializers.UUIDField(required=False)
    everyone = serializers.ChoiceField(["true", "false"], required=False)


class AuditList(APIView):
    @extend_schema(
        operation_id="audit_list",
        summary="Read the audit log",
        description="Who did what to which task, agent, operation or profile, when and why. "
        "Needs view_event. People's actions only unless `everyone=true` (then also the "
        "agents' and the system's). Newest first, a page at a time: follow `next`.",
        parameters=[
            OpenApiParameter(
                "kind",
                {"type": "string", "maxLength": 40},
                description="An event kind, e.g. task_stopped.",
            ),
            OpenApiParameter(
                "actor",
                {"type": "string", "maxLength": 150},
                description='A username, an agent name or "system:<job>".',
            ),
            OpenApiParameter("agent", {"type": "string", "maxLength": 64}),
            OpenApiParameter("task", {"type": "string", "format": "uuid"}),
            OpenApiParameter("everyone", {"type": "boolean"}),
            *pagination.page_parameters(pagination.NUMBER),
        ],  # fmt: skip
        responses=r.answers({200: r.AuditPage}),
    )
    def get(self, request):
        require_perm(request, roles.VIEW_EVENT)
        query = AuditQuery(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        filters = dict(query.validated_data)
        filters["everyone"] = filters.get("everyone") == "true"
        if "task" in filters:
            filters["task"] = str(filters["task"])
        rows, next_link = pagination.by_id(
            request, selectors.audit_events(**filters), descending=True
        )
        masks = selectors.redactor(operator=True)  # only users with view_event get here
        return Response(
            {"events": [selectors.audit_event_json(e, masks) for e in rows], "next": next_link}
        )
