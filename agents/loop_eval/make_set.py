"""Writes the generated part of the labelled set: `python -m agents.loop_eval.make_set`.

The phrasings below were written by hand; this script only lays them out as traces and
splits them, so the set can be read and re-made. The split is by topic, fixed here: the
families alternate between `tuning/` and `heldout/`, so a held-out trace never shares its
topic with a tuning one. Nothing here reads a provider's scores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "traces"

# fmt: off
# (the phrasings read best as written: one trace's calls on a few lines)

# -- loops -----------------------------------------------------------------------------------

# The same question asked again and again in other words (an agent that does not believe
# the answer it got). Many share almost no word.
PARAPHRASES: list[tuple[str, str, list[str]]] = [
    ("search", "q", ["cancel subscription", "end membership", "stop my plan from renewing",
                     "terminate my account subscription", "how to unsubscribe from the plan"]),
    ("kb_search", "query", ["reset password", "forgot my login credentials",
                            "recover account access", "change a lost passcode",
                            "password recovery steps"]),
    ("web_search", "query", ["cheap flights to Rome", "low cost airfare Rome",
                             "budget plane tickets for Rome", "inexpensive air travel to Rome",
                             "affordable flights Rome"]),
    ("docs_search", "q", ["delete a user", "remove an account", "erase a member profile",
                          "how do I get rid of a user", "user removal"]),
    ("search", "q", ["shipping cost", "delivery fee", "how much is postage",
                     "price of sending a parcel", "freight charges"]),
    ("kb_search", "query", ["contact customer support", "talk to a human agent",
                            "reach the help desk", "phone number for assistance",
                            "get in touch with service team"]),
    ("search", "q", ["return a damaged item", "send back a broken product",
                     "refund for defective goods", "exchange faulty merchandise",
                     "item arrived broken what now"]),
    ("web_search", "query", ["symptoms of flu", "signs of influenza",
                             "how do I know I have the flu", "influenza warning signs",
                             "flu indicators"]),
    ("docs_search", "q", ["increase upload size limit", "raise maximum file size",
                          "allow bigger uploads", "make attachments larger",
                          "upload too large error fix"]),
    ("search", "q", ["opening hours", "when is the store open", "business hours today",
                     "what time do you close", "shop schedule"]),
    ("kb_search", "query", ["update billing address", "change invoice address",
                            "edit payment details location", "modify address on my bill",
                            "new billing location"]),
    ("web_search", "query", ["best laptop for students", "top notebook for college",
                             "good computer for university", "student laptop recommendation",
                             "which laptop to buy for school"]),
    ("docs_search", "q", ["rotate api key", "regenerate access token", "renew secret key",
                          "replace credentials for the api", "issue a new api token"]),
    ("search", "q", ["track my order", "where is my package", "parcel location",
                     "delivery status of purchase", "shipment tracking"]),
    ("kb_search", "query", ["enable two factor authentication", "turn on 2fa",
                            "set up multi factor login", "add an authenticator app",
                            "activate second step verification"]),
    ("web_search", "query", ["how to bake sourdough", "sourdough bread recipe",
                             "making bread with starter", "homemade sourdough instructions",
                             "steps to bake a sourdough loaf"]),
    ("docs_search", "q", ["export data to csv", "download records as spreadsheet",
                          "save table as comma separated file", "csv export",
                          "get my data in excel format"]),
    ("search", "q", ["gift card balance", "how much is left on my voucher",
                     "check remaining credit on gift card", "voucher amount remaining",
                     "gift certificate value"]),
    ("kb_search", "query", ["change plan to annual billing", "switch to yearly payment",
                            "pay once a year instead of monthly", "annual subscription option",
                            "move to a yearly plan"]),
    ("web_search", "query", ["fix leaking faucet", "repair dripping tap",
                             "stop a tap from dripping", "faucet leak repair",
                             "how to mend a leaky tap"]),
    ("docs_search", "q", ["configure webhooks", "set up event callbacks",
                          "receive notifications at my url", "webhook setup guide",
                          "register an endpoint for events"]),
    ("search", "q", ["student discount", "reduced price for students",
                     "education pricing", "discount for university pupils",
                     "cheaper plan for learners"]),
    ("kb_search", "query", ["merge two accounts", "combine duplicate profiles",
                            "join my two logins into one", "consolidate accounts",
                            "account merging"]),
    ("web_search", "query", ["cheap hotels near the airport", "budget lodging by the airport",
                             "inexpensive rooms close to the terminal",
                             "affordable accommodation near airport", "low cost airport hotel"]),
    ("docs_search", "q", ["rate limit exceeded", "too many requests error",
                          "throttled by the api", "http 429 meaning",
                          "request quota reached"]),
    ("search", "q", ["warranty period", "how long is the guarantee",
                     "coverage duration for repairs", "warranty length",
                     "guarantee terms for the product"]),
    ("kb_search", "query", ["invite a teammate", "add a colleague to the workspace",
                            "share access with a coworker", "onboard a new team member",
                            "give someone access to my team"]),
    ("web_search", "query", ["learn spanish fast", "quickest way to pick up spanish",
                             "spanish crash course", "become fluent in spanish quickly",
                             "rapid spanish learning"]),
    ("docs_search", "q", ["schedule a recurring job", "run a task every night",
                          "cron style periodic execution", "repeat a job on a timer",
                          "nightly scheduled task"]),
    ("search", "q", ["pay in installments", "split the payment into parts",
                     "monthly payment plan", "buy now pay later option",
                     "spread the cost over months"]),
]

# One argument renamed between attempts: the value is the same request (what a model does
# when it guesses at a tool's schema), or code re-run with its variables renamed.
RENAMES: list[tuple[str, list[dict[str, Any]]]] = [
    ("search_tickets", [{"query": "printer offline"}, {"q": "printer offline"},
                        {"search": "printer offline"}, {"text": "printer offline"},
                        {"term": "printer offline"}]),
    ("run_python", [{"code": "total = sum(prices)\nprint(total)"},
                    {"code": "s = sum(prices)\nprint(s)"},
                    {"code": "result = sum(prices)\nprint(result)"},
                    {"code": "amount = sum(prices)\nprint(amount)"},
                    {"code": "acc = sum(prices)\nprint(acc)"}]),
    ("lookup_customer", [{"name": "Acme Corporation"}, {"customer": "Acme Corporation"},
                         {"company": "Acme Corporation"}, {"org": "Acme Corporation"},
                         {"account_name": "Acme Corporation"}]),
    ("run_python", [{"code": "rows = load()\nprint(len(rows))"},
                    {"code": "data = load()\nprint(len(data))"},
                    {"code": "items = load()\nprint(len(items))"},
                    {"code": "records = load()\nprint(len(records))"},
                    {"code": "xs = load()\nprint(len(xs))"}]),
    ("find_docs", [{"topic": "data retention"}, {"subject": "data retention"},
                   {"keywords": "data retention"}, {"about": "data retention"},
                   {"question": "data retention"}]),
    ("run_sql", [{"sql": "select name from users where active"},
                 {"sql": "select u.name from users u where u.active"},
                 {"sql": "select usr.name from users usr where usr.active"},
                 {"sql": "select t.name from users as t where t.active"},
                 {"sql": "select x.name from users x where x.active"}]),
    ("search_logs", [{"pattern": "connection refused"}, {"grep": "connection refused"},
                     {"match": "connection refused"}, {"filter": "connection refused"},
                     {"contains": "connection refused"}]),
    ("run_python", [{"code": "df = read('sales')\ndf.describe()"},
                    {"code": "frame = read('sales')\nframe.describe()"},
                    {"code": "table = read('sales')\ntable.describe()"},
                    {"code": "sales_df = read('sales')\nsales_df.describe()"},
                    {"code": "d = read('sales')\nd.describe()"}]),
    ("get_weather", [{"location": "Oslo"}, {"place": "Oslo"}, {"where": "Oslo"},
                     {"town": "Oslo"}, {"loc": "Oslo"}]),
    ("translate", [{"text": "Your order has shipped.", "target": "de"},
                   {"input": "Your order has shipped.", "lang": "de"},
                   {"source_text": "Your order has shipped.", "to_lang": "de"},
                   {"content": "Your order has shipped.", "language": "de"},
                   {"message": "Your order has shipped.", "target_language": "de"}]),
]

# One argument moved a little each round, the question unchanged.
NUDGES: list[tuple[str, dict[str, Any], str, list[Any]]] = [
    ("search_orders", {"status": "late"}, "limit", [10, 25, 50, 100, 200]),
    ("list_alerts", {"severity": "high"}, "since", ["2026-11-20", "2026-11-10", "2026-11-01",
                                                   "2026-10-15", "2026-10-01"]),
    ("summarize", {"doc": "quarterly-report"}, "max_words", [100, 150, 80, 200, 120]),
    ("search", {"q": "data processing agreement"}, "top", [3, 5, 10, 20, 50]),
    ("query_metrics", {"metric": "p99 latency"}, "hours", [1, 6, 12, 24, 48]),
    ("generate", {"prompt": "a tagline for the spring sale"}, "temperature",
     [0.2, 0.5, 0.7, 0.9, 1.0]),
    ("search_docs", {"q": "sso configuration"}, "page_size", [10, 20, 50, 100, 25]),
    ("fetch_tickets", {"queue": "billing"}, "until", ["2026-12-01", "2026-12-02", "2026-12-03",
                                                     "2026-12-04", "2026-12-05"]),
    ("search_products", {"q": "wireless headphones"}, "max_results", [5, 10, 15, 30, 60]),
    ("list_commits", {"repo": "web"}, "days", [1, 3, 7, 14, 30]),
    ("search", {"q": "vat rules for digital goods"}, "exact", [True, False, True, False, True]),
    ("search_users", {"q": "inactive admins"}, "count", [10, 20, 40, 80, 160]),
    ("query_logs", {"service": "checkout", "level": "error"}, "from",
     ["2026-11-30", "2026-11-29", "2026-11-28", "2026-11-27", "2026-11-26"]),
    ("search_kb", {"query": "sla response times"}, "first", [5, 10, 20, 40, 80]),
]

# Spelling slips and inflections of the same request.
TYPOS: list[tuple[str, str, list[str]]] = [
    ("search", "q", ["refund status", "refnud status", "refund staus", "refunds status",
                     "refund stauts"]),
    ("docs_search", "q", ["authentication error", "authentification error",
                          "authentication eror", "authenication error",
                          "authentication errors"]),
    ("web_search", "query", ["restaurant reservations", "resturant reservations",
                             "restaurant reservatons", "restaurant reservation",
                             "restaraunt reservations"]),
    ("kb_search", "query", ["invoice download", "invoce download", "invoice donwload",
                            "invoices download", "invoice downlaod"]),
    ("search", "q", ["account suspended", "acount suspended", "account suspnded",
                     "account suspension", "accout suspended"]),
    ("docs_search", "q", ["pagination parameters", "paginaton parameters",
                          "pagination paramters", "pagination params",
                          "paignation parameters"]),
    ("web_search", "query", ["mortgage calculator", "morgage calculator",
                             "mortgage calculater", "mortgage calculators",
                             "mortgae calculator"]),
    ("kb_search", "query", ["email not verified", "email not verifed", "e-mail not verified",
                            "email unverified", "emial not verified"]),
]

# A search and a read alternate, the search drifting in words each round.
CYCLES: list[tuple[list[str], list[str]]] = [
    (["vacation policy", "holiday leave rules", "time off policy", "paid leave policy"],
     ["https://hr.example.com/leave"] * 4),
    (["expense limits", "spending caps for expenses", "reimbursement limits",
      "maximum expense claim"], ["https://fin.example.com/expenses"] * 4),
    (["install the cli", "set up the command line tool", "cli installation",
      "install command line client"], ["https://docs.example.com/cli"] * 4),
    (["security incident process", "what to do after a breach", "incident response steps",
      "breach handling procedure"], ["https://sec.example.com/ir"] * 4),
    (["parking at the office", "where to park at work", "office car park",
      "parking spaces for staff"], ["https://office.example.com/parking"] * 4),
    (["onboarding checklist", "new hire first steps", "starter tasks for new employees",
      "first week checklist"], ["https://hr.example.com/onboarding"] * 4),
]

# -- legitimate work -------------------------------------------------------------------------

PAGINATION: list[tuple[str, dict[str, Any], str, list[Any]]] = [
    ("search_tickets", {"q": "refund requests"}, "page", [1, 2, 3, 4, 5]),
    ("list_customers", {"segment": "enterprise"}, "cursor", ["c_1", "c_9f", "c_a7", "c_k2"]),
    ("list_orders", {"status": "open", "limit": 100}, "offset", [0, 100, 200, 300, 400]),
    ("search_emails", {"q": "contract renewal"}, "page_token", ["t1x", "t2y", "t3z", "t4w"]),
    ("list_files", {"folder": "reports"}, "next_cursor", ["f_10", "f_20", "f_30", "f_40"]),
    ("get_order", {"expand": ["items"]}, "order_id", ["o_501", "o_502", "o_503", "o_504"]),
    ("read_doc", {"path": "handbook.md"}, "revision", [11, 12, 13, 14]),
    ("list_events", {"type": "invoice.paid"}, "starting_after", ["ev_1", "ev_2", "ev_3",
                                                                 "ev_4"]),
    ("scan_table", {"table": "audit_log"}, "start", [0, 500, 1000, 1500, 2000]),
    ("get_user", {"fields": ["email"]}, "user_id", ["u_11", "u_12", "u_13", "u_14", "u_15"]),
    ("search_issues", {"q": "memory leak"}, "pageNumber", [1, 2, 3, 4]),
    ("list_invoices", {"status": "unpaid"}, "skip", [0, 50, 100, 150]),
    ("fetch_page", {"url": "https://news.example.com/archive"}, "page", [1, 2, 3, 4, 5]),
    ("get_commit", {"repo": "api"}, "sha", ["a1b2", "c3d4", "e5f6", "a7b8"]),
]

# The same task done for each of several things: only an identifier changes.
PER_ITEM: list[tuple[str, list[dict[str, Any]]]] = [
    ("send_reminder", [{"text": f"remind invoice {n}", "channel": "email"}
                       for n in (42, 43, 44, 45)]),
    ("send_email", [{"to": a, "subject": "Your renewal", "template": "renewal_v3"}
                    for a in ("ana@example.com", "bo@example.org", "cy@example.net",
                              "di@example.com")]),
    ("summarize", [{"doc": f"ticket #{n} conversation"} for n in (1201, 1202, 1207, 1215)]),
    ("weather", [{"q": f"weather forecast for {c}"} for c in ("Madrid", "Lisbon", "Porto",
                                                               "Seville")]),
    ("search", [{"q": f"reviews of the film '{t}'"} for t in ("Heat", "Alien", "Brazil",
                                                               "Fargo")]),
    ("get_rates", [{"currency": c} for c in ("EUR", "USD", "GBP", "JPY", "CHF")]),
    ("daily_report", [{"q": f"sales summary for {d}"} for d in ("2026-11-25", "2026-11-26",
                                                                 "2026-11-27", "2026-11-28")]),
    ("refund", [{"reason": f"refund order A-{n} damaged in transit"}
                for n in (7781, 7790, 7802, 7815)]),
    ("translate", [{"text": "Thank you for your order.", "to": lang}
                   for lang in ("fr", "de", "es", "it")]),
    ("crm_note", [{"note": f"Followed up with {p} about the renewal"}
                  for p in ("Alice", "Bruno", "Chen", "Dmitri")]),
    ("lookup", [{"email": a} for a in ("x@acme.test", "y@acme.test", "z@acme.test",
                                       "w@acme.test")]),
    ("geocode", [{"address": f"{n} Market Street, San Francisco"} for n in (10, 221, 575,
                                                                            1355)]),
    ("search_flights", [{"q": f"flights from Boston to {c} in March"}
                        for c in ("Denver", "Austin", "Seattle", "Miami")]),
    ("close_ticket", [{"comment": f"Closing ticket {n}: resolved by the patch"}
                      for n in (311, 312, 318, 320)]),
    ("resize_image", [{"file": f"photo_{n}.jpg", "width": 800} for n in (1, 2, 3, 4, 5)]),
    ("check_stock", [{"sku": s} for s in ("SKU-1001", "SKU-1002", "SKU-2001", "SKU-3005")]),
    ("search", [{"q": f"population of {c}"} for c in ("Kenya", "Chile", "Norway", "Vietnam")]),
    ("notify", [{"message": f"Your appointment on {d} is confirmed"}
                for d in ("2026-12-02", "2026-12-03", "2026-12-09", "2026-12-10")]),
    ("label", [{"text": f"classify the sentiment of review \"{r}\""}
               for r in ("great value", "arrived late", "broke in a week", "love it")]),
    ("invite", [{"user": f"{n}@team.example.com", "role": "editor"}
                for n in ("kim", "lee", "max", "noa")]),
]

# Searches that change subject, often within one area (the trap for a meaning model).
CHANGING: list[tuple[str, str, list[str]]] = [
    ("search", "q", ["refund policy", "shipping policy", "privacy policy", "cookie policy"]),
    ("web_search", "query", ["python list comprehension", "python generators",
                             "python decorators", "python context managers"]),
    ("kb_search", "query", ["update profile photo", "change email address", "delete account",
                            "download invoices"]),
    ("docs_search", "q", ["create a webhook", "list webhooks", "update a webhook",
                          "delete a webhook"]),
    ("web_search", "query", ["hotels in Rome", "restaurants in Rome", "museums in Rome",
                             "public transport in Rome"]),
    ("search", "q", ["laptop battery drains fast", "laptop screen flickers",
                     "laptop keyboard not working", "laptop overheating"]),
    ("web_search", "query", ["postgres vacuum", "postgres indexes", "postgres replication",
                             "postgres backups"]),
    ("kb_search", "query", ["add a payment method", "remove a payment method",
                            "set a default payment method", "payment failed"]),
    ("search", "q", ["symptoms of flu", "treatment of flu", "flu vaccine side effects",
                     "how long is flu contagious"]),
    ("docs_search", "q", ["install on linux", "install on windows", "install on macos",
                          "uninstall"]),
    ("web_search", "query", ["history of the roman empire", "fall of the roman republic",
                             "roman architecture", "roman law"]),
    ("search", "q", ["mens running shoes", "womens running shoes", "trail running shoes",
                     "running socks"]),
    ("kb_search", "query", ["export contacts", "import contacts", "merge contacts",
                            "tag contacts"]),
    ("web_search", "query", ["kubernetes pod restart loop", "kubernetes ingress tls",
                             "kubernetes persistent volumes", "kubernetes autoscaling"]),
    ("search", "q", ["tax deadline for individuals", "tax deduction for home office",
                     "tax on crypto gains", "tax refund status"]),
    ("docs_search", "q", ["authentication overview", "rate limits", "error codes",
                          "versioning"]),
    ("web_search", "query", ["chocolate cake recipe", "lemon tart recipe",
                             "apple pie recipe", "banana bread recipe"]),
    ("search", "q", ["train to the airport", "taxi to the airport", "airport parking",
                     "airport lounge access"]),
    ("kb_search", "query", ["upgrade plan", "downgrade plan", "pause subscription",
                            "resume subscription"]),
    ("web_search", "query", ["symptoms of dehydration", "symptoms of heat stroke",
                             "symptoms of sunburn", "symptoms of food poisoning"]),
]

POLLING = [("start_export", "export_status"), ("start_backup", "backup_status"),
           ("train_model", "training_status"), ("render_video", "render_status"),
           ("run_migration", "migration_status"), ("crawl_site", "crawl_status"),
           ("transcode", "job_status"), ("build_index", "index_status")]

# A transient failure retried once after the wait it asked for, then the next item.
RETRIES = [("fetch_rates", "currency", ["EUR", "EUR", "USD", "GBP"]),
           ("get_inventory", "warehouse", ["north", "north", "south", "south"]),
           ("ping_service", "service", ["billing", "billing", "search", "auth"]),
           ("fetch_feed", "feed", ["news", "news", "sports", "sports"])]

# fmt: on


def _calls(tool: str, args_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"tool": tool, "args": args} for args in args_list]


def families() -> dict[str, list[dict[str, Any]]]:
    """Each family's traces, in a fixed order (a family is split, its topics are not)."""
    out: dict[str, list[dict[str, Any]]] = {}

    def add(family: str, name: str, label: str, kind: str, calls: list[dict[str, Any]]):
        out.setdefault(family, []).append(
            {"name": name, "label": label, "kind": kind, "calls": calls}
        )

    for i, (tool, key, phrasings) in enumerate(PARAPHRASES):
        add("paraphrase", f"paraphrase-{i:02d}", "loop", "rephrase",
            _calls(tool, [{key: p} for p in phrasings]))  # fmt: skip
    for i, (tool, args_list) in enumerate(RENAMES):
        add("rename", f"renamed-{i:02d}", "loop", "renamed", _calls(tool, args_list))
    for i, (tool, base, key, values) in enumerate(NUDGES):
        add("nudge", f"nudge-{key}-{i:02d}", "loop", "nudge",
            _calls(tool, [{**base, key: v} for v in values]))  # fmt: skip
    for i, (tool, key, phrasings) in enumerate(TYPOS):
        add("typo", f"typos-{i:02d}", "loop", "typos", _calls(tool, [{key: p} for p in phrasings]))
    for i, (queries, urls) in enumerate(CYCLES):
        calls = []
        for query, url in zip(queries, urls, strict=True):
            calls += [{"tool": "search", "args": {"q": query}},
                      {"tool": "read_page", "args": {"url": url}}]  # fmt: skip
        add("cycle", f"cycle-{i:02d}", "loop", "ab_drift", calls)
    for i, (tool, base, key, values) in enumerate(PAGINATION):
        add("pagination", f"paging-{key}-{i:02d}", "legit", "pagination",
            _calls(tool, [{**base, key: v} for v in values]))  # fmt: skip
    for i, (tool, args_list) in enumerate(PER_ITEM):
        add("per_item", f"per-item-{tool}-{i:02d}", "legit", "per_item", _calls(tool, args_list))
    for i, (tool, key, queries) in enumerate(CHANGING):
        add("changing", f"changing-{i:02d}", "legit", "changing_search",
            _calls(tool, [{key: q} for q in queries]))  # fmt: skip
    for i, (start, status) in enumerate(POLLING):
        job = f"job-{i}"
        calls = [{"tool": start, "args": {"name": f"run {i}"}, "kind": "PENDING",
                  "job_id": job, "wait_ms": 1000}]  # fmt: skip
        for n in range(4):
            kind = "PENDING" if n < 3 else "SUCCESS"
            calls.append({"tool": status, "args": {"job": job}, "job_id": job, "kind": kind,
                          "wait_ms": 1000 * (n + 1)})  # fmt: skip
        add("polling", f"polling-{i:02d}", "legit", "polling", calls)
    for i, (tool, key, values) in enumerate(RETRIES):
        calls = []
        for n, value in enumerate(values):
            retry = n + 1 < len(values) and values[n + 1] == value
            call: dict[str, Any] = {"tool": tool, "args": {key: value}}
            if retry:
                call.update(kind="RETRYABLE", wait_ms=500)
            calls.append(call)
        add("retry", f"retry-{i:02d}", "legit", "retry", calls)
    return out


def split() -> dict[str, list[dict[str, Any]]]:
    """Even-numbered traces of each family to tuning, odd-numbered to held-out."""
    parts: dict[str, list[dict[str, Any]]] = {"tuning": [], "heldout": []}
    for traces in families().values():
        for index, trace in enumerate(traces):
            parts["tuning" if index % 2 == 0 else "heldout"].append(trace)
    return parts


def main() -> None:
    for part, traces in split().items():
        path = HERE / part / "generated.json"
        path.write_text(json.dumps(traces, indent=1, ensure_ascii=False) + "\n")
        print(f"{path}: {len(traces)} traces")


if __name__ == "__main__":
    main()
