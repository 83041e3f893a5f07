"""`manage.py simulate`: drive realistic looping agents against a running Loopwarden.

Everything goes through the thin client (loopwarden_client) over HTTP, exactly as an outside
agent would; nothing here reads or writes the database, so the command works against any
server it can reach. Django is used only for the command plumbing.

The tools are deterministic fakes (a knowledge-base search index, a paged invoices API, a
warehouse and a payments API), so each scenario ends the same way every time and the summary
can say whether the guard stopped it for the expected reason.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser
from loopwarden_client import Client, LoopwardenError, Plan, run

History = list[dict[str, Any]]


def _tool_results(history: History, tool: str | None = None) -> list[dict[str, Any]]:
    """The data of the successful tool messages so far, oldest first."""
    return [
        item["content"].get("data")
        for item in history
        if item.get("role") == "tool"
        and (tool is None or item["name"] == tool)
        and item["content"].get("success")
    ]


def _tool_messages(history: History) -> list[dict[str, Any]]:
    return [item for item in history if item.get("role") == "tool"]


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


# -- fake services -----------------------------------------------------------------------------


class InvoiceAPI:
    """A paged REST API: three pages of three invoices, then `next_page` is null."""

    PAGES = 3

    def page(self, number: int, page_size: int = 3) -> dict[str, Any]:
        if not 1 <= number <= self.PAGES:
            raise ValueError(f"page {number} out of range")
        invoices = [
            {"id": f"INV-{number}{i:02d}", "amount": f"{100 * number + 7 * i}.00"}
            for i in range(1, page_size + 1)
        ]
        next_page = number + 1 if number < self.PAGES else None
        return {"page": number, "invoices": invoices, "next_page": next_page}


class SearchIndex:
    """A knowledge-base search that never contains the answer: same query, same hits."""

    def search(self, query: str) -> dict[str, Any]:
        seed = hashlib.sha256(query.encode()).hexdigest()
        hits = [
            {"title": f"Loopwarden FAQ #{int(seed[i : i + 4], 16) % 97}", "score": 0.42 - i / 100}
            for i in (0, 4, 8)
        ]
        return {"query": query, "hits": hits, "total": len(hits)}


class Warehouse:
    """Stock and supplier lookups that keep pointing at each other."""

    def stock(self, sku: str) -> dict[str, Any]:
        return {"sku": sku, "on_hand": 0, "note": "ask the supplier for the next delivery"}

    def supplier(self, sku: str) -> dict[str, Any]:
        return {"sku": sku, "status": "awaiting confirmation", "note": "check warehouse stock"}


class PaymentsAPI:
    """A payments provider whose pay endpoint times out: did the money move? Nobody knows.

    Once a human has looked into it (the run was reconciled and resumed), the provider answers.
    """

    def __init__(self, invoice: dict[str, str], *, answers: bool = False) -> None:
        self.open_invoice = invoice
        self.answers = answers

    def invoice(self, invoice: str) -> dict[str, Any]:
        if invoice != self.open_invoice["id"]:
            raise LookupError(f"payments API: no invoice {invoice}")
        return {**self.open_invoice, "status": "open"}

    def pay(self, invoice: str, amount: str, currency: str) -> dict[str, Any]:
        if not self.answers:
            raise TimeoutError(f"payments API: no answer for {invoice} within 10 s (read timeout)")
        return {"payment_id": f"PAY-{invoice.removeprefix('INV-')}", "invoice": invoice,
                "amount": amount, "currency": currency, "status": "paid"}  # fmt: skip


# -- scenarios ---------------------------------------------------------------------------------


class Scenario:
    """One looping agent: its goal, its fake tools, its planner and its verifier.

    `plan` plays the model (deterministic), `execute` the tools, `inspect` the application's
    verifier that turns tool data into evidence.
    """

    name: ClassVar[str]
    goal: ClassVar[str]
    expected: ClassVar[frozenset[tuple[str, str]]]
    profile: ClassVar[str | None] = None
    model: ClassVar[str] = "sim-model"
    est_prompt_tokens: ClassVar[int] = 1500
    max_output_tokens: ClassVar[int] = 300
    max_rounds: ClassVar[int] = 15

    def __init__(self, run_id: str, *, resumed: bool = False) -> None:
        self.run_id = run_id
        self.resumed = resumed  # an operator resumed this run's task: drive it on
        self.expect = set(self.expected)
        self.note = ""

    @property
    def external_ref(self) -> str:
        """Names the scenario and the run on the task, so each demo pass is told apart."""
        return f"simulate:{self.name}:{self.run_id}"

    @staticmethod
    def from_external_ref(external_ref: str | None) -> Scenario | None:
        """The run a task was created for, rebuilt as resumed (None if it is not the demo's)."""
        prefix, _, rest = (external_ref or "").partition(":")
        name, _, run_id = rest.partition(":")
        if prefix != "simulate" or name not in SCENARIOS or not run_id:
            return None
        return SCENARIOS[name](run_id, resumed=True)

    def create(self, client: Client) -> dict[str, Any]:
        return client.create_task(self.goal, profile=self.profile, external_ref=self.external_ref)

    def plan(self, history: History) -> Plan:
        raise NotImplementedError

    def execute(self, name: str, args: dict[str, Any]) -> Any:
        raise NotImplementedError

    def inspect(self, name: str, args: dict[str, Any], data: Any) -> dict[str, Any] | None:
        return None

    @staticmethod
    def tokens(history: History) -> dict[str, int]:
        """A growing prompt, as a real conversation has."""
        return {"prompt_tokens": 900 + 350 * len(history), "completion_tokens": 60}


class Pagination(Scenario):
    name = "pagination"
    goal = "Export all invoices: read every page of the invoices API (3 pages)."
    expected = frozenset({("COMPLETED", "goal_met")})

    def __init__(self, run_id: str, *, resumed: bool = False) -> None:
        super().__init__(run_id, resumed=resumed)
        self.api = InvoiceAPI()

    def plan(self, history: History) -> Plan:
        pages = _tool_results(history, "fetch_invoices")
        if pages and pages[-1]["next_page"] is None:
            # Normally unreached: the verifier's done evidence on the last page completes it.
            evidence = {"revision": pages[-1]["page"], "done": True}
            return Plan(done=True, evidence=evidence, answer="exported", **self.tokens(history))
        page = pages[-1]["next_page"] if pages else 1
        call = _call("fetch_invoices", page=page, page_size=3)
        return Plan(tool_calls=[call], **self.tokens(history))

    def execute(self, name: str, args: dict[str, Any]) -> Any:
        return self.api.page(args["page"], args["page_size"])

    def inspect(self, name: str, args: dict[str, Any], data: Any) -> dict[str, Any] | None:
        # The verifier: each exported page is a new revision; the last page completes the goal.
        return {
            "revision": data["page"],
            "done": data["next_page"] is None,
            "milestone": f"page_{data['page']}_exported",
        }


class RepeatedSearch(Scenario):
    name = "repeated_search"
    goal = "Find the enterprise price of Loopwarden in the knowledge base (it is not there)."
    expected = frozenset({("PARTIAL", "same_call")})
    QUERY = "loopwarden enterprise price"

    def __init__(self, run_id: str, *, resumed: bool = False) -> None:
        super().__init__(run_id, resumed=resumed)
        self.index = SearchIndex()

    def plan(self, history: History) -> Plan:
        search = _call("kb_search", query=self.QUERY)
        # The first turn fires the search twice in parallel, as models do; later turns ask once.
        # (Asking once every turn would trip repeated_output on the third identical turn before
        # the same-call rule gets to BLOCK: both are loop guards, this shows the BLOCK nudge.)
        calls = [search, search] if not history else [search]
        return Plan(tool_calls=calls, **self.tokens(history))

    def execute(self, name: str, args: dict[str, Any]) -> Any:
        return self.index.search(args["query"])


class ABCycle(Scenario):
    name = "ab_cycle"
    goal = "Find when SKU-7 is back in stock (warehouse and supplier keep referring to each other)."
    expected = frozenset({("PARTIAL", "short_cycle")})
    # Defaults stop this with no_progress (max_stagnant 3) before the cycle is complete; the
    # demo profile "patient" allows more steps without progress so the cycle rule shows.
    profile = "patient"

    def __init__(self, run_id: str, *, resumed: bool = False) -> None:
        super().__init__(run_id, resumed=resumed)
        self.warehouse = Warehouse()

    def create(self, client: Client) -> dict[str, Any]:
        try:
            return super().create(client)
        except LoopwardenError as exc:
            if exc.status not in (400, 403, 404):  # 403: the profile was not granted
                raise
        self.note = "no 'patient' profile: default limits, so no_progress comes first"
        self.expect = {("PARTIAL", "no_progress")}
        return client.create_task(self.goal, external_ref=self.external_ref)

    def plan(self, history: History) -> Plan:
        turn = len(_tool_messages(history))
        tool = "check_stock" if turn % 2 == 0 else "check_supplier"
        return Plan(tool_calls=[_call(tool, sku="SKU-7")], **self.tokens(history))

    def execute(self, name: str, args: dict[str, Any]) -> Any:
        if name == "check_stock":
            return self.warehouse.stock(args["sku"])
        return self.warehouse.supplier(args["sku"])


class LostWrite(Scenario):
    name = "lost_write"
    goal = "Pay an invoice exactly once."  # each run names its own invoice, payee and amount
    expected = frozenset({("NEEDS_HUMAN", "unknown_commit")})
    PAYEES = (
        "Acme Freight", "Northwind Traders", "Globex Logistics", "Initech Office Supply",
        "Umbrella Catering", "Stark Components", "Wayne Facilities", "Hooli Cloud",
    )  # fmt: skip

    def __init__(self, run_id: str, *, resumed: bool = False) -> None:
        super().__init__(run_id, resumed=resumed)
        # Each run pays its own invoice: a queue of unknown writes must read as distinct
        # payments, never as one payment tried again (that is what the product prevents).
        # Derived from the run id, so a resumed run pays exactly what it set out to pay.
        number = int(hashlib.sha256(run_id.encode()).hexdigest()[:12], 16)
        self.invoice = f"INV-{run_id[:6].upper()}"
        self.payee = self.PAYEES[number % len(self.PAYEES)]
        self.amount = f"{(number // 8) % 980_000 / 100 + 150:.2f}"
        self.goal = f"Pay {self.payee} invoice {self.invoice} (EUR {self.amount}) exactly once."
        self.payments = PaymentsAPI(
            {"id": self.invoice, "payee": self.payee, "amount": self.amount, "currency": "EUR"},
            answers=resumed,
        )
        # One business action, one key.
        self.operation_key = f"pay-{self.invoice}"
        if resumed:
            # Reconciled and resumed: the payment is reused (COMMITTED) or made (NOT_COMMITTED).
            self.expect = {("COMPLETED", "goal_met")}

    def plan(self, history: History) -> Plan:
        paid = _tool_results(history, "pay_invoice")
        if paid:
            # Only a REUSE gets here (an executed payment's evidence completes the task): the
            # ledger's committed result is the proof the verifier needs.
            evidence = {"revision": 2, "done": True, "milestone": "invoice_paid"}
            return Plan(done=True, evidence=evidence, answer="paid", **self.tokens(history))
        loaded = _tool_results(history, "get_invoice")
        if not loaded and not self.resumed:
            return Plan(
                tool_calls=[_call("get_invoice", invoice=self.invoice)], **self.tokens(history)
            )
        # A resumed run loaded the invoice in its first phase; the payment is what is left.
        invoice = loaded[-1] if loaded else self.payments.invoice(self.invoice)
        pay = _call(
            "pay_invoice",
            invoice=invoice["id"],
            amount=invoice["amount"],
            currency=invoice["currency"],
        )
        pay.update(effect="write", operation_key=self.operation_key)
        return Plan(tool_calls=[pay], **self.tokens(history))

    def execute(self, name: str, args: dict[str, Any]) -> Any:
        if name == "get_invoice":
            return self.payments.invoice(args["invoice"])
        return self.payments.pay(args["invoice"], args["amount"], args["currency"])

    def inspect(self, name: str, args: dict[str, Any], data: Any) -> dict[str, Any] | None:
        if name == "get_invoice":
            return {"revision": 1, "done": False, "milestone": "invoice_loaded"}
        # Reached only if the provider confirmed the payment.
        return {"revision": 2, "done": True, "committed": True, "milestone": "invoice_paid"}


class TokenSpender(Scenario):
    name = "token_spender"
    goal = "Write the market report (the model keeps redrafting it with a huge context)."
    expected = frozenset(
        {("PARTIAL", "token_budget"), ("PARTIAL", "cost_budget"), ("PARTIAL", "spend_cap")}
    )
    est_prompt_tokens = 60_000
    max_output_tokens = 8_000

    def plan(self, history: History) -> Plan:
        # Each redraft is saved (a tool call: a plan that asks for none is the agent's final
        # answer, which would finish the task instead of running into its budget).
        draft = sum(1 for item in history if item.get("role") == "assistant") + 1
        return Plan(
            tool_calls=[_call("save_draft", draft=draft)],
            prompt_tokens=60_000,
            completion_tokens=8_000,
            output_text=f"Draft {draft} of the market report. On reflection, let me redo it.",
        )

    def execute(self, name: str, args: dict[str, Any]) -> Any:
        if name != "save_draft":
            raise LookupError(f"no tool {name}")
        return {"saved": f"market-report-draft-{args['draft']}"}


SCENARIOS: dict[str, type[Scenario]] = {
    cls.name: cls for cls in (Pagination, RepeatedSearch, ABCycle, LostWrite, TokenSpender)
}


# -- the command -------------------------------------------------------------------------------


def agent_token(option: str | None) -> str:
    """The agent's token: `--token`, else LOOPWARDEN_TOKEN, else the file LOOPWARDEN_TOKEN_FILE.

    `./dev run` names a file: a token on the command line is visible to anyone running `ps`.
    """
    if option:
        return option
    if os.environ.get("LOOPWARDEN_TOKEN"):
        return os.environ["LOOPWARDEN_TOKEN"].strip()
    path = os.environ.get("LOOPWARDEN_TOKEN_FILE")
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as exc:
            raise CommandError(f"LOOPWARDEN_TOKEN_FILE={path}: {exc.strerror}") from None
        if token:
            return token
        raise CommandError(f"LOOPWARDEN_TOKEN_FILE={path} is empty")
    raise CommandError(
        "no agent token: set LOOPWARDEN_TOKEN_FILE to a file holding one (`manage.py "
        "create_agent NAME | tail -n1 > FILE`), or LOOPWARDEN_TOKEN"
    )


def _raise_interrupt(signum: int, frame: Any) -> None:
    # One is enough: supervisors often send SIGTERM to the whole group, twice; let the cleanup
    # (stopping the task being driven) finish.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the demo like Ctrl-C does (signals can only be set in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Command(BaseCommand):
    help = (
        "Drive simulated looping agents through the thin client against a running server: "
        + ", ".join(SCENARIOS)
        + "."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/api/v1/", help="API base URL")
        parser.add_argument(
            "--token",
            default=None,
            help="an agent's API token; better LOOPWARDEN_TOKEN_FILE (a file holding it) or "
            "LOOPWARDEN_TOKEN, which `ps` does not show",
        )
        parser.add_argument(
            "--scenario", default="all", choices=["all", *SCENARIOS], help="what to run"
        )
        parser.add_argument("--loop", action="store_true", help="repeat until Ctrl-C/SIGTERM")
        parser.add_argument(
            "--rounds", type=int, default=0, help="number of passes (default 1, or forever)"
        )
        parser.add_argument("--pause", type=float, default=2.0, help="seconds between scenarios")
        parser.add_argument(
            "--wait", type=float, default=60.0, help="seconds to wait for the server at start"
        )
        parser.add_argument(
            "--strict", action="store_true", help="exit non-zero if a scenario ends unexpectedly"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["rounds"] < 0 or options["pause"] < 0:
            raise CommandError("--rounds and --pause must not be negative")
        names = list(SCENARIOS) if options["scenario"] == "all" else [options["scenario"]]
        passes = options["rounds"] or (0 if options["loop"] else 1)  # 0: forever
        self.current: tuple[str, str] | None = None  # (scenario, task id) being driven
        self.unexpected = 0
        self.finished = 0
        token = agent_token(options["token"])
        client = Client(options["url"], token, on_decision=self.print_decision)
        with client, _sigterm_as_interrupt():
            try:
                self.wait_for_server(options["url"], token, options["wait"])
                number = 0
                while passes == 0 or number < passes:
                    number += 1
                    self.run_pass(client, names, number, options["pause"])
            except KeyboardInterrupt:
                self.stdout.write("interrupted: stopping")
                try:
                    self.stop_current(client)
                except KeyboardInterrupt:
                    self.stderr.write("interrupted again: the current task is left running")
        self.stdout.write(
            f"done: {self.finished} scenario runs, {self.unexpected} ended unexpectedly"
        )
        if options["strict"] and self.unexpected:
            raise CommandError(f"{self.unexpected} scenario runs ended unexpectedly")

    def wait_for_server(self, url: str, token: str, timeout: float) -> None:
        """Any HTTP answer means the server is up; connection errors are retried. The probe
        asks for a page that exists, as the agent (the API root itself answers 404, which the
        server logs as "Not Found")."""
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            try:
                httpx.get(
                    url.rstrip("/") + "/tasks?limit=1",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=2.0,
                )
                return
            except httpx.TransportError as exc:
                if time.monotonic() >= deadline:
                    raise CommandError(f"server not reachable at {url}: {exc}") from exc
                if not announced:
                    self.stdout.write(f"waiting for the server at {url} ...")
                    announced = True
                time.sleep(1.0)

    def run_pass(self, client: Client, names: list[str], number: int, pause: float) -> None:
        results = []
        for index, name in enumerate(names):
            if index or number > 1:
                time.sleep(pause)
            results.extend(self.drive_resumed(client))
            results.append(self.run_scenario(client, SCENARIOS[name](uuid.uuid4().hex[:8])))
        self.print_summary(number, results)

    def drive_resumed(self, client: Client) -> list[tuple[Scenario, dict[str, Any]]]:
        """Drive on every demo task an operator resumed, so none sits RUNNING forever.

        A task this agent created that is RUNNING in a later phase was stopped, then resumed
        by an operator; its scenario and run are rebuilt from its external_ref.
        """
        results = []
        for task in client.list_tasks(state="RUNNING"):
            scenario = Scenario.from_external_ref(task.get("external_ref"))
            if scenario is None or int(task.get("phase") or 1) < 2:
                continue
            results.append(self.run_scenario(client, scenario, task))
        return results

    def run_scenario(
        self, client: Client, scenario: Scenario, task: dict[str, Any] | None = None
    ) -> tuple[Scenario, dict[str, Any]]:
        """Create the scenario's task and drive it, or drive on `task` (a resumed one)."""
        if task is None:
            try:
                task = scenario.create(client)
            except LoopwardenError as exc:
                if exc.status in (401, 403):
                    raise CommandError(f"the server refused the token: {exc}") from exc
                self.stdout.write(f"{scenario.name:<16} create   ERROR    {exc}")
                self.unexpected += 1
                return scenario, {"state": "-", "reason": exc.code}
        self.current = (scenario.name, task["id"])
        profile = task.get("profile") or "default"
        if scenario.resumed:
            self.stdout.write(
                f"{scenario.name:<16} resumed  {task['id']} (phase {task.get('phase')}, "
                f"profile {profile})"
            )
        else:
            self.stdout.write(f"{scenario.name:<16} task     {task['id']} (profile {profile})")
        if scenario.note:
            self.stdout.write(f"{scenario.name:<16} note     {scenario.note}")
        task = run(
            client,
            task["id"],
            scenario.plan,
            scenario.execute,
            scenario.inspect,
            max_rounds=scenario.max_rounds,
            model=scenario.model,
            est_prompt_tokens=scenario.est_prompt_tokens,
            max_output_tokens=scenario.max_output_tokens,
        )
        self.current = None
        self.finished += 1
        if (task.get("state"), task.get("reason")) not in scenario.expect:
            self.unexpected += 1
        return scenario, task

    def stop_current(self, client: Client) -> None:
        """Leave nothing RUNNING behind: stop the task being driven when interrupted."""
        if self.current is None:
            return
        name, task_id = self.current
        try:
            task = client.stop(task_id, reason="simulator interrupted")
            self.stdout.write(f"{name:<16} stop     {task['state']}/{task['reason']}")
        except (LoopwardenError, httpx.HTTPError) as exc:
            self.stderr.write(f"{name:<16} could not stop task {task_id}: {exc}")

    # -- output ------------------------------------------------------------------------------

    STEP = {
        "gate_model_call": "model",
        "report_usage": "usage",
        "request_tool": "tool",
        "report_result": "result",
    }

    def print_decision(
        self, endpoint: str, request: dict[str, Any], answer: dict[str, Any]
    ) -> None:
        """One line per guard decision: scenario, step, decision, reason or detail."""
        scenario = self.current[0] if self.current else "-"
        decision = answer.get("decision", "?")
        self.stdout.write(
            f"{scenario:<16} {self.STEP.get(endpoint, endpoint):<8} {decision:<8} "
            f"{self.describe(endpoint, request, answer)}"
        )

    @staticmethod
    def describe(endpoint: str, request: dict[str, Any], answer: dict[str, Any]) -> str:
        decision = answer.get("decision")
        if decision == "STOP":
            report = answer.get("report") or {}
            state = report.get("state") or answer.get("state")
            reason = report.get("reason") or answer.get("reason")
            return f"{state}/{reason} ({report.get('code') or 'no code'})"
        if endpoint == "gate_model_call":
            return f"model call {answer.get('model_call')}, round {answer.get('round')}"
        if endpoint == "report_usage":
            tools = ", ".join(c["name"] for c in request.get("tool_calls", [])) or "no tools"
            tokens = request.get("prompt_tokens", 0) + request.get("completion_tokens", 0)
            return f"{tokens} tokens; asked for {tools}"
        if endpoint == "request_tool":
            what = f"{request.get('tool')} {request.get('args')}"
            if decision == "BLOCK":
                code = (answer.get("observation") or {}).get("code")
                return f"{answer.get('reason')}: {what} ({code})"
            if decision == "WAIT":
                return f"{what}: in flight elsewhere, retry in {answer.get('retry_after_ms')} ms"
            return what
        if endpoint == "report_result":
            detail = f"{request.get('kind')}, revision {answer.get('revision')}"
            if answer.get("wait_ms"):
                detail += f", wait {answer['wait_ms']} ms"
            return detail
        return ""

    def print_summary(self, number: int, results: list[tuple[Scenario, dict[str, Any]]]) -> None:
        self.stdout.write(f"-- pass {number} summary " + "-" * 70)
        self.stdout.write(
            f"{'scenario':<16} {'state':<12} {'reason':<16} {'code':<20} "
            f"{'model':>5} {'execs':>5} {'tokens':>7} {'cost':>8}  verdict"
        )
        for scenario, task in results:
            usage = task.get("usage") or (task.get("report") or {}).get("usage") or {}
            state, reason = task.get("state"), task.get("reason")
            ok = (state, reason) in scenario.expect
            verdict = "as expected" if ok else f"UNEXPECTED (wanted {sorted(scenario.expect)})"
            self.stdout.write(
                f"{scenario.name:<16} {state or '-':<12} {reason or '-':<16} "
                f"{task.get('code') or '-':<20} {usage.get('model_calls', '-'):>5} "
                f"{usage.get('tool_executions', '-'):>5} {usage.get('tokens', '-'):>7} "
                f"{usage.get('cost', '-'):>8}  {verdict}"
            )
