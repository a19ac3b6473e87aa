"""Gradients through tf.scan under pfor against the loop's: per-example gradients (the
gradient taken inside the body) and first-order gradients of the vectorized result,
for the forms of scan users write (an initializer per iteration, shared or none,
reversed, tuples of carries, elems shared by all iterations, a tf.cond per step), also
under XLA. No fallback."""

import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

N, T, D = 3, 4, 2
X = tf.random.stateless_normal([N, T, D], seed=[1, 2])
H0 = tf.random.stateless_normal([N, D], seed=[1, 5])
WEIGHTS = tf.range(1.0, N + 1.0)


def _scan(form, w, xi, hi, shared):
    """One iteration's scan of ``form`` over ``xi`` with weights ``w``."""
    def step(h, xt):
        return tf.tanh(tf.linalg.matvec(w, h) + xt)

    if form == "initializer":
        return tf.scan(step, xi, initializer=hi)
    if form == "no initializer":
        return tf.scan(lambda h, xt: h * tf.linalg.matvec(w, xt), xi)
    if form == "shared initializer":
        return tf.scan(step, xi, initializer=shared)
    if form == "reverse":
        return tf.scan(step, xi, initializer=hi, reverse=True)
    if form == "shared elems":
        return tf.scan(lambda h, xt: step(h, xt * hi), shared * tf.ones([T, 1]), initializer=hi)
    if form == "tuple":
        return tf.scan(lambda c, xt: (c[0] + xt, step(c[1], c[0])), xi, initializer=(hi, hi))[1]
    if form == "cond":
        return tf.scan(lambda h, xt: tf.cond(xt[0] > 0, lambda: step(h, xt),
                                             lambda: tf.sin(h) * xt), xi, initializer=hi)
    raise ValueError(form)


FORMS = ["initializer", "no initializer", "shared initializer", "reverse", "shared elems",
         "tuple", "cond"]


def _loss(form, w, xi, hi, shared):
    return tf.reduce_sum(_scan(form, w, xi, hi, shared) ** 2)


@pytest.mark.parametrize("form", FORMS)
def test_per_example_gradients(form):
    w = tf.Variable(tf.random.stateless_normal([D, D], seed=[1, 3]) * 0.5)

    def body(i):
        xi, hi = tf.gather(X, i), tf.gather(H0, i)
        with tf.GradientTape() as tape:
            tape.watch([xi, hi])
            value = _loss(form, w, xi, hi, H0[0])
        return tape.gradient(value, [w, xi, hi], unconnected_gradients="zero")

    testing.assert_matches_loop(body, N, graph=True)


@pytest.mark.parametrize("form", FORMS)
def test_first_order_gradients_of_the_vectorized_scan(form):
    """The gradient of a weighted sum of pf.pfor's rows, with respect to the weights
    (a variable), the elems and the initializers (tensors passed to the function)."""
    w = tf.Variable(tf.random.stateless_normal([D, D], seed=[1, 3]) * 0.5)

    def gradients(vectorized, x, h0):
        with tf.GradientTape() as tape:
            tape.watch([x, h0])
            if vectorized:
                rows = pf.pfor(lambda i: _loss(form, w, tf.gather(x, i), tf.gather(h0, i),
                                               h0[0]), N, fallback="error")
            else:
                rows = tf.stack([_loss(form, w, x[i], h0[i], h0[0]) for i in range(N)])
            total = tf.reduce_sum(rows * WEIGHTS)
        return tape.gradient(total, [w, x, h0], unconnected_gradients="zero")

    expected = tf.function(lambda x, h0: gradients(False, x, h0))(X, H0)
    got = tf.function(lambda x, h0: gradients(True, x, h0))(X, H0)
    testing.assert_same_results(got, expected)


@pytest.mark.parametrize("entry", ["pfor", "vectorized_map"])
def test_gradients_under_xla(entry):
    """The converted loop keeps scan's maximum_iterations: XLA sizes the gradient's
    accumulators by it."""
    w = tf.Variable(tf.random.stateless_normal([D, D], seed=[1, 3]) * 0.5)

    def loss(xi):
        return _loss("initializer", w, xi, tf.ones([D]), None)

    def gradient(vectorized):
        with tf.GradientTape() as tape:
            if not vectorized:
                rows = tf.stack([loss(X[i]) for i in range(N)])
            elif entry == "vectorized_map":
                rows = pf.vectorized_map(loss, X, fallback="error")
            else:
                rows = pf.pfor(lambda i: loss(tf.gather(X, i)), N, fallback="error")
            total = tf.reduce_sum(rows * WEIGHTS)
        return tape.gradient(total, w)

    expected = gradient(False)
    got = tf.function(lambda: gradient(True), jit_compile=True)()
    testing.assert_allclose(got, expected)
