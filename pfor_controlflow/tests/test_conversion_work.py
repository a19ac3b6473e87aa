"""Conversion work of nested while loops with per-iteration trip counts grows linearly
with the depth: each loop body is converted on trial once per layout of its inputs
(the results are kept on the conversion), not once per trial of every enclosing loop.
Counted, not timed: how many times the walk converted a function graph."""

import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import api, testing

X = tf.random.stateless_normal([4, 3], seed=[1, 2])
TRIPS = tf.constant([1, 2, 0, 1])


def _nested(depth):
    """``depth`` while loops inside each other, each running the iteration's own
    number of steps."""
    def body(i):
        xi, steps = tf.gather(X, i), tf.gather(TRIPS, i)

        def level(k, h):
            if k == 0:
                return h * 0.5 + xi
            return tf.while_loop(lambda t, h: t < steps,
                                 lambda t, h: (t + 1, level(k - 1, h)), (0, h))[1]

        return level(depth, xi)
    return body


def _conversions(monkeypatch, body):
    """Function-graph conversions (trials included) pf.pfor does for ``body``."""
    made = []

    def conversion(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    original = api._conversion  # pylint: disable=protected-access
    monkeypatch.setattr(api, "_conversion", conversion)
    tf.function(lambda: pf.pfor(body, 4, fallback="error")).get_concrete_function()
    (root,) = made
    return sum(root.conversions.values())


def test_conversions_grow_linearly_with_the_nesting_depth(monkeypatch):
    counts = [_conversions(monkeypatch, _nested(d)) for d in range(1, 6)]
    steps = [b - a for a, b in zip(counts, counts[1:])]
    assert len(set(steps)) == 1, f"conversions by depth 1..5: {counts}"
    assert counts[-1] <= 5 * counts[0], f"conversions by depth 1..5: {counts}"


@pytest.mark.parametrize("depth", [1, 3])
def test_nested_loops_match_the_loop(depth):
    testing.assert_matches_loop(_nested(depth), 4, graph=True)
