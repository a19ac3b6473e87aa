"""Activations and their gradient ops against the sequential loop, every invariance mix;
and activations, Softmax/LogSoftmax, BiasAdd of ragged values (x[:n_i]), over a varying last axis
(attention weights) and a fixed one, with gradients free of the padding's NaN (softmax
of an empty row)."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from pfor_core import testing

DTYPES = st.sampled_from([np.float32, np.float64])
SHAPES = st.lists(st.integers(0, 3), min_size=0, max_size=3)
ALPHAS = st.sampled_from([0.0, 0.01, 0.2, 1.0, 1.5, -0.3])


def activation(name, alpha):
    """The public function of each activation (some emit only math ops, e.g. gelu)."""
    return {
        "relu": tf.nn.relu, "relu6": tf.nn.relu6, "elu": tf.nn.elu, "selu": tf.nn.selu,
        "leaky_relu": lambda x: tf.nn.leaky_relu(x, alpha=alpha),
        "softplus": tf.nn.softplus, "softsign": tf.nn.softsign, "sigmoid": tf.sigmoid,
        "tanh": tf.tanh, "swish": tf.nn.silu, "softmax": tf.nn.softmax,
        "log_softmax": tf.nn.log_softmax,
        "softmax_axis0": lambda x: tf.nn.softmax(x, axis=0),
        "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),
        "gelu_erf": lambda x: tf.nn.gelu(x, approximate=False),
    }[name]


NAMES = st.sampled_from(["relu", "relu6", "elu", "selu", "leaky_relu", "softplus",
                         "softsign", "sigmoid", "tanh", "swish", "softmax", "log_softmax",
                         "softmax_axis0", "gelu_tanh", "gelu_erf"])
NEEDS_AXIS = {"softmax", "log_softmax", "softmax_axis0"}


def values(rng, shape, dtype):
    # Spread over both sides of relu6's and elu's kinks.
    return tf.constant((rng.standard_normal(shape) * 4).astype(dtype))


@given(name=NAMES, shape=SHAPES, dtype=DTYPES, alpha=ALPHAS, n=st.integers(0, 3),
       mode=st.sampled_from(testing.DRAWN_MODES), seed=st.integers(0, 99))
def test_activation(name, shape, dtype, alpha, n, mode, seed):
    if name in NEEDS_AXIS and not shape:
        shape = [2]
    x = values(np.random.default_rng(seed), [n] + shape, dtype)
    testing.check_op(activation(name, alpha), [x], stacked=[True], n=n, mode=mode)


def grad_op(name, alpha):
    """Raw gradient op (gradients, second operand) -> backprops."""
    raw = tf.raw_ops
    return {
        "ReluGrad": lambda g, f: raw.ReluGrad(gradients=g, features=f),
        "Relu6Grad": lambda g, f: raw.Relu6Grad(gradients=g, features=f),
        "EluGrad": lambda g, o: raw.EluGrad(gradients=g, outputs=o),
        "SeluGrad": lambda g, o: raw.SeluGrad(gradients=g, outputs=o),
        "LeakyReluGrad": lambda g, f: raw.LeakyReluGrad(gradients=g, features=f, alpha=alpha),
        "SoftplusGrad": lambda g, f: raw.SoftplusGrad(gradients=g, features=f),
        "SoftsignGrad": lambda g, f: raw.SoftsignGrad(gradients=g, features=f),
    }[name]


@given(name=st.sampled_from(["ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "LeakyReluGrad",
                             "SoftplusGrad", "SoftsignGrad"]),
       shape=SHAPES, dtype=DTYPES, alpha=ALPHAS, n=st.integers(0, 3),
       mode=st.sampled_from(testing.DRAWN_MODES), data=st.data())
def test_gradient_op(name, shape, dtype, alpha, n, mode, data):
    stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    args = [values(rng, ([n] if s else []) + shape, dtype) for s in stacked]
    testing.check_op(grad_op(name, alpha), args, stacked=stacked, n=n, mode=mode)


@given(name=NAMES, shape=st.lists(st.integers(1, 3), min_size=1, max_size=2), dtype=DTYPES,
       alpha=ALPHAS, n=st.integers(0, 3), data=st.data())
def test_gradients_through_activation(name, shape, dtype, alpha, n, data):
    """d sum(act(x_i * w)) / d(w, x_i) inside the body emits the *Grad ops."""
    x_stacked, w_stacked = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = values(rng, ([n] if x_stacked else []) + shape, dtype)
    w = values(rng, ([n] if w_stacked else []) + shape[-1:], dtype)
    act = activation(name, alpha)

    def loop_fn(i):
        xi = tf.gather(x, i) if x_stacked else x
        wi = tf.gather(w, i) if w_stacked else w
        with tf.GradientTape() as tape:
            tape.watch([xi, wi])
            y = act(xi * wi)
            # Squared, so softmax's gradient is not identically zero.
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [wi, xi])

    testing.assert_matches_loop(loop_fn, n, graph=data.draw(st.booleans()))


# Ragged values (pattern letter R), BiasAdd's among them. The tests keep the names and
# source they had in test_ragged_activations.py: hypothesis derandomizes by source, so
# they draw the same examples as before the move.

WIDTH, D = 5, 3


def _draw(data):
    n = data.draw(st.integers(0, 4), label="n")
    lengths = tf.constant(data.draw(testing.lengths_strategy(n, WIDTH), label="lengths"), tf.int32)
    size = n * WIDTH * D
    x = tf.constant(np.asarray(data.draw(st.lists(st.floats(-3, 3, width=32), min_size=size,
                                                  max_size=size), label="x"),
                               np.float32).reshape([n, WIDTH, D]))
    return n, lengths, x


BODIES = {
    "relu": tf.nn.relu, "elu": tf.nn.elu, "selu": tf.nn.selu, "softplus": tf.nn.softplus,
    "leaky_relu": tf.nn.leaky_relu, "relu6": tf.nn.relu6, "softsign": tf.nn.softsign,
    "softmax_fixed": tf.nn.softmax, "log_softmax_fixed": tf.nn.log_softmax,
    "softmax_varying": lambda r: tf.nn.softmax(tf.transpose(r)),
    "log_softmax_varying": lambda r: tf.nn.log_softmax(tf.matmul(r, r, transpose_b=True)),
    "bias_add": lambda r: tf.nn.bias_add(r, tf.constant([1.0, -2.0, 0.5])),
    # Summed over the rows: padding that an activation left nonzero would show.
    "elu_summed": lambda r: tf.reduce_sum(tf.nn.elu(r), 0),
    "selu_summed": lambda r: tf.reduce_sum(tf.nn.selu(r) + tf.nn.relu6(r), 0),
}


@settings(max_examples=30)
@given(data=st.data())
def test_activations(data):
    n, lengths, x = _draw(data)
    name = data.draw(st.sampled_from(sorted(BODIES)), label="body")
    testing.assert_matches_loop(lambda i: BODIES[name](testing.rows(x, lengths, i)), n, ragged=True,
                                modes=testing.draw_modes(data))


@settings(max_examples=12)
@given(data=st.data())
def test_gradients(data):
    n, lengths, x = _draw(data)
    name = data.draw(st.sampled_from(sorted(BODIES)), label="body")
    testing.assert_gradients_match(
             lambda i: tf.reduce_sum(BODIES[name](testing.rows(x, lengths, i)) ** 2), [x], n,
             chunked=data.draw(st.booleans(), label="chunked"))


def test_attention_gradients_with_empty_rows():
    x = tf.random.stateless_normal([3, WIDTH, D], seed=[1, 2])
    lengths = tf.constant([0, 3, WIDTH])

    def body(i):
        r = testing.rows(x, lengths, i)
        weights = tf.nn.softmax(tf.matmul(r, r, transpose_b=True))
        return tf.reduce_sum(tf.math.log(tf.matmul(weights, r) ** 2 + 1.0), 0)

    testing.assert_gradients_match(body, [x], 3)
