"""ConcatV2, Pack, Pad and PadV2 of ragged values (x[:n_i]) against the sequential
loop: along the varying dimension and others, with stacked and invariant operands,
padding by invariant and per-iteration amounts (to a fixed size), gradients."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing

WIDTH, D = 4, 2


def _values(data, shape):
    size = int(np.prod(shape))
    return tf.constant(np.asarray(data.draw(st.lists(
        st.floats(-2, 2, width=32), min_size=size, max_size=size), label="values"),
        np.float32).reshape(shape))


def _lengths(data, n):
    return tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"), tf.int32)


# r, q: ragged [L_i, D] and [M_i, D]; r2: ragged like r (same lengths); s: stacked [2, D];
# u: invariant [1, D].
BODIES = {
    "concat_ragged_axis": lambda r, r2, q, s, u: tf.concat([r, q], 0),
    "concat_mixed": lambda r, r2, q, s, u: tf.concat([u, r, s, q], 0),
    "concat_invariant_first": lambda r, r2, q, s, u: tf.concat([u, r], 0),
    "concat_stacked_last": lambda r, r2, q, s, u: tf.concat([r, s], 0),
    "concat_fixed_axis": lambda r, r2, q, s, u: tf.concat([r, r2, r], 1),
    "stack": lambda r, r2, q, s, u: tf.stack([r, r2], 1),
    "stack_front": lambda r, r2, q, s, u: tf.stack([r, r2, r]),
    "pad": lambda r, r2, q, s, u: tf.pad(r, [[1, 2], [0, 1]]),
    "pad_constant": lambda r, r2, q, s, u: tf.pad(r, [[0, 1], [2, 0]], constant_values=3.0),
    "pad_to_size": lambda r, r2, q, s, u: tf.pad(r, [[0, WIDTH + 1 - tf.shape(r)[0]], [0, 0]]),
    "pad_stacked": lambda r, r2, q, s, u: tf.pad(
        r, tf.stack([[tf.shape(q)[0], 1], [1, 0]]), constant_values=-1.0),
}
FIXED = {"pad_to_size"}


@pytest.mark.parametrize("name", sorted(BODIES))
@settings(max_examples=3)
@given(data=st.data())
def test_joining(name, data):
    n = data.draw(st.integers(0, 4), label="n")
    a, b = _lengths(data, n), _lengths(data, n)
    x, y, z = (_values(data, [n, WIDTH, D]) for _ in range(3))
    s, u = _values(data, [n, 2, D]), _values(data, [1, D])
    body = BODIES[name]
    testing.assert_matches_loop(
             lambda i: body(testing.rows(x, a, i), testing.rows(y, a, i), testing.rows(z, b, i), tf.gather(s, i), u),
             n, ragged=name not in FIXED, modes=testing.draw_modes(data))


def test_concat_of_other_sizes_along_a_fixed_axis_fails_like_the_loop():
    x = tf.ones([3, WIDTH, D])
    a, b = tf.constant([2, 3, 0]), tf.constant([2, 1, 0])
    testing.assert_fails_like_loop(lambda i: tf.concat([testing.rows(x, a, i), testing.rows(x, b, i)], 1),
                                   3, match="differ")


def test_concat_of_a_varying_dimension_with_a_fixed_one_falls_back():
    x, s = tf.ones([2, WIDTH, D]), tf.ones([2, 3, D])
    n = tf.constant([3, 3])
    report = pf.explain(lambda i: tf.concat([testing.rows(x, n, i), tf.gather(s, i)], 1), 2)
    assert [r.op_type for r in report.fallbacks] == ["ConcatV2"]


@settings(max_examples=10)
@given(data=st.data())
def test_gradients(data):
    n = data.draw(st.integers(0, 4), label="n")
    a, b = _lengths(data, n), _lengths(data, n)
    x, z = _values(data, [n, WIDTH, D]), _values(data, [n, WIDTH, D])
    s, u = _values(data, [n, 2, D]), _values(data, [1, D])
    name = data.draw(st.sampled_from(["concat_mixed", "stack", "pad_constant", "pad_stacked",
                                      "concat_fixed_axis"]), label="body")
    body = BODIES[name]
    testing.assert_gradients_match(
             lambda i: tf.reduce_sum(tf.sqrt(tf.abs(body(testing.rows(x, a, i), testing.rows(x, a, i),
                                                         testing.rows(z, b, i), tf.gather(s, i), u))
                                             + 1.0), 0),
             [x, z, s, u], n, chunked=data.draw(st.booleans(), label="chunked"))
