"""BiasAdd and activations after a folded convolution or matmul run before its
unfolding reshape, so that grappler can fuse them as in hand-batched code."""

import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing


def _op(graph, op_type):
    return [op for op in graph.get_operations() if op.type == op_type]


@given(n=st.integers(0, 4), dense=st.booleans(), graph=st.booleans(),
       activation=st.sampled_from(["relu", "elu", "selu", "softplus"]))
@settings(max_examples=12)
def test_layer_of_one_example_with_a_leading_one(n, dense, graph, activation):
    x = tf.random.stateless_normal([max(n, 1), 6, 6, 2], seed=[n, 1])
    kernel = tf.random.stateless_normal([8, 3] if dense else [3, 3, 2, 3], seed=[2, 1])
    bias = tf.constant([0.1, -0.2, 0.3])
    act = getattr(tf.nn, activation)

    def body(i):
        xi = tf.gather(x, i)[None]  # one example, as a Keras model is called
        if dense:
            y = tf.matmul(tf.reshape(xi[:, :2, :2, :], [1, 8]), kernel)
        else:
            y = tf.nn.conv2d(xi, kernel, 1, "SAME")
        return act(tf.nn.bias_add(y, bias))

    testing.assert_matches_loop(body, n, graph=graph)


def test_conv_bias_relu_stay_adjacent():
    x = tf.random.stateless_normal([4, 6, 6, 2], seed=[0, 1])
    kernel = tf.random.stateless_normal([3, 3, 2, 3], seed=[2, 1])
    bias = tf.constant([0.1, -0.2, 0.3])

    def body(i):
        y = tf.nn.conv2d(tf.gather(x, i)[None], kernel, 1, "SAME")
        return tf.nn.relu(tf.nn.bias_add(y, bias))

    fn = tf.function(lambda: pf.pfor(body, 4, fallback="error"))
    graph = fn.get_concrete_function().graph
    (add,), (relu,) = _op(graph, "BiasAdd"), _op(graph, "Relu")
    assert add.inputs[0].op.type == "Conv2D"  # no reshape between: fusable
    assert relu.inputs[0].op is add


def test_pooling_gradient_reads_the_forward_ops_directly():
    """Folding a value that was just unfolded from that very shape gives back the
    folded tensor: MaxPoolGrad then reads MaxPool's output itself (no reshape pair),
    which oneDNN's rewrite of the pair needs."""
    x = tf.random.stateless_normal([4, 6, 6, 2], seed=[0, 1])
    kernel = tf.Variable(tf.random.stateless_normal([3, 3, 2, 3], seed=[2, 1]))

    def body(i):
        with tf.GradientTape() as tape:
            y = tf.nn.relu(tf.nn.conv2d(tf.gather(x, i)[None], kernel, 1, "SAME"))
            loss = tf.reduce_sum(tf.nn.max_pool2d(y, 2, 2, "VALID") ** 2)
        return tape.gradient(loss, kernel)

    testing.assert_matches_loop(body, 4)
    fn = tf.function(lambda: pf.pfor(body, 4, fallback="error"))
    (grad,) = _op(fn.get_concrete_function().graph, "MaxPoolGrad")
    assert [t.op.type for t in grad.inputs[:2]] == ["Relu", "MaxPool"]
