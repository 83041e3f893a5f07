"""Searching the dashboard's task list: by id, goal, external_ref and operation key, and by
the day a task was created (UTC, both ends included), with the state and agent filters."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

import pytest

from agents.guard import terms
from agents.models import Task
from agents.services import tasks
from tests.console.conftest import HTMX, tool_step


def rows(page: str) -> str:
    """The task table's body: a goal in the search box or the URL is not a match."""
    return page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]


@pytest.fixture
def other(agent) -> Task:
    return tasks.task_create(agent=agent, goal="Summarise the quarterly report")


def test_it_finds_a_task_by_its_id(as_operator, looping_task, other):
    for typed in (str(looping_task.pk), f"  {str(looping_task.pk).upper()} "):
        page = rows(as_operator.get("/", {"q": typed}).content.decode())
        assert f'href="/tasks/{looping_task.pk}/"' in page
        assert f'href="/tasks/{other.pk}/"' not in page


def test_it_finds_a_task_by_words_of_its_goal_in_any_case(as_operator, looping_task, other):
    page = rows(as_operator.get("/", {"q": "QUARTERLY report"}).content.decode())
    assert "Summarise the quarterly report" in page
    assert "Find the enterprise price" not in page


def test_it_finds_a_task_by_its_external_ref(as_operator, agent, looping_task):
    tasks.task_create(agent=agent, goal="Answer the customer", external_ref="ZD-48213")
    page = rows(as_operator.get("/", {"q": "zd-48213"}).content.decode())
    assert "Answer the customer" in page
    assert "Find the enterprise price" not in page


def test_it_finds_the_tasks_whose_calls_carry_an_operation_key(as_operator, lost_write, agent):
    # Another task ran into the same ledger row (a REUSE or a wait): it carries the key too.
    second = tasks.task_create(agent=agent, goal="Second attempt at the payment")
    tool_step(
        agent, second.pk, "pay_invoice", {"invoice": "INV-42"},
        effect=terms.WRITE, operation_key="pay-INV-42",
    )  # fmt: skip
    tasks.task_create(agent=agent, goal="Unrelated goal")

    page = rows(as_operator.get("/", {"q": "pay-INV-42"}).content.decode())

    assert "Pay invoice INV-42 exactly once" in page
    assert "Second attempt at the payment" in page
    assert "Unrelated goal" not in page


def test_an_operation_key_is_found_however_its_accents_are_typed(as_operator, agent):
    composed = "order-café-7"  # the ledger keeps keys in NFC
    task = tasks.task_create(agent=agent, goal="Order the coffee beans")
    tool_step(agent, task.pk, "place_order", {"sku": 7}, effect=terms.WRITE, operation_key=composed)
    tasks.task_create(agent=agent, goal="Unrelated goal")
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed

    page = rows(as_operator.get("/", {"q": decomposed}).content.decode())

    assert "Order the coffee beans" in page
    assert "Unrelated goal" not in page


def test_a_search_with_invisible_characters_answers_a_page(as_operator, looping_task):
    response = as_operator.get("/", {"q": "pay\u200b-INV-42"})
    assert response.status_code == 200
    assert "No task matches these filters." in response.content.decode()


def test_a_search_combines_with_the_state_and_agent_filters(
    as_operator, looping_task, lost_write, make_agent
):
    other_agent = make_agent("agent-b", namespace="ns-b")[0]
    tasks.task_create(agent=other_agent, goal="Pay invoice INV-43 for agent b")

    page = rows(as_operator.get("/", {"q": "pay invoice"}).content.decode())
    assert "INV-42" in page and "INV-43" in page
    page = rows(as_operator.get("/", {"q": "pay invoice", "agent": "agent-b"}).content.decode())
    assert "INV-43" in page and "INV-42" not in page
    page = rows(as_operator.get("/", {"q": "pay invoice", "state": "RUNNING"}).content.decode())
    assert "INV-43" in page and "INV-42" not in page


def _created(task: Task, when: datetime) -> None:
    Task.objects.filter(pk=task.pk).update(created_at=when)


@pytest.fixture
def three_days(agent) -> dict[str, Task]:
    made = {}
    for name, when in {
        "first": datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC),
        "second-early": datetime(2026, 3, 2, 0, 0, 0, tzinfo=UTC),
        "second-late": datetime(2026, 3, 2, 23, 59, 59, 999999, tzinfo=UTC),
        "third": datetime(2026, 3, 3, 0, 0, 0, tzinfo=UTC),
    }.items():
        made[name] = tasks.task_create(agent=agent, goal=f"Goal made on {name}")
        _created(made[name], when)
    return made


def test_a_date_range_includes_both_of_its_days_in_utc(as_operator, three_days):
    page = rows(
        as_operator.get(
            "/", {"created_from": "2026-03-02", "created_to": "2026-03-02"}
        ).content.decode()
    )
    assert "on second-early" in page and "on second-late" in page
    assert "on first" not in page and "on third" not in page


def test_either_end_of_the_range_may_be_left_open(as_operator, three_days):
    page = rows(as_operator.get("/", {"created_from": "2026-03-02"}).content.decode())
    assert "on second-early" in page and "on third" in page and "on first" not in page
    page = rows(as_operator.get("/", {"created_to": "2026-03-01"}).content.decode())
    assert "on first" in page and "on second-early" not in page


def test_the_page_says_the_dates_are_utc_and_both_days_count(as_operator, db):
    page = as_operator.get("/").content.decode()
    assert 'name="created_from"' in page and 'name="created_to"' in page
    assert "Created between two days, both included (UTC)" in page


def test_a_malformed_date_is_a_form_error_not_a_500(as_operator, three_days):
    response = as_operator.get("/", {"created_from": "2026-02-30", "q": "goal made"})

    assert response.status_code == 422
    page = response.content.decode()
    assert "Enter a date as YYYY-MM-DD" in page
    # the rest of the search still applies, and the page says the date did not
    assert "on first" in page and "on third" in page
    assert 'value="2026-02-30"' in page  # what was typed stays in the box
    # the live poll asks again with what was typed, so the error stays until it is fixed
    assert 'hx-get="/?q=goal+made&amp;created_from=2026-02-30&amp;page=1"' in page


def test_a_malformed_date_reaches_htmx_as_an_error_beside_the_form(as_operator, three_days):
    response = as_operator.get("/", {"created_to": "yesterday"}, **HTMX)

    assert response.status_code == 422
    body = response.content.decode()
    assert 'id="filter-errors" hx-swap-oob="true"' in body
    assert "Enter a date as YYYY-MM-DD" in body


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["page", "htmx"])
def test_the_first_and_last_days_a_date_box_takes_are_ordinary_ends(
    as_operator, three_days, headers
):
    """0001-01-01 and 9999-12-31 are dates a date box sends: the range runs to the end of the
    last day, which no datetime holds the day after."""
    for query in (
        {"created_to": "9999-12-31"},
        {"created_from": "0001-01-01", "created_to": "9999-12-31"},
        {"created_from": "2026-03-02", "created_to": "9999-12-31"},
    ):
        response = as_operator.get("/", query, **headers)
        assert response.status_code == 200, query
        page = rows(response.content.decode())
        assert "on second-late" in page and "on third" in page, query
    page = rows(as_operator.get("/", {"created_from": "9999-12-31"}, **headers).content.decode())
    assert "Goal made on" not in page


def test_a_range_that_ends_before_it_starts_is_an_error(as_operator, three_days):
    response = as_operator.get("/", {"created_from": "2026-03-03", "created_to": "2026-03-01"})
    assert response.status_code == 422
    assert "The first day is after the last day." in response.content.decode()


def test_the_live_poll_and_the_pager_keep_the_search(as_operator, looping_task):
    page = as_operator.get(
        "/", {"q": "enterprise", "created_from": "2026-01-01", "created_to": "2099-12-31"}
    ).content.decode()
    assert "Find the enterprise price" in rows(page)
    assert (
        'hx-get="/?q=enterprise&amp;created_from=2026-01-01&amp;created_to=2099-12-31&amp;page=1"'
        in page
    )


def test_the_search_form_works_without_javascript(as_operator, db):
    page = as_operator.get("/").content.decode()
    form = page.split('<form class="filters"', 1)[1].split("</form>", 1)[0]
    assert 'method="get"' in form and 'action="/"' in form
    assert 'type="search" name="q"' in form
    assert 'type="date" name="created_from"' in form
    assert 'type="submit"' in form


def test_a_search_longer_than_any_key_is_an_error_not_an_unfiltered_list(as_operator, other):
    response = as_operator.get("/", {"q": "x" * 301})
    assert response.status_code == 422
    page = response.content.decode()
    assert "at most 300 characters" in page


def test_a_secret_in_a_goal_cannot_be_found_by_its_characters(as_operator, agent):
    # The console shows the goal masked; a search that matched the raw text would let anyone
    # who can search read the secret a character at a time ("is it sk_live_51Hx? sk_live_51Hy?").
    secret = "sk_live_51HxYzAbCdEfGhIjKlMnOpQr"
    tasks.task_create(agent=agent, goal=f"Charge the card with key {secret} for order 7",
                      external_ref=f"ref {secret}")  # fmt: skip

    for typed in (secret, secret[:14], secret[8:20]):
        assert "Charge the card" not in rows(as_operator.get("/", {"q": typed}).content.decode())
    # The words an operator sees are still found.
    assert "Charge the card" in rows(as_operator.get("/", {"q": "for order 7"}).content.decode())
    assert "Charge the card" in rows(as_operator.get("/", {"q": "ref"}).content.decode())


def test_a_secret_in_a_urls_query_cannot_be_found_by_its_characters(as_operator, agent):
    # The policy read `https:` as a name and the rest of the URL as its value, so a key in the
    # query was shown and matched as it was.
    url = "https://api.example.com/v1/export?api_key=Zx81kdP0qLm2"
    tasks.task_create(agent=agent, goal=f"Export from {url}")

    for typed in ("Zx81kdP0qLm2", "api_key=Zx81", "export?api_key=Z"):
        assert "Export from" not in rows(as_operator.get("/", {"q": typed}).content.decode())
    assert "Export from" in rows(as_operator.get("/", {"q": "api.example.com"}).content.decode())
