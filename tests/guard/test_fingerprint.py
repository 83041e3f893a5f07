from __future__ import annotations

import hashlib
import json
from decimal import Decimal

import pytest

from agents.guard.core import action_signature, canonical_json, fingerprint


def test_canonical_json_sorts_keys_recursively_and_has_no_whitespace():
    assert canonical_json({"b": 1, "a": {"d": [1, 2], "c": None}}) == (
        '{"a":{"c":null,"d":[1,2]},"b":1}'
    )


def test_canonical_json_keeps_list_order_and_string_whitespace():
    assert canonical_json([" x ", "a"]) == '[" x ","a"]'


def test_canonical_json_keeps_unicode_unescaped():
    assert canonical_json({"name": "Zoë ✓"}) == '{"name":"Zoë ✓"}'


def test_canonical_json_writes_decimals_and_other_objects_as_strings():
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert canonical_json({"price": Decimal("1.10"), "x": Thing()}) == (
        '{"price":"1.10","x":"thing"}'
    )


def test_canonical_json_sorts_mixed_key_types_as_strings():
    assert canonical_json({2: "b", "1": "a"}) == '{"1":"a","2":"b"}'


def test_fingerprint_is_sha256_of_tool_newline_canonical_args():
    fp, text = fingerprint("search", {"q": "x", "page": 1}, [])
    assert text == '{"page":1,"q":"x"}'
    assert fp == hashlib.sha256(b'search\n{"page":1,"q":"x"}').hexdigest()


def test_same_tool_and_same_args_in_another_key_order_give_the_same_fingerprint():
    a = fingerprint("search", {"q": "x", "opts": {"a": 1, "b": 2}}, [])
    b = fingerprint("search", {"opts": {"b": 2, "a": 1}, "q": "x"}, [])
    assert a == b


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("search", {"q": "x"}), ("lookup", {"q": "x"})),
        (("search", {"q": "x"}), ("search", {"q": "x "})),
        (("search", {"ids": [1, 2]}), ("search", {"ids": [2, 1]})),
        (("search", {"n": 1}), ("search", {"n": "1"})),
    ],
    ids=["other tool", "whitespace in a string", "list order", "int vs string"],
)
def test_anything_the_tool_sees_differently_changes_the_fingerprint(left, right):
    assert fingerprint(*left, []) != fingerprint(*right, [])


def test_ignored_top_level_fields_do_not_change_the_fingerprint():
    a = fingerprint("search", {"q": "x", "request_id": "r1"}, ["request_id"])
    b = fingerprint("search", {"q": "x", "request_id": "r2"}, ["request_id"])
    assert a == b
    assert a[1] == '{"q":"x"}'


def test_ignored_dotted_paths_reach_into_nested_objects():
    a = fingerprint("search", {"q": "x", "meta": {"ts": 1, "lang": "en"}}, ["meta.ts"])
    b = fingerprint("search", {"q": "x", "meta": {"ts": 2, "lang": "en"}}, ["meta.ts"])
    assert a == b
    assert a[1] == '{"meta":{"lang":"en"},"q":"x"}'


def test_a_literal_top_level_key_with_a_dot_can_be_ignored():
    _, text = fingerprint("search", {"a.b": 1, "a": {"b": 2}}, ["a.b"])
    assert json.loads(text) == {"a": {"b": 2}}


def test_ignored_paths_that_do_not_exist_are_not_an_error():
    _, text = fingerprint("search", {"q": "x", "meta": "flat"}, ["missing", "meta.ts", "x.y.z"])
    assert text == '{"meta":"flat","q":"x"}'


def test_fingerprint_does_not_modify_the_callers_args():
    args = {"q": "x", "meta": {"ts": 1}}
    fingerprint("search", args, ["meta.ts", "q"])
    assert args == {"q": "x", "meta": {"ts": 1}}


@pytest.mark.parametrize("calls", [None, []])
def test_action_signature_is_empty_when_the_model_asked_for_no_tool(calls):
    assert action_signature(calls) == ""


def test_action_signature_hashes_names_and_canonical_args_in_order():
    calls = [{"name": "a", "args": {"y": 1, "x": 2}}, {"name": "b", "args": {}}]
    expected = hashlib.sha256(b'[["a",{"x":2,"y":1}],["b",{}]]').hexdigest()
    assert action_signature(calls) == expected


def test_action_signature_depends_on_call_order_but_not_key_order():
    a = {"name": "a", "args": {"x": 1, "y": 2}}
    a2 = {"name": "a", "args": {"y": 2, "x": 1}}
    b = {"name": "b", "args": {}}
    assert action_signature([a, b]) == action_signature([a2, b])
    assert action_signature([a, b]) != action_signature([b, a])


def test_action_signature_treats_missing_args_as_an_empty_object():
    assert action_signature([{"name": "a"}]) == action_signature([{"name": "a", "args": {}}])


@pytest.mark.parametrize(
    ("left", "right"),
    [({"n": 1}, {"n": 1.0}), ({"n": 0}, {"n": -0.0}), ({"n": [100]}, {"n": [1e2]})],
    ids=["1 and 1.0", "0 and -0.0", "100 and 1e2 in a list"],
)
def test_the_same_json_number_written_another_way_gives_the_same_fingerprint(left, right):
    assert fingerprint("search", left, []) == fingerprint("search", right, [])


def test_a_number_with_a_fraction_keeps_it():
    assert fingerprint("search", {"n": 1.5}, []) != fingerprint("search", {"n": 1}, [])
    assert canonical_json({"n": 1.5, "m": 2.0}) == '{"m":2,"n":1.5}'
