"""The tool-request gate and the tool-result report (docs/DESIGN.md section 4).

The request gate decides before any side effect: execute, reuse a committed result, nudge the
model once (BLOCK), wait for another worker's in-flight write, or stop. The result report is
where the only trusted signals arrive (the verifier's evidence, the commit proof of a write),
so progress, completion and the ledger's next state are all decided there.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from loopwarden_client.evidence import evidence_problem

from agents.guard.fingerprint import canonical_json
from agents.guard.novelty import result_hash
from agents.guard.similarity import (
    SEMANTIC,
    VECTOR_PROVIDERS,
    Similarity,
    VectorSimilarity,
    lexical_score,
)
from agents.guard.terms import (
    BLOCK,
    BLOCK_CODE,
    COMPLETED,
    CONTINUE,
    EXECUTE,
    FAILED,
    FATAL,
    IN_FLIGHT,
    NEEDS_HUMAN,
    NO_RESULT,
    NOT_COMMITTED,
    OP_COMMITTED,
    PARTIAL,
    PENDING,
    PRECONDITION,
    RESULT_KINDS,
    RETRYABLE,
    REUSE,
    SUCCESS,
    UNKNOWN,
    WAIT,
    WRITE,
    AgentView,
    Limits,
    OperationView,
    Outcome,
    TaskState,
    ToolCallView,
    ToolRequest,
    ToolResult,
    WindowEntry,
)
from agents.guard.transitions import (
    Evidence,
    already_stopped,
    halt,
    is_int,
    note_milestone,
    opening_checks,
    parse_evidence,
    restart_streak,
)
from agents.guard.window import (
    SAME_CALL,
    SHORT_CYCLE,
    cycle_period,
    is_poll,
    join_window,
    repetition,
    window_count,
)

# How long an agent should wait before asking again while another call holds the write's
# lease. Short: the holder usually reports within seconds, and the deadline bounds the total.
WAIT_RETRY_MS = 1000


# -- tool request ------------------------------------------------------------------------------


def _block_observation(tool: str, count: int) -> dict[str, Any]:
    """The tool message the model gets instead of a result: say what happened and what to do."""
    message = (
        f"You already made this exact call to {tool} {count} times with no progress; the "
        "result will not change. Do not repeat it. Change your approach (another tool or "
        "different arguments) or finish the task with what you have."
    )
    return {"success": False, "code": BLOCK_CODE, "retryable": False, "message": message}


# How much of a similar call's args and result the nudge quotes: enough to recognise them.
QUOTE_CHARS = 160


def _quote(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 3] + "..."


def _near_observation(tool: str, size: int, nearest: WindowEntry | None) -> dict[str, Any]:
    """The nudge for step 10: name the similar call and what it returned, so the model can
    see that rephrasing it will not give another answer."""
    closest = f" The closest was {tool}({_quote(nearest.args)})" if nearest else ""
    if nearest and nearest.result:
        closest += f" and it returned {_quote(nearest.result)}"
    message = (
        f"You already made {size} nearly identical calls to {tool} with no progress."
        f"{closest}. Rephrasing it will not change the result. Do not repeat "
        "it. Change your approach (another tool or really different arguments) or finish the "
        "task with what you have."
    )
    return {"success": False, "code": BLOCK_CODE, "retryable": False, "message": message}


def _repeat(task: TaskState, fp: str, reason: str, tool: str, count: int, out_fp: str) -> Outcome:
    """Steps 8 and 10: nudge once with BLOCK when the profile says so, otherwise stop.

    The blocked marker is per fingerprint, so the model gets exactly one nudge per call it
    repeats; a later repeat of the same call means the nudge did not work.
    """
    if task.limits.repeat_action == "block" and fp not in task.blocked:
        task.blocked.append(fp)
        return Outcome(
            decision=BLOCK,
            reason=reason,
            fingerprint=out_fp,
            trigger=reason,
            observation=_block_observation(tool, count),
        )
    return halt(task, PARTIAL, reason, fingerprint=out_fp)


def _near_duplicate(
    task: TaskState,
    req: ToolRequest,
    fp: str,
    size: int,
    nearest: WindowEntry | None,
    members: set[str],
    nudged: bool,
) -> Outcome:
    """Step 10 treated like step 8: one nudge per cluster, then STOP near_duplicate.

    The nudge marks this call and every member as blocked, so the next call that falls in the
    same cluster (whichever member it is closest to) stops instead of earning a second nudge.
    """
    if task.limits.repeat_action == "block" and not nudged:
        task.blocked.append(fp)
        task.blocked.extend(sorted(members - set(task.blocked)))
        return Outcome(
            decision=BLOCK,
            reason="near_duplicate",
            fingerprint=fp,
            trigger="near_duplicate",
            observation=_near_observation(req.tool, size, nearest),
        )
    return halt(task, PARTIAL, "near_duplicate", fingerprint=fp)


def _cluster(
    task: TaskState, req: ToolRequest, fp: str, args_text: str, threshold: float
) -> tuple[int, WindowEntry | None, set[str], bool]:
    """Step 10: the window's calls of this tool whose similarity to this call reaches the
    threshold, as (size, the most similar member, the members' fingerprints, nudged before).

    Every member counts, not only the single most similar fingerprint: a model that drifts a
    little each round never repeats one fingerprint, but its calls still pile up in one
    cluster. Calls still in flight count too, as in step 8. The most recent of the most
    similar members is named in the nudge: it is the call the model is most likely varying.
    """
    score = similarity_for(req)
    scored: dict[str, float] = {}
    size, best = 0, -1.0
    nearest: WindowEntry | None = None
    for entry in task.window:
        if entry.tool != req.tool:
            continue
        if entry.fingerprint not in scored:
            scored[entry.fingerprint] = score(fp, args_text, entry.fingerprint, entry.args)
        ratio = scored[entry.fingerprint]
        if ratio < threshold:
            continue
        size += 1
        if ratio >= best:
            nearest, best = entry, ratio
    members = {member for member, ratio in scored.items() if ratio >= threshold}
    size += sum(1 for pending in task.pending if pending in members)
    nudged = fp in task.blocked or any(member in task.blocked for member in members)
    return size, nearest, members, nudged


def similarity_for(req: ToolRequest) -> Similarity:
    """The scorer of the tool policy's provider (lexical unless it says semantic or embedding
    and the service could compute or fetch vectors before the lock)."""
    if req.similarity_provider in VECTOR_PROVIDERS and req.vectors:
        # The embedded model's vectors are of length 1; an endpoint's need not be.
        return VectorSimilarity(req.vectors, unit=req.similarity_provider == SEMANTIC)
    return lexical_score


def request_tool(
    task: TaskState,
    req: ToolRequest,
    operation: OperationView | None,
    agent: AgentView,
    now: datetime,
) -> Outcome:
    """Checks 1-13 of the tool request, in order.

    `operation` is the ledger row for the write's operation_key as read under its row lock
    (None: no row yet). EXECUTE of a write sets `claim`: the service must claim the row
    IN_FLIGHT with a lease in the same transaction. The window is not touched for EXECUTE;
    the step is recorded when its result arrives, because only then is it known whether it
    made progress.
    """
    if (stopped := opening_checks(task, agent, now)) is not None:
        return stopped
    limits = task.limits
    if task.tool_requests >= limits.max_tool_requests:
        return halt(task, PARTIAL, "request_budget")
    task.tool_requests += 1

    fp, args_text = req.identity
    is_write = req.effect == WRITE
    if is_write and not req.operation_key:
        return halt(task, NEEDS_HUMAN, "missing_operation_key", fingerprint=fp)

    reuse = False
    reuse_result: Any = None
    if is_write and operation is not None:
        if operation.fingerprint != fp:
            return halt(task, NEEDS_HUMAN, "operation_conflict", fingerprint=fp)
        if operation.state == IN_FLIGHT and operation.lease_live:
            return Outcome(decision=WAIT, fingerprint=fp, retry_after_ms=WAIT_RETRY_MS)
        if operation.state == IN_FLIGHT:
            # The lease ran out without a result: the write may or may not have happened.
            return halt(
                task, NEEDS_HUMAN, "unknown_commit", fingerprint=fp, operation_state=UNKNOWN
            )
        if operation.state == OP_COMMITTED:
            reuse, reuse_result = True, operation.result
        elif operation.state != NOT_COMMITTED:
            # UNKNOWN, or a state this core does not know: never blind-retry a write.
            return halt(task, NEEDS_HUMAN, "unknown_commit", fingerprint=fp)

    poll = is_poll(req.job_id)
    marks = None if poll else request_marks(task, fp)
    outcome = _loop_and_budget_checks(
        task, req, fp, args_text, poll, marks, reuse=reuse, reuse_result=reuse_result
    )
    outcome.marks = marks
    return outcome


def request_marks(task: TaskState, fp: str) -> dict[str, int | str]:
    """What the loop rules count at a (non-poll) request for `fp`, before it is decided: the
    marks its trace row keeps (`Outcome.marks`)."""
    marks: dict[str, int | str] = {"repeat": window_count(task, fp) + 1}
    if rule := repetition(task, fp):
        marks["rule"] = rule
    if period := cycle_period(task, fp):
        marks["cycle"] = period
    return marks


def _loop_and_budget_checks(
    task: TaskState,
    req: ToolRequest,
    fp: str,
    args_text: str,
    poll: bool,
    marks: dict[str, int | str] | None,
    *,
    reuse: bool,
    reuse_result: Any,
) -> Outcome:
    """Checks 7-13 of the tool request: the poll budget, the loop rules, REUSE and the
    execution budget."""
    limits = task.limits
    is_write = req.effect == WRITE
    if poll or fp in task.awaited:
        # A status poll, or a restart of a job whose last answer was PENDING (a job started
        # again instead of polled never joins the window): the poll budget (and the deadline)
        # bound both.
        if task.polls >= limits.max_polls:
            return halt(task, PARTIAL, "poll_budget", fingerprint=fp)
        task.polls += 1
    if poll:
        # Asking again is the point of a poll, so the repetition rules do not apply. A model
        # that plans the same poll every round is waiting, not looping: the repeated-output
        # streak starts again (docs/DESIGN.md section 4, check 8).
        restart_streak(task)
    else:
        rule = marks.get("rule") if marks else None
        if rule == SAME_CALL:
            return _repeat(task, fp, SAME_CALL, req.tool, window_count(task, fp), fp)
        if rule == SHORT_CYCLE:
            return halt(task, PARTIAL, SHORT_CYCLE, fingerprint=fp)
        threshold = (
            req.near_duplicate_threshold
            if req.near_duplicate_threshold is not None
            else limits.near_duplicate_threshold
        )
        if threshold is not None:
            size, nearest, members, nudged = _cluster(task, req, fp, args_text, threshold)
            if size >= limits.max_same_call:
                return _near_duplicate(task, req, fp, size, nearest, members, nudged)

    if reuse:
        # Reusing a committed result is a step without progress: a model that keeps asking
        # for a write that already happened is looping, even though nothing executes.
        task.stagnant += 1
        entry = WindowEntry(fingerprint=fp, tool=req.tool, args=args_text)
        join_window(task, entry, progress=False)
        if task.stagnant >= limits.max_stagnant:
            return halt(task, PARTIAL, "no_progress", fingerprint=fp)
        return Outcome(decision=REUSE, fingerprint=fp, result=reuse_result)

    if task.tool_executions >= limits.max_tool_executions:
        return halt(task, PARTIAL, "execution_budget", fingerprint=fp)
    task.tool_executions += 1
    if not poll:
        task.pending.append(fp)
    return Outcome(decision=EXECUTE, fingerprint=fp, claim=is_write)


# -- tool result -------------------------------------------------------------------------------


def _usable_kind(call: ToolCallView, result: ToolResult) -> str | None:
    """None when the result can be judged; else the stop reason for step 1.

    A PENDING result that names no job to poll is as unusable as an unknown kind: the agent
    could never ask about it again.
    """
    if result.kind == NO_RESULT:
        return "executor_error"
    if result.kind not in RESULT_KINDS:
        return "bad_result"
    if result.kind == PENDING and not (result.job_id or call.job_id):
        return "bad_result"
    return None


def _commit_state(kind: str, evidence: Evidence | None) -> str:
    """Step 3: what a write's ledger row becomes. Only the verifier's word settles a commit."""
    if evidence is not None and evidence.committed is False:
        return NOT_COMMITTED
    if kind == SUCCESS and evidence is not None and evidence.committed is True:
        return OP_COMMITTED
    return UNKNOWN


def _ledger_change(
    task: TaskState, call: ToolCallView, result: ToolResult
) -> tuple[str | None, Any]:
    """(new operation state, stored result) for a write's result; (None, None) for a read.

    Same rules as steps 1-3, usable on a stopped task too: a committed write must reach the
    ledger whatever happened to the task meanwhile.
    """
    if call.effect != WRITE:
        return None, None
    if _usable_kind(call, result) is not None:
        return UNKNOWN, None
    evidence, valid = parse_evidence(result.evidence, task.revision)
    if not valid:
        return UNKNOWN, None
    state = _commit_state(result.kind, evidence)
    return state, (result.data if state == OP_COMMITTED else None)


def progress_hash(limits: Limits, result: ToolResult) -> str | None:
    """The data hash step 5 would judge novelty by, or None when novelty does not decide.

    None in evidence mode, when the result carries evidence (evidence always decides), for a
    PENDING result (waiting is not progress) and when there is no data to hash. The service
    asks this first, to load whether that one hash was seen before it calls `report_result`.

    When `data` is sent, the hash is taken here over the data without the tool policy's
    ignored and volatile keys (`result.rules`), and a `data_hash` sent beside it is not used:
    one rule, applied by the party that knows the policy. A `data_hash` alone is taken as
    sent; the client library that computed it applies the same rules (docs/API.md).
    """
    if limits.progress_mode != "novelty" or result.evidence is not None or result.kind == PENDING:
        return None
    if result.data is not None:
        return result_hash(result.data, result.rules)
    if result.data_hash:
        return result.data_hash
    return None


def _made_progress(task: TaskState, result: ToolResult, evidence: Evidence | None) -> bool:
    """Step 5's question. Evidence, when given, always decides; novelty is the fallback."""
    if evidence is not None:
        return evidence.revision > task.revision
    seen = progress_hash(task.limits, result)
    if seen is None or seen in task.seen_hashes:
        return False
    task.seen_hashes.append(seen)
    return True


def _await(task: TaskState, fp: str, pending: bool) -> None:
    """Keep whether `fp`'s last result was PENDING."""
    if pending and fp not in task.awaited:
        task.awaited.append(fp)
    elif not pending and fp in task.awaited:
        task.awaited.remove(fp)


def _summary(result: ToolResult) -> str:
    """A short quote of what a call returned, kept in its window entry for step 10's nudge."""
    if result.data is None:
        return ""
    return _quote(canonical_json(result.data))


def report_result(
    task: TaskState, call: ToolCallView, result: ToolResult, now: datetime
) -> Outcome:
    """Steps 1-9 of the tool result report, in order.

    Always accepted, even on a stopped task: the tool ran and its call must close, and a
    committed write must reach the ledger. On a stopped task only the ledger change is
    returned (`operation_state`/`operation_result`) and the call leaves the pending set; no
    counter or window moves.
    """
    op_state, op_result = _ledger_change(task, call, result)
    ledger = {"operation_state": op_state, "operation_result": op_result}
    fp = call.fingerprint
    if call.in_flight and fp in task.pending:
        # No longer in flight, stopped task or not (left there, it would count as a repeat of
        # itself after a resume); on a running task step 5 puts it in the window.
        task.pending.remove(fp)
    if task.terminal:
        return already_stopped(task, fingerprint=fp, **ledger)
    is_write = call.effect == WRITE
    if is_write and not call.in_flight and call.claim_decided:
        # The released call's write was decided meanwhile (reconciled, or claimed again):
        # the verdict stands. The result is recorded and may still prove the commit (the
        # ledger's rule); the task, resumed or running on, moves no counter and goes on.
        return Outcome(decision=CONTINUE, fingerprint=fp, **ledger)

    # 1. No usable result.
    unusable = _usable_kind(call, result)
    if unusable is not None:
        if is_write:
            reason = "unknown_commit" if unusable == "executor_error" else unusable
            return halt(task, NEEDS_HUMAN, reason, fingerprint=fp, **ledger)
        return halt(task, FAILED, unusable, fingerprint=fp)

    # 2. Evidence must be well formed before anything trusts it.
    evidence, valid = parse_evidence(result.evidence, task.revision)
    if not valid:
        task.stop_detail = evidence_problem(result.evidence, task.revision)
        if is_write:
            return halt(task, NEEDS_HUMAN, "invalid_evidence", fingerprint=fp, **ledger)
        return halt(task, FAILED, "invalid_evidence", fingerprint=fp)

    # 3. A write's commit: only the verifier's proof settles it either way.
    if is_write and op_state == UNKNOWN:
        return halt(task, NEEDS_HUMAN, "unknown_commit", fingerprint=fp, **ledger)

    # 4. The tool's own verdict.
    if result.kind == FATAL:
        return halt(task, FAILED, "fatal", fingerprint=fp, **ledger)
    if result.kind == PRECONDITION:
        return halt(task, NEEDS_HUMAN, "precondition", fingerprint=fp, **ledger)

    # 5. Progress. Waiting (PENDING) is neither progress nor a loop: polls bound it, and
    # asking for this call again without `job_id` restarts the job, a poll all the same.
    note_milestone(task, evidence)
    _await(task, fp, result.kind == PENDING)
    progress = False
    if result.kind != PENDING:
        progress = _made_progress(task, result, evidence)
        if progress:
            if evidence is not None:
                task.revision = evidence.revision
            task.stagnant = 0
            # Verified progress also restarts the repeated-output streak: the same plan
            # after a step forward is the next step, not the model stuck.
            restart_streak(task)
        else:
            task.stagnant += 1
        # Progress clears the window (and its blocked markers) before this step joins it.
        entry = WindowEntry(
            fingerprint=fp, tool=call.tool, args=call.args_text, result=_summary(result)
        )
        join_window(task, entry, progress=progress)

    # 6. Verified completion.
    if evidence is not None and evidence.done:
        task.revision = max(task.revision, evidence.revision)
        return halt(task, COMPLETED, "goal_met", fingerprint=fp, progress=progress, **ledger)

    # 7. Too many steps without verified progress.
    if task.stagnant >= task.limits.max_stagnant:
        return halt(task, PARTIAL, "no_progress", fingerprint=fp, progress=progress, **ledger)

    # 8. Retry and wait: one retry budget for every layer, every wait inside the deadline.
    wait_ms: int | None = None
    if result.kind in (RETRYABLE, PENDING):
        if result.kind == RETRYABLE:
            attempts = result.attempts if is_int(result.attempts) and result.attempts >= 1 else 1
            task.retries += attempts
            if task.retries > task.limits.max_retries:
                return halt(
                    task, PARTIAL, "retry_budget", fingerprint=fp, progress=progress, **ledger
                )
        if not is_int(result.wait_ms) or result.wait_ms <= 0:
            return halt(task, FAILED, "invalid_wait", fingerprint=fp, progress=progress, **ledger)
        # Compared as numbers: `now + wait` would overflow datetime for an absurd wait_ms.
        if result.wait_ms >= (task.deadline_at - now) / timedelta(milliseconds=1):
            return halt(task, PARTIAL, "deadline", fingerprint=fp, progress=progress, **ledger)
        wait_ms = result.wait_ms

    # 9.
    return Outcome(decision=CONTINUE, fingerprint=fp, progress=progress, wait_ms=wait_ms, **ledger)
