"""Novelty sees through volatile fields in results (issue 13): the tool policy's
`ignore_result_fields` and the built-in volatile key names are left out before the data hash."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from loopwarden_client import novelty as shared

from agents.guard import fingerprint
from agents.guard.core import report_result
from agents.guard.novelty import (
    VOLATILE_KEYS,
    VOLATILE_NAMES,
    KeyDiffs,
    ResultRules,
    changed_keys,
    effective_data,
    key_digests,
    key_name,
    propose_ignored_keys,
    result_hash,
)
from agents.guard.terms import PARTIAL, ToolResult

from .factories import NOW, call_of, make_task, read

READ = read(q="x")
NO_DEFAULTS = ResultRules.of(volatile_keys=False)
DEFAULTS = ResultRules()


def report(task, data, rules=DEFAULTS):
    result = ToolResult(kind="SUCCESS", data=data, rules=rules)
    return report_result(task, call_of(READ), result, NOW)


@pytest.mark.parametrize(
    "stamp",
    ["fetched_at", "fetchedAt", "Fetched-At", "FETCHED_AT", "fetched.at", "request_id",
     "X-Request-Id", "traceId", "ETag", "nonce", "timestamp", "updated_at"],
)  # fmt: skip
def test_a_volatile_key_in_any_spelling_is_left_out_of_the_hash(stamp):
    assert result_hash({"rows": [1], stamp: "a"}, ResultRules()) == result_hash(
        {"rows": [1], stamp: "b"}, ResultRules()
    )


def test_volatile_keys_are_left_out_at_any_depth_and_inside_lists():
    one = {"meta": {"requestId": "r1"}, "items": [{"id": 1, "etag": "x"}]}
    two = {"meta": {"requestId": "r2"}, "items": [{"id": 1, "etag": "y"}]}
    assert result_hash(one, ResultRules()) == result_hash(two, ResultRules())
    assert effective_data(one, ResultRules()) == {"meta": {}, "items": [{"id": 1}]}


def test_json_text_is_judged_by_the_value_it_holds():
    # Frameworks hand a tool's answer over as text; the stamp inside is a stamp all the same.
    one = '{"rows": [1], "fetched_at": "10:00:01"}'
    two = '{"fetched_at": "10:00:02", "rows": [1]}'
    assert result_hash(one, DEFAULTS) == result_hash(two, DEFAULTS)
    assert result_hash("{not json", DEFAULTS) != result_hash("{not json!", DEFAULTS)


def test_a_name_that_only_contains_a_volatile_word_is_data():
    assert key_name("timestamps_enabled") not in VOLATILE_NAMES
    assert result_hash({"timestamps_enabled": 1}, ResultRules()) != result_hash(
        {"timestamps_enabled": 2}, ResultRules()
    )


def test_the_defaults_can_be_switched_off():
    one, two = (
        result_hash({"fetched_at": 1}, NO_DEFAULTS),
        result_hash({"fetched_at": 2}, NO_DEFAULTS),
    )
    assert one != two


def test_ignored_result_fields_use_the_argument_path_syntax():
    rules = ResultRules.of(["served_by", "meta.shard", "a.b"], volatile_keys=False)
    one = {"rows": [1], "served_by": "n1", "meta": {"shard": 3, "v": 1}, "a.b": 1}
    two = {"rows": [1], "served_by": "n2", "meta": {"shard": 4, "v": 1}, "a.b": 2}
    assert result_hash(one, rules) == result_hash(two, rules)
    assert result_hash({**one, "rows": [2]}, rules) != result_hash(one, rules)
    assert one["served_by"] == "n1"  # the caller's data is untouched


def test_ignored_fields_are_exact_paths_not_names():
    rules = ResultRules.of(["Served_By"], volatile_keys=False)
    assert result_hash({"served_by": 1}, rules) != result_hash({"served_by": 2}, rules)


def test_a_read_answered_with_a_fresh_fetched_at_is_not_progress():
    task = make_task(progress_mode="novelty")
    assert report(task, {"rows": [1], "fetched_at": "10:00:01"}).progress is True
    assert report(task, {"rows": [1], "fetched_at": "10:00:02"}).progress is False
    assert report(task, {"rows": [1], "fetched_at": "10:00:03"}).progress is False
    outcome = report(task, {"rows": [1], "fetched_at": "10:00:04"})
    assert (outcome.decision, outcome.reason, task.state) == ("STOP", "no_progress", PARTIAL)


def test_with_the_defaults_off_a_fresh_stamp_is_progress_again():
    task = make_task(progress_mode="novelty")
    for second in range(5):
        assert report(task, {"rows": [1], "fetched_at": second}, NO_DEFAULTS).progress is True


def test_key_digests_and_changed_keys_name_what_made_a_result_new():
    before = key_digests({"rows": [1], "cursor": "a", "fetched_at": 1}, ResultRules())
    after = key_digests({"rows": [2], "cursor": "a", "fetched_at": 2, "more": True}, ResultRules())
    assert set(before) == {"rows", "cursor"}
    assert changed_keys(before, after) == ["more", "rows"]
    assert changed_keys(None, after) == ["cursor", "more", "rows"]
    assert list(key_digests([1, 2], ResultRules())) == ["$"]


def test_the_proposal_needs_the_same_few_keys_changing_every_time():
    diffs = KeyDiffs(tool="search", pairs=3, differing=3, keys={"served_by": 3}, widths=[1, 1, 1])
    assert propose_ignored_keys(diffs, max_keys=3, min_pairs=2) == ["served_by"]
    assert propose_ignored_keys(diffs, max_keys=3, min_pairs=4) == []
    assert propose_ignored_keys(diffs, max_keys=3, min_pairs=2, already=("served_by",)) == []
    wide = KeyDiffs(tool="s", pairs=2, differing=2, keys={"a": 2, "b": 2}, widths=[2, 9])
    assert propose_ignored_keys(wide, max_keys=3, min_pairs=2) == []
    scattered = KeyDiffs(tool="s", pairs=2, differing=2, keys={"a": 1, "b": 1}, widths=[1, 1])
    assert propose_ignored_keys(scattered, max_keys=3, min_pairs=2) == []


def test_the_server_hashes_with_the_client_librarys_rules():
    """One home for the rules: `loopwarden_shared.novelty`, which a client that sends a
    data_hash alone hashes with too. The server holds no copy (the very objects), and its
    policy's rules reach the shared functions as they should."""
    assert VOLATILE_KEYS is shared.VOLATILE_KEYS
    assert VOLATILE_NAMES is shared.VOLATILE_NAMES
    assert key_name is shared.key_name
    assert fingerprint.drop_field is shared.drop_field
    samples = [
        {"rows": [{"id": 1, "ETag": "x"}], "Fetched-At": 1, "meta": {"shard": 2, "v": 1}},
        [{"requestId": "r", "n": 1}],
        "text",
        {"a.b": 1, "a": {"b": 2}},
        '{"rows": [1], "fetched_at": "10:00"}',
        "[not json",
    ]
    for data in samples:
        for fields_, volatile in (((), True), (("meta.shard", "a.b"), True), (("rows",), False)):
            server = result_hash(data, ResultRules.of(fields_, volatile_keys=volatile))
            assert shared.result_hash(data, fields_, volatile_keys=volatile) == server


def test_the_typescript_client_leaves_out_the_same_volatile_keys():
    """The TypeScript client's twin of the hash (`clients/typescript/src/novelty.ts`) cannot
    import the Python list: it holds a copy, which must name the same keys in the same order,
    or a result it sends without its data would hash otherwise than the server's."""
    source = (settings.BASE_DIR / "clients/typescript/src/novelty.ts").read_text()
    listed = source.split("export const VOLATILE_KEYS: readonly string[] = [", 1)[1]
    listed = listed.split("];", 1)[0]
    assert re.findall(r'"([^"]*)"', listed) == list(shared.VOLATILE_KEYS)
