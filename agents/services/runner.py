"""The runner services agents call through the API: gate, usage, tool request, result, finish.

Each one is a single transaction: lock the task row, run the guard core, persist the task, the
trace row and the events. The rules themselves live only in `agents.guard.core`.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from agents import selectors
from agents.db import storable
from agents.db.day_money import move_day_money, move_day_money_later
from agents.db.prepared import Prepared, decision_transaction, insert_row, save_columns
from agents.errors import Conflict, NotFound
from agents.guard import core, terms
from agents.guard import novelty as novelty_rules
from agents.guard.similarity import EMBEDDING
from agents.models import Agent, Event, EventKind, ModelCall, SeenHash, Task, ToolCall, ToolPolicy
from agents.services import answers, catalog, embeddings, hooks, stops
from agents.services.common import (
    agent_view,
    catalog_of,
    cost_of,
    model_estimate,
    next_seq,
)
from agents.taskrow import (
    ANSWER_PROBE,
    LockProbe,
    Owner,
    answer_values,
    apply_state,
    lock_task,
    lock_task_and_call,
    lock_task_and_model_call,
    release_execution,
    save_task,
    to_state,
)
from ledger import services as ledger


def _column_size(model: Any, name: str) -> int:
    size = model._meta.get_field(name).max_length
    assert isinstance(size, int)
    return size


# The columns a result's short texts are kept in (`storable.fit` keeps what they hold).
_RESULT_KIND = _column_size(ToolCall, "result_kind")
_RESULT_CODE = _column_size(ToolCall, "result_code")
_SEEN_HASH = _column_size(SeenHash, "hash")

# How much of a plan or reflection the task row keeps for the repeated-output similarity rule.
PLAN_CHARS = 2000


def _finish_decision(
    task: Task, state: terms.TaskState, outcome: terms.Outcome, now, actor: str
) -> None:
    if outcome.stopped_now:
        stops.record_stop(task, state, now, actor=actor)
    else:
        apply_state(task, state)
        save_task(task)


@answers.answered_once
def model_call_gate(
    *,
    task_id: uuid.UUID | str,
    agent: Owner,
    model: str = "",
    est_prompt_tokens: int = 0,
    max_output_tokens: int = 0,
    request_id: str = "",
) -> tuple[Task, ModelCall, terms.Outcome]:
    """Ask before a paid model call. Locks the task row, then the agent's day row.

    Keeps: model calls never exceed the limit; the estimate (tokens and money) is reserved on
    the task, and the money on the agent's day, before ALLOW is answered, so racing gates
    cannot overspend together. A gate without an estimate reserves the model's default from
    the price table, else the task's profile default.

    For an agent with a daily cap, the day's money is reserved first and decided after, in one
    upsert whose row lock serializes the agent's gates: the day total it answers, less this
    estimate, is exactly what the rule would have read from the locked row; a gate that does
    not allow gives it back. Without a cap nothing reads the day's total: an ALLOW books its
    reservation on the day row with the decision's other writes (one statement on PostgreSQL).

    `agent` is the agent, or the claim of its token that the lock checks (`AgentClaim`); so
    for every decision here: from the lock on, the agent is the row the lock read.

    `request_id`, for every decision here: a repeat answers the first answer and counts
    nothing (`agents.services.answers`).
    """
    now = timezone.now()
    with decision_transaction():
        task = lock_task(task_id, agent=agent, probe=_answer_probe(request_id))
        request = answers.asked(
            task, request_id, "model_call", model, est_prompt_tokens, max_output_tokens
        )
        agent = task.agent
        state = to_state(task)
        tokens, estimate = model_estimate(
            catalog_of(task), model, est_prompt_tokens, max_output_tokens, state.limits
        )
        day = None if task.terminal else now.date()
        spent_today = Decimal(0)
        # Only an agent with a daily cap needs the day's total before the decision (the
        # estimate is then reserved on `booked` first); without one, the reservation is booked
        # with the decision's other writes (below).
        booked = day if core.reads_spent_today(task.agent.daily_cost_cap) else None
        if booked is not None:
            spent_today = move_day_money(agent.pk, booked, reserved=estimate) - estimate
        reserved_before = state.tokens_reserved
        outcome = core.gate_model_call(
            state,
            terms.ModelCallRequest(estimate_cost=estimate, estimate_tokens=tokens),
            agent_view(task.agent, spent_today),
            now,
        )
        allowed = outcome.decision == terms.ALLOW
        call = ModelCall(
            task=task,
            seq=next_seq(task),
            phase=task.phase,
            round=state.model_calls if allowed else None,
            model=model,
            decision=outcome.decision,
            reason="" if allowed else (state.reason or ""),
            est_prompt_tokens=est_prompt_tokens,
            max_output_tokens=max_output_tokens,
            reserved_cost=estimate if allowed else Decimal(0),
            reserved_tokens=state.tokens_reserved - reserved_before if allowed else 0,
        )
        insert_row(call)
        # The reservation stands on the day the call row records: the usage report and the
        # reservation sweep release it from `call.created_at`'s day, which is after `now` by
        # a few microseconds and so, at midnight, can be the next day. Each day row is
        # written once here (writes kept together must not touch one row twice).
        if booked is not None and (not allowed or call.created_at.date() != booked):
            move_day_money_later(agent.pk, booked, reserved=-estimate)
            booked = None
        if allowed and day is not None and booked is None:
            move_day_money_later(agent.pk, call.created_at.date(), reserved=estimate)
        _finish_decision(task, state, outcome, now, f"agent:{agent.name}")
        answers.keep(task, request, answers.model_call_answer(task, call, outcome), call)
    hooks.decision_logged(task, "model_call", outcome, model_call=call)
    return task, call, outcome


@answers.answered_once
def model_call_usage(
    *,
    task_id: uuid.UUID | str,
    agent: Owner,
    model_call_id: int,
    prompt_tokens: int,
    completion_tokens: int,
    tool_calls: list[dict[str, Any]] | None = None,
    output_text: str | None = None,
    request_id: str = "",
) -> tuple[Task, terms.Outcome]:
    """Settle a model call: the actual cost replaces the reservation. Locks the task row.

    Always recorded, even after the task stopped: the money was spent.
    """
    now = timezone.now()
    with decision_transaction():
        task, call = lock_task_and_model_call(
            task_id, model_call_id, agent=agent, request_id=request_id
        )
        request = answers.asked(
            task, request_id, "usage", model_call_id, prompt_tokens, completion_tokens,
            tool_calls, output_text,
        )  # fmt: skip
        agent = task.agent
        _check_settleable(call)
        actual = cost_of(catalog_of(task), call.model, prompt_tokens, completion_tokens)
        # A reservation the sweep already charged as reserved is not charged twice.
        reserved = Decimal(0) if call.expired else call.reserved_cost
        charged = max(actual - call.reserved_cost, Decimal(0)) if call.expired else actual
        tokens = prompt_tokens + completion_tokens
        reserved_tokens = 0 if call.expired else call.reserved_tokens
        charged_tokens = max(tokens - call.reserved_tokens, 0) if call.expired else tokens
        signature = core.action_signature(tool_calls)
        state = to_state(task)
        outcome = core.settle_usage(
            state,
            terms.UsageReport(
                reserved_cost=reserved,
                actual_cost=charged,
                tokens=charged_tokens,
                signature=signature,
                reserved_tokens=reserved_tokens,
                # Texts only matter to the similarity rule; capped so the row stays small.
                plan_text=core.plan_text(tool_calls)[:PLAN_CHARS],
                output_text=(output_text or "")[:PLAN_CHARS],
            ),
            now,
        )
        day = call.created_at.date()
        move_day_money_later(agent.pk, day, reserved=-reserved, spent=charged)
        call.prompt_tokens = prompt_tokens
        call.completion_tokens = completion_tokens
        call.cost = actual
        call.signature = signature
        call.tool_calls = tool_calls
        call.settled_at = now
        call.marks = outcome.marks
        save_columns(call, ["prompt_tokens", "completion_tokens", "cost", "signature",
                            "tool_calls", "settled_at", "marks"])  # fmt: skip
        _finish_decision(task, state, outcome, now, f"agent:{agent.name}")
        answers.keep(task, request, answers.usage_answer(task, outcome))
    hooks.decision_logged(task, "usage", outcome, model_call=call)
    return task, outcome


# Whether a tool request's model call is the task's, read by the task lock's statement (a
# fixed shape, compiled once per connection: `agents.taskrow.LockProbe`).
MODEL_CALL_PROBE = LockProbe(
    build=lambda model_call: {
        "model_call_known": Exists(ModelCall.objects.filter(task=OuterRef("pk"), pk=model_call))
    },
    slots={"model_call": (ModelCall._meta.pk, 8_765_432_109_878)},
)
MODEL_CALL_AND_OPERATION_PROBE = MODEL_CALL_PROBE + ledger.OPERATION_PROBE
# Each tool request's probe with the reads of a request id's kept answer (fixed objects: a
# probe compiles its lock once per connection).
_WITH_ANSWER = {
    probe: probe + ANSWER_PROBE
    for probe in (MODEL_CALL_PROBE, ledger.OPERATION_PROBE, MODEL_CALL_AND_OPERATION_PROBE)
}


def _answer_probe(request_id: str) -> tuple[LockProbe, dict[str, Any]] | None:
    """The lock's reads of the answer kept for `request_id` (none without one)."""
    return (ANSWER_PROBE, answer_values(request_id)) if request_id else None


def _check_settleable(call: ModelCall) -> None:
    if call.decision != terms.ALLOW:
        raise Conflict(
            "This model call was not allowed; there is no usage to report.",
            code="MODEL_CALL_NOT_ALLOWED",
        )
    if call.settled_at is not None:
        raise Conflict(
            "Usage for this model call was already reported.", code="USAGE_ALREADY_REPORTED"
        )


class _KeyRace(Exception):
    """Another transaction inserted the same operation key first; decide again."""


@answers.answered_once
def tool_call_request(
    *,
    task_id: uuid.UUID | str,
    agent: Owner,
    tool: str,
    args: dict[str, Any],
    effect: str,
    operation_key: str | None = None,
    job_id: str | None = None,
    call_id: str = "",
    model_call_id: int | None = None,
    request_id: str = "",
) -> tuple[Task, ToolCall, terms.Outcome]:
    """Ask before a tool execution. Locks the task row, then the ledger row of the key.

    Keeps: two workers, in one task or in different tasks of a namespace, never both get
    EXECUTE for one operation key. The ledger row is claimed in the same transaction that
    decides: inserted (a new key), or updated only while it is still the NOT_COMMITTED row the
    decision assumed (`ledger.operation_claim_assumed`); any other case is decided under the
    row's lock. When two transactions insert a new key at once, the unique constraint lets one
    win and the other decides again, under the row lock, and sees the claim.
    """
    races, may_embed = 0, True
    while races < 3:
        try:
            return _tool_call_request_once(
                task_id=task_id, agent=agent, tool=tool, args=args, effect=effect,
                operation_key=operation_key, job_id=job_id, call_id=call_id,
                model_call_id=model_call_id, request_id=request_id, optimistic=races == 0,
                may_embed=may_embed,
            )  # fmt: skip
        except _KeyRace:
            races += 1
        except embeddings.Unembedded as missing:
            # Texts no cache held: embedded now, with the lock let go, and decided again
            # (once: a text still missing then is scored lexically).
            embeddings.embed_missing(missing.calls)
            may_embed = False
    raise Conflict("The operation key is contended; retry.", code="OPERATION_CONTENDED")


def _tool_request(tool, args, effect, operation_key, job_id, policy) -> terms.ToolRequest:
    return terms.ToolRequest(
        tool=tool,
        args=args,
        effect=effect,
        operation_key=operation_key or None,
        job_id=job_id or None,
        ignore_fields=list(policy.ignore_fields) if policy else [],
        near_duplicate_threshold=policy.near_duplicate_threshold if policy else None,
        similarity_provider=policy.similarity_provider if policy else "lexical",
    )


def _probe(
    keyed: bool, operation_key: str | None, model_call_id: int | None, request_id: str
) -> tuple[LockProbe, dict[str, Any]] | None:
    """The reads `lock_task` makes with the lock for a tool request (see MODEL_CALL_PROBE)."""
    found = _request_probe(keyed, operation_key, model_call_id)
    if not request_id:
        return found
    if found is None:
        return _answer_probe(request_id)
    probe, values = found
    return _WITH_ANSWER[probe], {**values, **answer_values(request_id)}


def _request_probe(
    keyed: bool, operation_key: str | None, model_call_id: int | None
) -> tuple[LockProbe, dict[str, Any]] | None:
    key = {"operation_key": operation_key}
    if model_call_id is None:
        return (ledger.OPERATION_PROBE, key) if keyed else None
    if keyed:
        return (MODEL_CALL_AND_OPERATION_PROBE, {"model_call": model_call_id, **key})
    return (MODEL_CALL_PROBE, {"model_call": model_call_id})


def _tool_call_request_once(
    *, task_id, agent, tool, args, effect, operation_key, job_id, call_id, model_call_id,
    request_id, optimistic, may_embed,
) -> tuple[Task, ToolCall, terms.Outcome]:  # fmt: skip
    now = timezone.now()
    # Before the lock, the policy as this process last loaded it: it decides whether embedding
    # vectors are fetched, slow I/O kept outside the transaction. Only a policy that asks an
    # endpoint costs a version check here (so a switch back to lexical never calls it); for
    # lexical and the embedded model the check is the task lock's (a statement here cost the
    # semantic provider 0.8 ms of CPU a decision; a stale policy costs it at most one model run
    # per process and change). Under the lock a policy that changed in between decides.
    # The embedded model's vectors of the window are looked up under the lock, in the caches
    # only (`embeddings.window_vectors`): the window is the locked row's, not read here.
    policy = catalog.loaded().policies.get(tool)
    if policy is not None and policy.similarity_provider == EMBEDDING:
        policy = catalog.catalog_at(catalog.current_version()).policies.get(tool)
    request = _tool_request(tool, args, effect, operation_key, job_id, policy)
    request.vectors = embeddings.vectors_for(task_id=task_id, agent=agent, request=request)
    try:
        with decision_transaction():
            keyed = effect == terms.WRITE and bool(operation_key)
            # A keyed write reads its key's row id with the lock (a read has none to read),
            # a request that names its model call whether that call is the task's.
            task = lock_task(
                task_id, agent=agent,
                probe=_probe(keyed, operation_key, model_call_id, request_id),
            )  # fmt: skip
            request_asked = answers.asked(
                task, request_id, "tool_call", tool, args, effect, operation_key, job_id,
                call_id, model_call_id,
            )  # fmt: skip
            agent = task.agent
            current = catalog_of(task).policies.get(tool)
            if current is not policy:
                # An admin changed the catalog since this process last loaded it: decide by
                # the policy as it is now (an endpoint's vectors fetched under the lock, only
                # this once; the embedded model's looked up below, embedded outside it).
                request = _tool_request(tool, args, effect, operation_key, job_id, current)
                if request.similarity_provider == EMBEDDING:
                    request.vectors = embeddings.vectors_for(
                        task_id=task_id, agent=agent, request=request
                    )
            if model_call_id is not None and not task.model_call_known:  # type: ignore[attr-defined]
                raise NotFound("No such model call in this task.", code="MODEL_CALL_NOT_FOUND")
            keyed = keyed and not task.terminal
            seq = next_seq(task)
            operation = None
            operation_id = None
            state = to_state(task)
            if not task.terminal:
                embeddings.window_vectors(
                    request, state.window, state.limits.near_duplicate_threshold,
                    may_retry=may_embed,
                )  # fmt: skip
            outcome = None
            if keyed and optimistic:
                # The usual write: claim the key in one statement, deciding on the row the
                # claim assumes (see ledger.operation_claim_assumed); when the row is not as
                # assumed, or the decision is not a claim, decide again under its row lock.
                probe = task.operation_probe  # type: ignore[attr-defined]
                fingerprint = request.identity[0]
                assumed = ledger.operation_assumed(probe, fingerprint)
                outcome = core.request_tool(state, request, assumed, agent_view(task.agent), now)
                if outcome.claim:
                    operation_id = ledger.operation_claim_assumed(
                        probe, agent=agent, task=task, request=request, fingerprint=fingerprint,
                        lease=now + timedelta(seconds=state.limits.lease_seconds), now=now,
                        claim_seq=seq,
                    )  # fmt: skip
                if operation_id is None:
                    state, outcome = to_state(task), None
            if outcome is None:
                if keyed:
                    operation = ledger.operation_lock(agent.namespace, operation_key)
                view = None if operation is None else ledger.operation_view(operation, now)
                outcome = core.request_tool(state, request, view, agent_view(task.agent), now)
            _, args_text = request.identity if outcome.fingerprint else ("", "")
            call = ToolCall(
                task=task,
                seq=seq,
                phase=task.phase,
                model_call_id=model_call_id,
                call_id=call_id or "",
                tool=tool,
                args=args,
                effect=effect,
                operation_key=operation_key or "",
                job_id=job_id or "",
                fingerprint=outcome.fingerprint or "",
                args_text=args_text,
                decision=outcome.decision,
                reason=outcome.reason or "",
                operation=operation,
                marks=outcome.marks,
            )
            if outcome.operation_state == terms.UNKNOWN and operation is not None:
                ledger.lease_expire(operation, task=task, now=now, actor="system:guard")
                if operation.task_id == task.pk:
                    # Our own execution's claim expired: it is no longer pending. Another
                    # task's is released by the lease sweep or the reconcile, under its lock.
                    release_execution(task, state, operation.tool_call, now)
            if outcome.claim:
                lease = now + timedelta(seconds=state.limits.lease_seconds)
                call.lease_expires_at = lease
                if operation_id is None:
                    operation = ledger.operation_claim(
                        operation, agent=agent, task=task, request=request,
                        fingerprint=outcome.fingerprint or "", lease=lease, now=now,
                        claim_seq=seq,
                    )  # fmt: skip
                    operation_id = operation.pk
                call.operation_id = operation_id
            insert_row(call)
            if outcome.trigger:
                Event.objects.create(
                    task=task, agent=agent, kind=EventKind.GUARD_TRIGGER, phase=task.phase,
                    actor="system:guard", reason=outcome.trigger,
                    code=terms.REASON_CODES.get(outcome.trigger) or "",
                    detail={"decision": outcome.decision, "tool": tool,
                            "fingerprint": outcome.fingerprint},
                )  # fmt: skip
            _finish_decision(task, state, outcome, now, f"agent:{agent.name}")
            answers.keep(task, request_asked, answers.tool_call_answer(task, call, outcome), call)
    except IntegrityError as exc:
        if "operation_key_unique" in str(exc) or "ledger_operation" in str(exc):
            raise _KeyRace() from exc
        raise
    hooks.decision_logged(task, "tool_call", outcome, tool_call=call)
    return task, call, outcome


@answers.answered_once
def tool_call_result(
    *,
    task_id: uuid.UUID | str,
    agent: Owner,
    tool_call_id: int,
    result: terms.ToolResult,
    duration_ms: int | None = None,
    request_id: str = "",
) -> tuple[Task, ToolCall, terms.Outcome]:
    """Report what an EXECUTE'd call did. Locks the task row, then the call's ledger row.

    Always accepted and recorded, even after the task stopped: a committed write must reach
    the ledger. Only the claiming call settles a claim; a reconciled row is not overwritten
    unless the late result proves the commit.
    """
    now = timezone.now()
    with decision_transaction():
        task, call = lock_task_and_call(task_id, tool_call_id, agent=agent, request_id=request_id)
        request = answers.asked(task, request_id, "result", tool_call_id, result, duration_ms)
        agent = task.agent
        if call.decision != terms.EXECUTE:
            raise Conflict(
                f"This tool call was answered {call.decision}; nothing ran, so there is no "
                "result to report.",
                code="TOOL_CALL_NOT_EXECUTED",
            )
        if call.reported_at is not None:
            raise Conflict(
                "A result for this tool call was already reported.", code="RESULT_ALREADY_REPORTED"
            )
        limits = terms.Limits.from_dict(task.limits)
        result = replace(
            result,
            rules=result_rules(catalog_of(task).policies.get(call.tool)),
            # A hash is kept as a row of its own: as much of it as that column holds.
            data_hash=storable.fit(result.data_hash, _SEEN_HASH) if result.data_hash else None,
        )
        novelty = core.progress_hash(limits, result) if not task.terminal else None
        seen_before, earlier_keys = (
            _novelty_reads(task, call, novelty) if novelty else (False, None)
        )
        state = to_state(task, seen_hashes=[novelty] if novelty and seen_before else [])
        view = terms.ToolCallView(
            tool=call.tool, effect=call.effect, fingerprint=call.fingerprint,
            args_text=call.args_text, job_id=call.job_id or None,
            in_flight=call.released_at is None,
            claim_decided=call.released_at is not None and ledger.claim_decided(call),
        )  # fmt: skip
        outcome = core.report_result(state, view, result, now)
        if novelty and not seen_before and novelty in state.seen_hashes:
            # Under the task's lock, after the lookup found none: no other insert can race it.
            insert_row(SeenHash(task=task, hash=novelty))
        if call.effect == terms.WRITE and call.operation_id and outcome.operation_state:
            ledger.operation_settle(task, call, outcome, now)
        call.result_kind = storable.fit(result.kind, _RESULT_KIND)
        call.result_code = storable.fit(result.code or "", _RESULT_CODE)
        call.result_data = result.data
        _record_result_keys(call, result, earlier_keys, novel=bool(novelty) and outcome.progress)
        call.result_error = result.error or ""
        call.evidence = result.evidence
        call.duration_ms = duration_ms
        call.result_decision = outcome.decision
        call.result_reason = outcome.reason or ""
        call.revision_after = state.revision
        call.reported_at = now
        save_columns(call, [
            "result_kind", "result_code", "result_data", "result_error", "evidence",
            "duration_ms", "result_decision", "result_reason", "revision_after", "reported_at",
            "result_keys", "novel_keys",
        ])  # fmt: skip
        _finish_decision(task, state, outcome, now, f"agent:{agent.name}")
        answers.keep(task, request, answers.result_answer(task, outcome))
    hooks.decision_logged(task, "tool_result", outcome, tool_call=call)
    return task, call, outcome


def result_rules(policy: ToolPolicy | None) -> novelty_rules.ResultRules:
    """The tool policy's rules for what its results' data hash leaves out (no policy: the
    built-in volatile keys only). The policy comes from the catalog (no statement)."""
    if policy is None:
        return novelty_rules.ResultRules()
    return novelty_rules.ResultRules.of(policy.ignore_result_fields, policy.ignore_volatile_keys)


def _earlier_keys(**match: Any) -> Subquery:
    """The key digests of the task's last earlier result matching `match`."""
    return Subquery(
        ToolCall.objects.filter(task=OuterRef("pk"), result_keys__isnull=False, **match)
        .order_by("-seq")
        .values("result_keys")[:1]
    )


# What novelty mode reads for a result, in one statement compiled once per connection: whether
# the task saw the result's data hash (one indexed lookup, whatever the number of hashes it has
# seen), and the top-level key digests of the last earlier result of the same call and of the
# same tool among the `novelty_rules.KEYS_LOOKBACK` trace rows before it (which keys made a new
# result new is judged against them; the bound keeps the walk back by seq from reaching the
# task's first call when the call or the tool is new). The tool and the seq bounds each fill
# two parameter slots, one per subquery, so each has a second name: `Prepared` finds a marker
# value in exactly one slot.
_NOVELTY_READS = Prepared(
    lambda task, hash, tool, fingerprint, before, after, tool_again, before_again, after_again: (
        Task.objects.filter(pk=task)
        .annotate(
            hash_seen=Exists(SeenHash.objects.filter(task=OuterRef("pk"), hash=hash)),
            same_call_keys=_earlier_keys(
                tool=tool, fingerprint=fingerprint, seq__lt=before, seq__gte=after
            ),
            same_tool_keys=_earlier_keys(
                tool=tool_again, seq__lt=before_again, seq__gte=after_again
            ),  # fmt: skip
        )
        .values_list("hash_seen", "same_call_keys", "same_tool_keys")
    ),
    {
        "task": (Task._meta.pk, uuid.UUID("00000000-0000-4000-8000-00000000b0c2")),
        "hash": (SeenHash._meta.get_field("hash"), "prepared:marker:hash"),
        "tool": (ToolCall._meta.get_field("tool"), "prepared:marker:tool"),
        "fingerprint": (ToolCall._meta.get_field("fingerprint"), "prepared:marker:fingerprint"),
        "before": (ToolCall._meta.get_field("seq"), 2_109_876_541),
        "after": (ToolCall._meta.get_field("seq"), 2_109_876_543),
        "tool_again": (ToolCall._meta.get_field("tool"), "prepared:marker:tool-again"),
        "before_again": (ToolCall._meta.get_field("seq"), 2_109_876_542),
        "after_again": (ToolCall._meta.get_field("seq"), 2_109_876_544),
    },
)


def _novelty_reads(task: Task, call: ToolCall, novelty: str) -> tuple[bool, Any]:
    """Whether `task` saw the data hash `novelty`, and the key digests of the call's earlier
    result to compare a new one with: the same call's last, else the same tool's last, within
    `novelty_rules.KEYS_LOOKBACK` trace rows."""
    after = max(call.seq - novelty_rules.KEYS_LOOKBACK, 0)
    ((seen, same_call, same_tool),) = _NOVELTY_READS.rows(
        task=task.pk, hash=novelty, tool=call.tool, fingerprint=call.fingerprint,
        before=call.seq, after=after, tool_again=call.tool, before_again=call.seq,
        after_again=after,
    )  # fmt: skip
    return bool(seen), same_call or same_tool


def _record_result_keys(
    call: ToolCall, result: terms.ToolResult, earlier_keys: Any, *, novel: bool
) -> None:
    """Keep the result's top-level key digests and, when novelty judged it new, which keys
    made it so: compared with `earlier_keys` (see `_novelty_reads`)."""
    if result.data is None:
        call.novel_keys = [] if novel else None
        return
    call.result_keys = novelty_rules.key_digests(result.data, result.rules)
    if novel:
        call.novel_keys = novelty_rules.changed_keys(earlier_keys, call.result_keys)


@answers.answered_once
def task_finish(
    *,
    task_id: uuid.UUID | str,
    agent: Agent,
    evidence: Any = None,
    answer: str | None = None,
    request_id: str = "",
) -> Task:
    """The agent says it is done. Only verified evidence makes it COMPLETED. Locks the task.

    With a `request_id`, the task as this finish answered it is kept for a repeat.
    """
    now = timezone.now()
    with decision_transaction():
        task = lock_task(task_id, agent=agent, probe=_answer_probe(request_id))
        request = answers.asked(task, request_id, "finish", evidence, answer)
        state = to_state(task)
        outcome = core.finish(state, evidence, now)
        if outcome.stopped_now:
            insert_row(Event(
                task=task, agent=agent, kind=EventKind.FINISH_REQUESTED, phase=task.phase,
                actor=f"agent:{agent.name}", detail={"answer": answer, "evidence": evidence},
            ))  # fmt: skip
        _finish_decision(task, state, outcome, now, f"agent:{agent.name}")
        if request is not None:
            answers.keep(task, request, selectors.task_json(task))
    hooks.decision_logged(task, "finish", outcome)
    return task
