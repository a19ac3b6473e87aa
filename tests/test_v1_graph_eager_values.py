"""Issue 33, item 5: eager values used while a ``tf.compat.v1`` graph is built.

Legacy graph-mode code under TF2 meets tensors and variables created eagerly, e.g. a
Keras model built before ``with graph.as_default():``. TensorFlow itself refuses them
there: the model's own call, ``tf.vectorized_map``, TensorFlow's pfor and
``GradientTape.jacobian`` raise "Attempting to capture an EagerTensor without building
a function", because a Session runs the graph on its own devices, where an eager
variable cannot be reached. pfor does the same for variables, with an error that names
the variable and says what to do, and gives an eager tensor (immutable) to the graph as
a constant of its value. The remedy the error names (the model built inside the
graph) vectorizes, reading the variables live across session runs.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tensorflow.python.ops.parallel_for import control_flow_ops as tf_pfor

import pfor_core as pf
from pfor_core import eager_values

REFUSED = eager_values.TF_REFUSAL
R = np.random.default_rng(7)


def _dense(keras):
    model = keras.Sequential([keras.layers.Dense(4, activation="tanh", input_shape=(3,)),
                              keras.layers.Dense(1)])
    return model, R.normal(size=(5, 3)).astype(np.float32)


def _lstm(keras):
    model = keras.Sequential([keras.layers.LSTM(3, input_shape=(4, 2)),
                              keras.layers.Dense(1)])
    return model, R.normal(size=(5, 4, 2)).astype(np.float32)


def _conv(keras):
    model = keras.Sequential([keras.layers.Conv2D(2, 3, input_shape=(6, 6, 1)),
                              keras.layers.Flatten(), keras.layers.Dense(1)])
    return model, R.normal(size=(5, 6, 6, 1)).astype(np.float32)


MODELS = {"dense": _dense, "lstm": _lstm, "conv2d": _conv}
Y = R.normal(size=(5, 1)).astype(np.float32)


def _loss(model):
    return lambda x, y: tf.reduce_mean((model(x) - y) ** 2)


def _tape_gradients(model, xs, ys, i):
    """One example's gradients the way TensorFlow's users write them."""
    with tf.GradientTape() as tape:
        loss = _loss(model)(xs[i:i + 1], ys[i:i + 1])
    return tape.gradient(loss, model.trainable_variables)


# -- a model built eagerly, differentiated in a v1 graph ---------------------------------
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_eager_keras_model_in_a_v1_graph_is_refused_by_tensorflow_and_named_by_pfor(kind):
    model, x = MODELS[kind](tf_keras)
    model(x)  # the variables are created now, eagerly
    with tf.Graph().as_default():
        xs, ys = tf.constant(x), tf.constant(Y)
        with pytest.raises(RuntimeError, match=REFUSED):
            tf.vectorized_map(lambda i: _tape_gradients(model, xs, ys, i), tf.range(5))
        with pytest.raises(RuntimeError, match=REFUSED):
            tf_pfor.pfor(lambda i: _tape_gradients(model, xs, ys, i), 5)
        with pytest.raises(ValueError, match=r"uses the variable '[^']+' \(float32, shape "
                           r"\[.*created eagerly.*Create the variables inside the graph"):
            pf.per_example_gradients(_loss(model), model.trainable_variables, xs, ys,
                                     keepdims=True, fallback="error")


def test_eager_keras_3_model_in_a_v1_graph_names_its_variable():
    import keras

    model = keras.Sequential([keras.layers.Input((3,)), keras.layers.Dense(2)])
    model(np.ones([1, 3], np.float32))
    kernel = model.trainable_variables[0]
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=f"the variable '{kernel.path}"):
            pf.per_example_gradients(lambda x: tf.reduce_sum(model(x)),
                                     model.trainable_variables, tf.ones([4, 3]),
                                     keepdims=True)


# -- the remedy: the model built inside the graph ----------------------------------------
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_keras_model_built_in_the_v1_graph_gives_per_example_gradients(kind):
    graph = tf.Graph()
    with graph.as_default():
        model, x = MODELS[kind](tf_keras)
        xs, ys = tf.constant(x), tf.constant(Y)
        got = pf.per_example_gradients(_loss(model), model.trainable_variables, xs, ys,
                                       keepdims=True, fallback="error")
        loop = [tf.stack(g) for g in zip(*[_tape_gradients(model, xs, ys, i)
                                           for i in range(5)])]
        wanted = [loop]
        if kind != "lstm":  # TensorFlow's vectorizer fails on the LSTM's gradient
            wanted.append(tf.vectorized_map(lambda i: _tape_gradients(model, xs, ys, i),
                                            tf.range(5)))
        step = tf.group([v.assign_add(0.1 * tf.ones_like(v))
                         for v in model.trainable_variables])
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            before = session.run([got, wanted])
            session.run(step)  # the variables change between runs: both read them live
            after = session.run([got, wanted])
    for grads, references in (before, after):
        for reference in references:
            for g, r in zip(grads, reference):
                np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
    assert any(not np.allclose(b, a) for b, a in zip(before[0], after[0]))


def test_pfor_and_jacobian_read_a_graph_variable_live_across_session_runs():
    graph = tf.Graph()
    with graph.as_default():
        v = tf.Variable([1.0, 2.0, 3.0])
        rows = pf.pfor(lambda i: v[i] * v, 3, fallback="error")
        jac = pf.jacobian(lambda x: x * v, tf.constant([4.0, 5.0, 6.0]), fallback="error")
        loop_rows = tf.stack([v[i] * v for i in range(3)])
        loop_jac = tf.linalg.diag(v.read_value())
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(v.initializer)
            first = session.run([rows, loop_rows, jac, loop_jac])
            session.run(v.assign([-1.0, 0.5, 2.0]))
            second = session.run([rows, loop_rows, jac, loop_jac])
    for got_rows, want_rows, got_jac, want_jac in (first, second):
        np.testing.assert_allclose(got_rows, want_rows)
        np.testing.assert_allclose(got_jac, want_jac)
    assert not np.allclose(first[0], second[0])


# -- pf.pfor / pf.jacobian on an eager variable ------------------------------------------
def test_pfor_and_jacobian_on_an_eager_variable_in_a_v1_graph_are_clear_errors():
    v = tf.Variable([1.0, 2.0, 3.0], name="weights")
    with tf.Graph().as_default():
        x = tf.constant([4.0, 5.0, 6.0])
        # TensorFlow's own: the same loop and jacobian refuse the eager variable.
        with pytest.raises(RuntimeError, match=REFUSED):
            tf.vectorized_map(lambda i: tf.gather(v, i) * v, tf.range(3))
        with pytest.raises(RuntimeError, match=REFUSED):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = x * v
            tape.jacobian(y, x)
        with pytest.raises(ValueError, match=r"loop_fn \(its op '[^']+'\) "
                           r"uses the variable 'weights:0' \(float32, shape \[3\]\)"):
            pf.pfor(lambda i: tf.gather(v, i) * v, 3, fallback="error")
        with pytest.raises(ValueError, match=r"x holds the variable 'weights:0'.*Session "
                           "cannot reach an eager variable"):
            pf.jacobian(lambda w: w * w, v, fallback="error")
        with pytest.raises(ValueError, match=f"f uses an eager value.*{REFUSED}"):
            pf.jacobian(lambda w: w * v, x, fallback="error")
        with pytest.raises(ValueError, match="fn uses an eager value"):
            pf.vmap(lambda w: w * v, fallback="error")(x)
        with pytest.raises(ValueError, match="args holds the variable 'weights:0'"):
            pf.vmap(lambda w: w * 2.0, fallback="error")(v)


# -- eager tensors: constants of the graph -----------------------------------------------
SMALL = tf.constant([[1.0, -2.0], [3.0, 0.5], [-1.5, 2.5]])  # a function graph folds it
LARGE = tf.constant(R.normal(size=(3, 200)).astype(np.float32))  # it captures this one


@pytest.mark.parametrize("eager", [SMALL, LARGE], ids=["small", "large"])
def test_eager_tensors_used_in_a_v1_graph_are_constants_of_their_value(eager):
    first = eager[0]  # eager too
    graph = tf.Graph()
    with graph.as_default():
        const = tf.constant(eager.numpy())  # the reference loops read the same value
        w = tf.Variable(tf.ones([eager.shape[1]]))
        got = [
            pf.pfor(lambda i: tf.gather(eager, i) * tf.reduce_sum(eager), 3,
                    fallback="error"),
            pf.vectorized_map(lambda row: tf.tanh(row) * w, eager, fallback="error"),
            pf.vmap(lambda row: row * w, fallback="error")(eager),
            pf.jacobian(lambda x: tf.sin(x), first, fallback="error"),
            pf.per_example_gradients(lambda row: tf.reduce_sum(w * row) ** 2, [w], eager,
                                     fallback="error")[0],
        ]
        want = [
            tf.stack([const[i] * tf.reduce_sum(const) for i in range(3)]),
            tf.stack([tf.tanh(const[i]) * w for i in range(3)]),
            tf.stack([const[i] * w for i in range(3)]),
            tf.linalg.diag(tf.cos(const[0])),
            tf.stack([2 * tf.reduce_sum(w * const[i]) * const[i] for i in range(3)]),
        ]
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(w.initializer)
            got, want = session.run([got, want])
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_an_eager_variant_tensor_in_a_v1_graph_is_a_clear_error():
    items = tf.raw_ops.TensorListFromTensor(tensor=tf.ones([3, 2]), element_shape=[2])
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="eager variant tensor.*Create it inside"):
            pf.pfor(lambda i: tf.raw_ops.TensorListGetItem(
                input_handle=items, index=i, element_shape=[2], element_dtype=tf.float32),
                3)
