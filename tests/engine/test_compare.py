"""gradtrace.compare on the gallery's pairs: exactly the gradients a hook changed, by its factor."""

from __future__ import annotations

import json

import numpy as np

import gradtrace
from gradtrace.comparison_schema import CompareDoc
from gradtrace.examples import COMPARE_WITH, get_example, list_examples


def test_seed_002_x2_hook_doubles_exactly_the_gradients_upstream_of_it() -> None:
    diff = gradtrace.compare(get_example("full-backward-hook"), get_example("full-backward-hook-x2"))
    assert sorted(diff.summary.changed_grads) == ["f0.bias", "f0.weight", "x"]
    assert sorted(diff.summary.unchanged_grads) == ["f1.f.bias", "f1.f.weight"]
    by_name = {d.name: d for d in diff.grads}
    for name in ("x", "f0.weight", "f0.bias"):
        assert by_name[name].ratio == 2.0
    assert all(by_name[n].max_abs_diff == 0.0 for n in ("f1.f.bias", "f1.f.weight"))
    # same graph: every node and edge matched; the hook is the one difference in the spec
    assert not diff.nodes.only_a and not diff.nodes.only_b
    assert not diff.edges.only_a and not diff.edges.only_b
    (hook,) = diff.hooks
    assert (hook.where, hook.type, hook.status) == ("f1", "full_backward", "changed")
    assert diff.summary.changed_values == []  # the forward is the same


def test_numbers_agree_with_the_traces_themselves() -> None:
    a = gradtrace.trace_spec(get_example("full-backward-hook"))
    b = gradtrace.trace_spec(get_example("full-backward-hook-x2"))
    diff = gradtrace.compare(a, b)
    for d in diff.grads:
        expected = float(np.max(np.abs(b.grads[d.name] - a.grads[d.name])))
        assert d.max_abs_diff == expected


def test_identical_traces_compare_equal_and_round_trip_as_json() -> None:
    spec = get_example("two-layer-linear")
    diff = gradtrace.compare(spec, spec)
    assert diff.summary.changed_grads == [] and diff.summary.changed_edges == []
    assert all(d.status in ("unchanged", "no_gradient") for d in diff.grads + diff.values)
    again = CompareDoc.model_validate(json.loads(diff.model_dump_json()))
    assert again == diff


def test_deprecated_hook_pair_shows_the_inserted_nodes() -> None:
    diff = gradtrace.compare(get_example("full-backward-hook"), get_example("deprecated-backward-hook"))
    a = gradtrace.trace_spec(get_example("full-backward-hook")).doc
    inserted = {n.id for n in a.graph.nodes if n.inserted}
    assert inserted and inserted <= set(diff.nodes.only_a)  # only the full hook inserts them
    # the deprecated hook changes nothing numerically (it has no action): same final gradients
    assert diff.summary.changed_grads == []


def test_sgd_pair_shows_the_step() -> None:
    diff = gradtrace.compare(get_example("sgd-before-step"), get_example("sgd-training-step"))
    assert "lin.weight" in diff.summary.changed_grads  # the second backward ran on updated weights
    assert "pred" in diff.summary.changed_values


def test_gallery_pairs_exist() -> None:
    ids = {e["id"] for e in list_examples()}
    for example, other in COMPARE_WITH.items():
        assert example in ids and other in ids
    assert {e["id"]: e["compare_with"] for e in list_examples()}[
        "full-backward-hook-x2"
    ] == "full-backward-hook"
