"""Sums of thin matrix products contracted once (products.py): per-example weight
gradients of unrolled recurrences, against the loop, with the graph checked to hold
one contraction and no per-step ``[n, p, q]`` product."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing


def _graph_ops(fn):
    return tf.function(fn).get_concrete_function().graph.get_operations()


def _products(ops, p, q):
    """The ops that output a per-iteration ``[p, q]`` (rank 3, ``[n, p, q]``)."""
    return [op for op in ops for out in op.outputs if op.type != "Identity"
            and out.shape.rank == 3 and out.shape[1:] == [p, q]]


def _steps(rng, n, steps, k, p, q, stacked, transposes):
    """Operands of ``steps`` thin products a_t^T b_t, each stored as its flags say."""
    operands = []
    for t in range(steps):
        ta, tb = transposes[t]
        a = rng.standard_normal(([n] if stacked[t][0] else []) + ([k, p] if ta else [p, k]))
        b = rng.standard_normal(([n] if stacked[t][1] else []) + ([q, k] if tb else [k, q]))
        operands += [tf.constant(a, tf.float32), tf.constant(b, tf.float32)]
    return operands


@settings(max_examples=25)
@given(st.data())
def test_sum_of_thin_products_matches_loop(data):
    steps = data.draw(st.integers(1, 4), label="steps")
    k = data.draw(st.sampled_from([0, 1, 2]), label="k")
    p, q = data.draw(st.sampled_from([3, 5])), data.draw(st.sampled_from([4, 6]))
    transposes = [(data.draw(st.booleans()), data.draw(st.booleans())) for _ in range(steps)]
    stacked = [data.draw(st.sampled_from([(True, True), (True, False), (False, True)]))
               for _ in range(steps)]
    n = data.draw(st.sampled_from([0, 1, 3]), label="n")
    add = data.draw(st.sampled_from(["add_n", "add"]), label="add")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    operands = _steps(rng, n, steps, k, p, q, stacked, transposes)

    def total(*ops):
        terms = [tf.linalg.matmul(ops[2 * t], ops[2 * t + 1], transpose_a=transposes[t][0],
                                  transpose_b=transposes[t][1]) for t in range(steps)]
        if add == "add_n" and steps > 1:
            return tf.math.add_n(terms)
        out = terms[0]
        for term in terms[1:]:
            out = out + term
        return out

    flags = [s for pair in stacked for s in pair]
    got = testing.check(data, total, operands, stacked=flags, n=n)
    testing.assert_rows(got, n)


def test_one_contraction_for_all_steps():
    """T thin products summed: one batched matmul over the T steps, no [n, p, q] term."""
    rng = np.random.default_rng(0)
    n, steps, p, q = 4, 5, 16, 32
    a = tf.constant(rng.standard_normal([n, steps, 1, p]), tf.float32)
    b = tf.constant(rng.standard_normal([n, steps, 1, q]), tf.float32)

    def body(i):
        return tf.math.add_n([tf.matmul(a[i, t], b[i, t], transpose_a=True)
                              for t in range(steps)])

    got = testing.assert_matches_loop(body, n)
    testing.assert_rows(got, n)
    made = _products(_graph_ops(lambda: pf.pfor(body, n, fallback="error")), p, q)
    assert [op.type for op in made] == ["BatchMatMulV2"], [op.type for op in made]
    assert made[0].inputs[0].shape[1] == steps  # contracted over every step at once


@pytest.mark.parametrize("stacked_side", ["a", "b"])
def test_a_thin_product_with_an_invariant_operand_read_alone_is_one_2d_matmul(stacked_side):
    """An input gradient (cotangent times an invariant weight, thin contraction) read by
    no add of products: one 2-D MatMul, no n copies of the weight for a batched one."""
    rng = np.random.default_rng(5)
    n, k, p, q = 4, 8, 64, 96
    stacked = tf.constant(rng.standard_normal([n, p, k] if stacked_side == "a" else [n, q, k]),
                          tf.float32)
    weight = tf.constant(rng.standard_normal([q, k] if stacked_side == "a" else [p, k]),
                         tf.float32)

    def body(i):
        if stacked_side == "a":
            return tf.tanh(tf.matmul(stacked[i], weight, transpose_b=True))
        return tf.tanh(tf.matmul(weight, stacked[i], transpose_b=True))

    testing.assert_matches_loop(body, n, fallback="error", rtol=1e-4, atol=1e-4)
    types = [op.type for op in _graph_ops(lambda: pf.pfor(body, n, fallback="error"))]
    assert "BroadcastTo" not in types and "BatchMatMulV2" not in types, types
    assert types.count("MatMul") == 1, types


def _thin_operands(seed):
    """a [3, 1, 4], b [3, 1, 6] (each row a thin product's operands) and c [3, 4, 6]."""
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.standard_normal(shape), tf.float32)
            for shape in ([3, 1, 4], [3, 1, 6], [3, 4, 6])]


def test_read_by_other_ops_and_twice():
    """A sum of products read by an op that is no add, and by two readers, converts."""
    a, b, c = _thin_operands(1)

    def body(i):
        product = tf.matmul(a[i], b[i], transpose_a=True)
        total = product + tf.matmul(a[i] * 2., b[i], transpose_a=True)
        return tf.tanh(total) + c[i], total + product, tf.reduce_sum(product)

    got = testing.assert_matches_loop(body, 3, graph=True)
    testing.assert_rows(got[0], 3)


def test_sum_with_a_term_that_is_no_product():
    """An add of products and another stacked value: the products are materialized."""
    a, b, c = _thin_operands(2)

    def body(i):
        return tf.math.add_n([tf.matmul(a[i], b[i], transpose_a=True),
                              tf.matmul(a[i] + 1., b[i], transpose_a=True), c[i]])

    got = testing.assert_matches_loop(body, 3, graph=True)
    testing.assert_rows(got, 3)


def test_complex_and_wide_products_keep_the_batch_matmul():
    rng = np.random.default_rng(3)
    z = tf.complex(tf.constant(rng.standard_normal([2, 1, 3]), tf.float32),
                   tf.constant(rng.standard_normal([2, 1, 3]), tf.float32))
    w = tf.constant(rng.standard_normal([2, 8, 3]), tf.float32)

    def body(i):
        thin = tf.matmul(z[i], z[i], transpose_a=True) + tf.matmul(z[i], z[i], transpose_a=True)
        wide = tf.matmul(w[i], w[i], transpose_a=True)  # K = 8 > p q / (p + q)
        return thin, wide + wide

    got = testing.assert_matches_loop(body, 2)
    testing.assert_rows(got[1], 2)


def _unrolled_lstm(steps, state=8, dim=4, classes=3):
    rng = np.random.default_rng(4)
    kernel = tf.Variable(rng.standard_normal([dim, 4 * state]).astype(np.float32) * 0.3)
    recurrent = tf.Variable(rng.standard_normal([state, 4 * state]).astype(np.float32) * 0.3)
    head = tf.Variable(rng.standard_normal([state, classes]).astype(np.float32) * 0.3)

    def loss(x, y):
        h = c = tf.zeros([1, state])
        for t in range(steps):
            z = tf.matmul(x[:, t], kernel) + tf.matmul(h, recurrent)
            i, f, g, o = tf.split(z, 4, axis=-1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
        logits = h @ head
        return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))

    return loss, [kernel, recurrent, head]


def _loop_gradients(loss, variables, x, y):
    rows = []
    for j in range(x.shape[0]):
        with tf.GradientTape() as tape:
            value = loss(x[j:j + 1], y[j:j + 1])
        rows.append(tape.gradient(value, variables))
    return [tf.stack(g) for g in zip(*rows)]


def test_per_example_gradients_of_an_unrolled_lstm():
    """The unrolled recurrence's weight gradients: equal to the loop, each weight's
    gradient one contraction over the steps (no per-step [n, p, q] product)."""
    steps, n = 5, 6
    loss, variables = _unrolled_lstm(steps)
    rng = np.random.default_rng(5)
    x = tf.constant(rng.standard_normal([n, steps, 4]), tf.float32)
    y = tf.constant(rng.integers(0, 3, size=[n]), tf.int32)
    run = lambda: pf.per_example_gradients(loss, variables, x, y, keepdims=True,  # noqa: E731
                                           fallback="error")
    want = _loop_gradients(loss, variables, x, y)
    testing.assert_same_results(run(), want)
    testing.assert_same_results(tf.function(run, jit_compile=True)(), want, where=" (XLA)")
    made = _products(_graph_ops(run), 4, 32)
    assert [op.type for op in made] == ["BatchMatMulV2"], [op.type for op in made]
    assert made[0].inputs[0].shape[1] == steps
