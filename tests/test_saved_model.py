"""Converted functions survive ``tf.saved_model.save`` / ``tf.saved_model.load``: a
``tf.Module`` whose ``tf.function`` (with an input signature) calls pf.pfor, pf.vmap,
pf.jacobian, a body with a ``tf.while_loop`` of per-example trip counts, or a
``tf.cond``. The reloaded function gives what the original gives and what the
sequential loop gives."""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import testing

X_SPEC = tf.TensorSpec([None, 3], tf.float32)


def _weights():
    return tf.random.stateless_normal([3, 2], seed=[3, 1])


class _Pfor(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(_weights())

    @tf.function(input_signature=[X_SPEC])
    def __call__(self, x):
        return pf.pfor(lambda i: tf.tanh(tf.linalg.matvec(self.w, tf.gather(x, i),
                                                          transpose_a=True)),
                       tf.shape(x)[0], fallback="error")

    def reference(self, x):
        return [tf.tanh(tf.linalg.matvec(self.w, row, transpose_a=True)) for row in x]


class _Vmap(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(_weights())
        self.f = pf.vmap(lambda row, w: tf.nn.softplus(tf.linalg.matvec(w, row, transpose_a=True)),
                         in_axes=(0, None), fallback="error")

    @tf.function(input_signature=[X_SPEC])
    def __call__(self, x):
        return self.f(x, self.w)

    def reference(self, x):
        return [tf.nn.softplus(tf.linalg.matvec(self.w, row, transpose_a=True)) for row in x]


class _Jacobian(tf.Module):
    """The jacobian of a tiny MLP's output w.r.t. one input row."""

    def __init__(self):
        super().__init__()
        self.w = tf.Variable(_weights())

    def mlp(self, v):
        return tf.tanh(tf.linalg.matvec(self.w, v, transpose_a=True))

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def __call__(self, v):
        return pf.jacobian(self.mlp, v, fallback="error")

    def reference(self, v):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(v)
            y = self.mlp(v)
        return tape.jacobian(y, v, experimental_use_pfor=False)


def _count_up(row):
    """A while loop whose trip count depends on the example: row[0] steps of doubling."""
    steps = tf.cast(tf.abs(row[0]) * 2.0, tf.int32)
    _, out = tf.while_loop(lambda k, acc: k < steps, lambda k, acc: (k + 1, acc * 1.5 + row),
                           (tf.constant(0), row))
    return out


class _WhileLoop(tf.Module):
    @tf.function(input_signature=[X_SPEC])
    def __call__(self, x):
        return pf.pfor(lambda i: _count_up(tf.gather(x, i)), tf.shape(x)[0], fallback="error")

    def reference(self, x):
        return [_count_up(row) for row in x]


def _branch(row):
    return tf.cond(tf.reduce_sum(row) > 0, lambda: tf.exp(-row), lambda: row * row)


class _Cond(tf.Module):
    @tf.function(input_signature=[X_SPEC])
    def __call__(self, x):
        return pf.pfor(lambda i: _branch(tf.gather(x, i)), tf.shape(x)[0], fallback="error")

    def reference(self, x):
        return [_branch(row) for row in x]


MODULES = {"pfor": _Pfor, "vmap": _Vmap, "jacobian": _Jacobian, "while_loop": _WhileLoop,
           "cond": _Cond}


def _inputs(kind):
    if kind == "jacobian":
        return [tf.constant([0.5, -1.0, 2.0])]
    x = tf.random.stateless_normal([5, 3], seed=[7, 2]) * 2.0
    return [x, x[:2], x[:0]]  # other batch sizes, including 0, through the same signature


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_saved_and_reloaded(kind, tmp_path):
    module = MODULES[kind]()
    path = str(tmp_path / kind)
    tf.saved_model.save(module, path)
    loaded = tf.saved_model.load(path)
    for x in _inputs(kind):
        original = module(x)
        reloaded = loaded(x)
        testing.assert_allclose(reloaded, original, rtol=1e-6, atol=1e-6)
        expected = module.reference(x)
        if isinstance(expected, list):  # one row per example; none for an empty batch
            expected = tf.stack(expected) if expected else tf.zeros_like(original)
        testing.assert_allclose(reloaded, expected, rtol=1e-5, atol=1e-5)
        assert reloaded.shape == original.shape


def test_saved_model_has_no_fallback_loop(tmp_path):
    """The saved graph holds the vectorized ops, not a sequential while loop over the
    batch (the body has no loop of its own, so no While op may appear)."""
    module = _Pfor()
    tf.saved_model.save(module, str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    graph = loaded.__call__.get_concrete_function(X_SPEC).graph
    types = {op.type for op in graph.get_operations()}
    for f in graph.as_graph_def().library.function:
        types |= {node.op for node in f.node_def}
    assert not types & {"While", "StatelessWhile"}, sorted(types)
    assert np.isfinite(loaded(tf.ones([2, 3])).numpy()).all()
