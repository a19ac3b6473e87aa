"""The paper's benchmark workloads, each built for one size as a set of implementations.

A workload's ``build(size)`` returns a ``Cell``: zero-argument Python functions (the
driver wraps each in ``tf.function``), the work one call does (in the workload's unit),
which implementation the others are checked against, and the per-iteration body (for
counting the graph ops a vectorizer emits per body op). Implementation names are shared
across workloads so the tables and plots line up:

- ``hand-batched``: the batched code a user would write (the ideal). For per-example
  gradients there is no batched per-example code in general, so it is the ordinary
  batch gradient (one backward pass over the summed loss) — the floor on cost, checked
  against the sum of the loop's per-example gradients. For jacobians it is the input
  tiled once per output row and one backward pass of the diagonal's sum.
- ``loop``: one example at a time in a ``tf.while_loop`` (``tf.map_fn``; for jacobians
  ``GradientTape.jacobian(experimental_use_pfor=False)``).
- the built-in vectorizer: ``tf.vectorized_map`` (for jacobians
  ``GradientTape.jacobian(experimental_use_pfor=True)``).
- ``pfor``: ``pf.vectorized_map`` / ``pf.pfor`` / ``pf.per_example_gradients`` /
  ``pf.jacobian``, always with ``fallback="error"`` so a missing converter fails the
  cell instead of hiding a loop. A name ending in ``(XLA)`` runs with
  ``jit_compile=True``.
- ``jax.vmap (jit)``, only when JAX is installed: the same weights and inputs in JAX
  (jax_workloads.py), run as given rather than in ``tf.function`` (``Cell.raw``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Callable

import numpy as np
import tensorflow as tf

import pfor_core as pf
import dynamic_lstm as dlstm  # pylint: disable=import-error
from per_example_mnist import build_model as build_mnist  # pylint: disable=import-error

HAND, LOOP, BUILTIN, PFOR = "hand-batched", "loop", "tf.vectorized_map", "pfor"
JAC_LOOP, JAC_BUILTIN = "tape.jacobian(pfor=False)", "tape.jacobian(pfor=True)"
JAX = "jax.vmap (jit)"


@dataclasses.dataclass
class Cell:
    fns: dict                  # implementation name -> zero-argument function
    work: float                # units of work one call does
    body: Callable             # fn(i): one iteration, for counting body ops
    reference: str = LOOP      # the others' outputs are compared with this one's
    summed: tuple = ()         # implementations returning the sum over the reference's rows
    raw: set = dataclasses.field(default_factory=set)  # called as given, not in tf.function


@dataclasses.dataclass
class Workload:
    key: str
    title: str
    group: str                 # "inference", "gradients" or "jacobians": one figure each
    unit: str                  # throughput unit
    quick: tuple
    full: tuple
    build: Callable            # size -> Cell
    builtin: str = BUILTIN
    size_label: str = "batch size"


INFERENCE_FULL = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
GRADIENT_FULL = (8, 16, 32, 64, 128, 256)
JACOBIAN_FULL = (8, 16, 32, 64, 128)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _const(rng, shape, scale=1.0):
    return tf.constant(rng.normal(size=shape) * scale, tf.float32)


def _map_fn(body, n, dtypes=tf.float32):
    return lambda: tf.map_fn(body, tf.range(n), fn_output_signature=dtypes)


def has_jax() -> bool:
    return importlib.util.find_spec("jax") is not None


def _with_jax(cell, name, *arrays):
    """Adds the JAX column, ``jax_workloads.<name>(*arrays)``, when JAX is installed."""
    if not has_jax():
        return cell
    try:
        import jax_workloads  # pylint: disable=import-error,import-outside-toplevel
        cell.fns[JAX] = getattr(jax_workloads, name)(*arrays)
    except Exception as err:  # pylint: disable=broad-except  (a broken JAX fails its cells)
        cell.fns[JAX] = _raises(err)
    cell.raw.add(JAX)
    return cell


def _raises(err):
    def fn():
        raise err
    return fn


def _numpy(tensors):
    return [None if t is None else np.asarray(t) for t in tensors]


# --- auto-batching inference ---------------------------------------------------------

def linear(batch):
    rng = _rng()
    x, w = _const(rng, [batch, 768]), _const(rng, [768, 768], 768 ** -0.5)

    def row(xi):
        return tf.matmul(xi[None], w)[0]

    def body(i):
        return row(tf.gather(x, i))

    cell = Cell(fns={HAND: lambda: tf.matmul(x, w), LOOP: _map_fn(body, batch),
                     BUILTIN: lambda: tf.vectorized_map(row, x),
                     PFOR: lambda: pf.vectorized_map(row, x, fallback="error")},
                work=2 * 768 * 768 * batch / 1e9, body=body, reference=HAND)
    return _with_jax(cell, "linear", *_numpy([x, w]))


def mnist(batch):
    model = build_mnist()
    x = tf.random.stateless_normal([batch, 28, 28, 1], seed=[1, 2])

    def row(xi):
        return model(xi[None], training=False)[0]

    def body(i):
        return row(tf.gather(x, i))

    cell = Cell(fns={HAND: lambda: model(x, training=False), LOOP: _map_fn(body, batch),
                     BUILTIN: lambda: tf.vectorized_map(row, x),
                     PFOR: lambda: pf.vectorized_map(row, x, fallback="error")},
                work=batch, body=body, reference=HAND)
    return _with_jax(cell, "mnist", _numpy(model.trainable_variables), np.asarray(x))


def dynamic_lstm(batch):
    body, masked, _, tokens = dlstm.make(batch, 128, 256, 100)
    cell = Cell(fns={HAND: masked, LOOP: _map_fn(body, batch),
                     BUILTIN: lambda: tf.vectorized_map(body, tf.range(batch)),
                     PFOR: lambda: pf.pfor(body, batch, fallback="error")},
                work=tokens, body=body, reference=HAND)
    arrays = dlstm.data(batch, 128, 256, 100)  # make's arrays again: the same seed
    return _with_jax(cell, "dynamic_lstm", *arrays.values())


# --- per-example gradients -----------------------------------------------------------

def _xent(labels, logits):
    return tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))


def _gradient_cell(batch, model_fn, variables, x, y, keepdims):
    """Per-example gradients of ``_xent(y, model_fn(x))`` four ways."""
    def loss_fn(xi, yi):
        return _xent(yi if keepdims else yi[None], model_fn(xi if keepdims else xi[None]))

    def body(i):
        take = (lambda t: tf.gather(t, [i])) if keepdims else (lambda t: tf.gather(t, i))
        with tf.GradientTape() as tape:
            loss = loss_fn(take(x), take(y))
        return tape.gradient(loss, variables)

    def hand():
        with tf.GradientTape() as tape:
            loss = _xent(y, model_fn(x))
        return tape.gradient(loss, variables)

    return Cell(fns={HAND: hand,
                     LOOP: _map_fn(body, batch, [v.dtype for v in variables]),
                     BUILTIN: lambda: tf.vectorized_map(body, tf.range(batch)),
                     PFOR: lambda: pf.per_example_gradients(
                         loss_fn, variables, x, y, keepdims=keepdims, fallback="error")},
                work=batch, body=body, reference=LOOP, summed=(HAND,))


def mnist_gradients(batch):
    model = build_mnist()
    x = tf.random.stateless_normal([batch, 28, 28, 1], seed=[1, 2])
    y = tf.random.stateless_uniform([batch], [3, 4], 0, 10, tf.int32)
    cell = _gradient_cell(batch, lambda xb: model(xb, training=False),
                          model.trainable_variables, x, y, keepdims=True)
    return _with_jax(cell, "mnist_gradients", _numpy(model.trainable_variables),
                     *_numpy([x, y]))


def lstm_final_state(xs, weights, bias, state=256, steps=10):
    """h after ``steps`` LSTM steps over xs [k, steps, d], in a tf.while_loop."""
    zeros = tf.zeros([tf.shape(xs)[0], state])

    def step(t, h, c):
        h, c = dlstm.lstm_step(tf.gather(xs, t, axis=1), h, c, weights, bias)
        return t + 1, h, c

    return tf.while_loop(lambda t, h, c: t < steps, step, (0, zeros, zeros),
                         maximum_iterations=steps)[1]  # a bound XLA needs for gradients


def lstm_gradients(batch):
    rng = _rng(1)
    weights = tf.Variable(_const(rng, [128 + 256, 1024], (128 + 256) ** -0.5))
    bias = tf.Variable(tf.zeros([1024]))
    out = tf.Variable(_const(rng, [256, 10], 256 ** -0.5))
    x = _const(rng, [batch, 10, 128])
    y = tf.constant(rng.integers(0, 10, size=[batch]), tf.int32)
    cell = _gradient_cell(batch, lambda xb: lstm_final_state(xb, weights, bias) @ out,
                          [weights, bias, out], x, y, keepdims=False)
    return _with_jax(cell, "lstm_gradients", _numpy([weights, bias, out]), *_numpy([x, y]))


# --- jacobians -----------------------------------------------------------------------

def _jacobian_cell(rows, net, x):
    """d net(x)[k] / d x for k < rows; ``net`` maps a batch [k, ...] to [k, rows]."""
    def f(xi):
        return net(xi[None])[0]

    def body(i):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.gather(f(x), i)
        return tape.gradient(y, x)

    def hand():
        tiled = tf.tile(x[None], [rows] + [1] * x.shape.rank)
        with tf.GradientTape() as tape:
            tape.watch(tiled)
            diagonal = tf.reduce_sum(tf.linalg.diag_part(net(tiled)))
        return tape.gradient(diagonal, tiled)

    def tape_jacobian(use_pfor):
        def run():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = f(x)
            return tape.jacobian(y, x, experimental_use_pfor=use_pfor)
        return run

    pfor_fn = lambda: pf.jacobian(f, x, fallback="error")  # noqa: E731
    return Cell(fns={HAND: hand, JAC_LOOP: tape_jacobian(False),
                     JAC_BUILTIN: tape_jacobian(True), PFOR: pfor_fn,
                     JAC_BUILTIN + " (XLA)": tape_jacobian(True),
                     PFOR + " (XLA)": pfor_fn},
                work=rows, body=body, reference=JAC_LOOP)


def vgg_jacobian(rows):
    rng = _rng(2)
    shapes = [(3, 16), (16, 16), None, (16, 32), (32, 32), None]
    filters = [None if s is None else _const(rng, [3, 3, *s], (9 * s[0]) ** -0.5)
               for s in shapes]
    head = _const(rng, [12 * 12 * 32, 128], (12 * 12 * 32) ** -0.5)[:, :rows]

    def net(xb):
        h = xb
        for f in filters:
            h = (tf.nn.max_pool2d(h, 2, 2, "VALID") if f is None
                 else tf.nn.relu(tf.nn.conv2d(h, f, 1, "SAME")))
        return tf.reshape(h, [-1, 12 * 12 * 32]) @ head

    x = _const(rng, [48, 48, 3])
    return _with_jax(_jacobian_cell(rows, net, x), "vgg_jacobian", _numpy(filters),
                     *_numpy([head, x]))


def lstm_jacobian(rows):
    rng = _rng(3)
    weights = _const(rng, [128 + 256, 1024], (128 + 256) ** -0.5)
    bias = tf.zeros([1024])
    head = _const(rng, [256, 128], 256 ** -0.5)[:, :rows]
    x = _const(rng, [10, 128])
    cell = _jacobian_cell(rows, lambda xb: lstm_final_state(xb, weights, bias) @ head, x)
    return _with_jax(cell, "lstm_jacobian", *_numpy([weights, bias, head, x]))


def _with_xla(build):
    """Every workload also runs pfor and the hand-batched code under ``jit_compile=True``
    (XLA should never be a trap: compare each with its uncompiled self)."""
    def built(size):
        cell = build(size)
        for name in (HAND, PFOR):
            cell.fns.setdefault(name + " (XLA)", cell.fns[name])
        if HAND in cell.summed:
            cell.summed = tuple(cell.summed) + (HAND + " (XLA)",)
        return cell
    built.__name__ = build.__name__
    return built


WORKLOADS = (
    Workload("linear", "Linear projection 768x768", "inference", "GFLOP/s",
             (1, 8, 32), INFERENCE_FULL, _with_xla(linear)),
    Workload("mnist", "MNIST CNN inference", "inference", "images/s",
             (1, 8, 32), INFERENCE_FULL, _with_xla(mnist)),
    Workload("dynamic_lstm", "Dynamic LSTM (lengths 1..100)", "inference", "tokens/s",
             (1, 8, 32), INFERENCE_FULL, _with_xla(dynamic_lstm)),
    Workload("mnist_grads", "Per-example gradients, MNIST CNN", "gradients", "examples/s",
             (8, 32), GRADIENT_FULL, _with_xla(mnist_gradients)),
    Workload("lstm_grads", "Per-example gradients, LSTM (10 steps)", "gradients",
             "examples/s", (8, 32), GRADIENT_FULL, _with_xla(lstm_gradients)),
    Workload("vgg_jacobian", "Jacobian, VGG-style convnet 48x48", "jacobians", "rows/s",
             (8, 32), JACOBIAN_FULL, _with_xla(vgg_jacobian), builtin=JAC_BUILTIN,
             size_label="output size"),
    Workload("lstm_jacobian", "Jacobian, LSTM (10 steps)", "jacobians", "rows/s",
             (8, 32), JACOBIAN_FULL, _with_xla(lstm_jacobian), builtin=JAC_BUILTIN,
             size_label="output size"),
)
