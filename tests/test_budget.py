"""Memory-bounded vectorization: ``memory_budget`` / ``parallel_iterations="auto"`` pick
a chunk size whose measured peak fits the budget, with the same results as one piece."""

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import api, budget, testing


def _peak(fn):
    fn()  # warm up: conversion and constants
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    out = fn()
    return tf.config.experimental.get_memory_info("CPU:0")["peak"] - before, out


@pytest.fixture
def chosen(monkeypatch):
    sizes = []
    real = api._fit  # pylint: disable=protected-access

    def spy(*args, **kwargs):
        found = real(*args, **kwargs)  # (chunk size, profile)
        sizes.append(found[0])
        return found

    monkeypatch.setattr(api, "_fit", spy)
    return sizes


def _outer_products():
    x = tf.constant(np.random.default_rng(0).normal(size=[256, 128]), tf.float32)
    w = tf.constant(np.random.default_rng(1).normal(size=[128, 128]), tf.float32)
    return lambda i: tf.reduce_sum(tf.tanh(tf.gather(x, i)[:, None] * w) @ w, 0)


@pytest.mark.parametrize("mib", [4, 8])
def test_budget_bounds_the_measured_peak(mib, chosen):
    body = _outer_products()  # 64 KiB a row per temporary, 32 MiB in one piece
    whole, reference = _peak(lambda: pf.pfor(body, 256, fallback="error"))
    assert whole > 2 * (mib << 20)
    peak, got = _peak(lambda: pf.pfor(body, 256, fallback="error", memory_budget=mib << 20))
    assert 1 < chosen[-1] < 256
    assert peak <= 1.1 * (mib << 20), (peak, chosen)
    testing.assert_allclose(got, reference, rtol=0, atol=0)


def test_auto_without_a_budget_fits_half_the_memory(chosen):
    body = _outer_products()
    got = pf.pfor(body, 256, fallback="error", parallel_iterations="auto")
    assert chosen[-1] >= 256  # 32 MiB fits easily: one piece
    testing.assert_allclose(got, pf.pfor(body, 256, fallback="error"), rtol=0, atol=0)
    assert budget.default_budget() > 0


def _unknown_shape(value):
    """A variable whose shape no graph knows: its reads have unknown dimensions."""
    return tf.Variable(value, shape=tf.TensorShape([None, None]))


def test_shapes_unknown_until_run_are_measured_eagerly(chosen):
    y = _unknown_shape(tf.random.normal([64, 200]))
    body = lambda i: tf.reduce_sum(tf.tanh(tf.gather(y, i)[:, None] * tf.ones([1, 128])), 0)
    peak, got = _peak(lambda: pf.pfor(body, 64, fallback="error", memory_budget=2 << 20))
    assert 1 < chosen[-1] < 64
    assert peak <= 1.5 * (2 << 20)
    testing.assert_allclose(got, pf.pfor(body, 64, fallback="error"), rtol=0, atol=0)


def test_unknown_shapes_in_a_graph_or_with_effects_are_clear_errors():
    y = tf.random.normal([8, 30])
    unknown = _unknown_shape(y)
    counter = tf.Variable(0.)

    @tf.function(input_signature=[tf.TensorSpec([None, None])])
    def in_graph(v):
        return pf.pfor(lambda i: tf.reduce_sum(tf.gather(v, i)), 8, memory_budget=1 << 20)

    with pytest.raises(ValueError, match="not all static.*parallel_iterations=k"):
        in_graph(y)

    def with_effect(i):
        counter.assign_add(1.)
        return tf.reduce_sum(tf.gather(unknown, i))

    with pytest.raises(ValueError, match="repeat its effects.*AssignAddVariableOp"):
        pf.pfor(with_effect, 8, fallback="loop", memory_budget=1 << 20)
    assert counter.numpy() == 0.


def test_bad_budgets():
    body = lambda i: tf.cast(i, tf.float32)
    with pytest.raises(ValueError, match="memory_budget=-1 must be a positive"):
        pf.pfor(body, 2, memory_budget=-1)
    with pytest.raises(ValueError, match="pass parallel_iterations='auto' or None"):
        pf.pfor(body, 2, memory_budget=1 << 20, parallel_iterations=4)
    with pytest.raises(ValueError, match="chunk_size='auto' or None"):
        pf.vmap(tf.sin, chunk_size=4, memory_budget=1 << 20)
    with pytest.raises(TypeError, match="parallel_iterations must be a positive Python int, "
                                        "'auto' or None"):
        pf.pfor(body, 2, parallel_iterations="sometimes")


def test_every_entry_point_takes_a_budget(chosen):
    x = tf.constant(np.random.default_rng(2).normal(size=[64, 32]), tf.float32)
    w = tf.Variable(np.random.default_rng(3).normal(size=[32, 32]).astype(np.float32))
    f = lambda r: tf.tanh(r[:, None] * w)
    small = 64 << 10
    pairs = [
        (pf.vectorized_map(f, x, fallback="error", memory_budget=small),
         pf.vectorized_map(f, x, fallback="error")),
        (pf.map_fn(f, x, fallback="error", memory_budget=small),
         pf.map_fn(f, x, fallback="error")),
        (pf.vmap(f, fallback="error", memory_budget=small)(x),
         pf.vmap(f, fallback="error")(x)),
        (pf.jacobian(lambda v: tf.tanh(v @ w), x[:4], fallback="error", memory_budget=small),
         pf.jacobian(lambda v: tf.tanh(v @ w), x[:4], fallback="error")),
        (pf.per_example_gradients(lambda r: tf.reduce_sum(f(r)), [w], x, fallback="error",
                                  memory_budget=small)[0],
         pf.per_example_gradients(lambda r: tf.reduce_sum(f(r)), [w], x, fallback="error")[0]),
    ]
    assert len(chosen) == len(pairs) and all(k < 64 for k in chosen), chosen
    for got, want in pairs:
        testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_profile_arithmetic():
    profile = budget.Profile(steps=((100, 10), (50, 20), (0, 0)))
    assert profile.peak(3) == 130
    assert profile.chunk_size(250) == 10  # 50 + 20k <= 250 and 100 + 10k <= 250
    assert profile.chunk_size(10) == 1  # never below one iteration
    with_outputs = budget.Profile(steps=((100, 10),), outputs=(0, 40))
    assert with_outputs.working(8) == 180 and with_outputs.peak(8) == 500
    assert with_outputs.chunk_size(180, 8) == 8  # all 8 fit beyond their outputs
    assert with_outputs.chunk_size(179, 8) == 1  # 100 + 50k <= 179
    assert with_outputs.chunk_size(400) == 6  # no n: chunks, 100 + 50k <= 400


def _big_outputs():
    """Outputs of 256 KiB a row, made through Identity and Reshape (which hold no
    buffer of their own), with little else held: 64 MiB of outputs for 256 rows."""
    w = tf.Variable(np.random.default_rng(4).normal(size=[256, 256]).astype(np.float32))
    return lambda i: tf.reshape(tf.identity(w * tf.cast(i, tf.float32)), [64, 1024])


def test_outputs_are_not_charged_to_the_budget(chosen):
    body = _big_outputs()
    reference = pf.pfor(body, 256, fallback="error")
    assert reference.shape == (256, 64, 1024)  # 64 MiB of outputs
    got = pf.pfor(body, 256, fallback="error", memory_budget=4 << 20)
    assert chosen[-1] == 256  # a 4 MiB budget: the work beyond the outputs fits
    testing.assert_allclose(got, reference, rtol=0, atol=0)


def test_aliases_hold_no_buffer_of_their_own():
    body = _big_outputs()
    profile = budget.static_profile(lambda n: pf.pfor(body, n, fallback="error"))
    assert profile.outputs[1] == 256 << 10  # one output row, counted once
    assert profile.working(1000) < 2 * (256 << 10)  # the product, not its aliases too
    k = profile.chunk_size(16 << 20)  # chunks hold their outputs
    assert profile.peak(k) <= 16 << 20 < profile.peak(k + 1)
    assert 16 <= k < 64


def test_an_allocator_without_statistics_is_a_clear_error(monkeypatch):
    """TensorFlow's default CPU allocator (where oneDNN does not serve the CPU and
    TF_CPU_ALLOCATOR_USE_BFC is unset) keeps no statistics to measure a run with."""
    def no_stats(device):
        raise ValueError(f"Cannot reset memory stats for device '{device}'")

    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats", no_stats)
    unknown = _unknown_shape(tf.random.normal([8, 30]))
    with pytest.raises(ValueError, match="keeps no statistics.*parallel_iterations=k.*"
                                         "TF_CPU_ALLOCATOR_USE_BFC=true"):
        pf.pfor(lambda i: tf.reduce_sum(tf.gather(unknown, i)), 8, memory_budget=1 << 20)


def test_explain_reports_the_chunk_size_and_its_estimate(chosen):
    body = _outer_products()
    report = pf.explain(body, 256, memory_budget=4 << 20)
    assert 1 < report.chunk_size <= chosen[-1] < 256  # (chunks of one size: balanced)
    assert 0 < report.memory_estimate <= 4 << 20
    assert f"chunks of {report.chunk_size} iterations" in str(report)
    whole = pf.explain(body, 256)
    assert whole.chunk_size is None and whole.memory_estimate is None
    assert pf.explain(body, 256, parallel_iterations="auto").chunk_size == 256


@pytest.fixture
def unmeasured(monkeypatch):
    """No profile measured before the test (they are kept per body signature)."""
    monkeypatch.setattr(budget, "_MEASURED", {})
    return budget._MEASURED  # pylint: disable=protected-access


def _conv_gradients(n=64):
    """Per-example filter gradients of a 3x3 convolution: oneDNN's kernels allocate
    working memory the graph does not show."""
    x = tf.random.stateless_normal([n, 24, 24, 16], [9, 1])
    w = tf.Variable(tf.random.stateless_normal([3, 3, 16, 16], [9, 2]) * 0.1)

    def loss(xi):
        return tf.reduce_sum(tf.nn.conv2d(tf.nn.relu(tf.nn.conv2d(xi, w, 1, "SAME")), w,
                                          1, "SAME") ** 2)
    return loss, w, x


def _without_probe(monkeypatch):
    monkeypatch.setattr(budget, "probed", lambda graph, profile, probe, k: profile)


@pytest.mark.parametrize("where", ["eager", "tf.function"])
def test_workspace_kernels_are_measured_once(where, unmeasured, chosen, monkeypatch):
    """The static estimate puts chunks of 16-20 within 16 MiB; they hold ~25 MiB beyond
    their outputs in a fresh process (oneDNN's workspaces): the measured runs find
    that, and the chunks chosen then fit."""
    loss, w, x = _conv_gradients()
    budget_ = 16 << 20
    call = lambda: pf.per_example_gradients(loss, [w], x, keepdims=True,  # noqa: E731
                                            fallback="error", memory_budget=budget_)
    run = call if where == "eager" else tf.function(call)
    peak, got = _peak(run)
    assert len(unmeasured) == 1 and next(iter(unmeasured.values())) is not None
    measured_chunk = chosen[-1]
    run()
    assert len(unmeasured) == 1  # measured once: later calls and traces read it
    want = pf.per_example_gradients(loss, [w], x, keepdims=True, fallback="error")
    testing.assert_allclose(got, want)
    assert peak - got[0].numpy().nbytes <= 1.1 * budget_, (peak, measured_chunk)
    _without_probe(monkeypatch)
    (call if where == "eager" else tf.function(call))()
    # (measured chunks are smaller in a fresh process, ~half; where oneDNN's caches
    # already hold workspaces of these shapes, a run allocates less and they may tie)
    assert 1 < measured_chunk <= chosen[-1]


def test_explain_says_when_the_estimate_was_measured(unmeasured):
    loss, w, x = _conv_gradients()

    def body(i):
        with tf.GradientTape() as tape:
            value = loss(tf.gather(x, [i]))
        return tape.gradient(value, w)
    report = pf.explain(body, 64, memory_budget=16 << 20)
    assert report.memory_measured and "(measured: kernels' workspaces)" in str(report)
    plain = pf.explain(_outer_products(), 256, memory_budget=4 << 20)
    assert not plain.memory_measured and "(from static shapes)" in str(plain)


def test_what_cannot_be_measured_keeps_the_static_estimate(unmeasured, monkeypatch):
    """A body capturing a graph's own tensor (a tf.function's argument), one with
    effects, and an allocator without statistics: the static estimate, no error."""
    loss, w, x = _conv_gradients(16)
    want = pf.per_example_gradients(loss, [w], x, keepdims=True, fallback="error")
    budget_ = 1 << 20
    argument = tf.function(lambda x: pf.per_example_gradients(
        loss, [w], x, keepdims=True, fallback="error", memory_budget=budget_))
    testing.assert_allclose(argument(x), want)
    assert list(unmeasured.values()) == [None]
    unmeasured.clear()
    counter = tf.Variable(0)

    def effects(i):
        counter.assign_add(1)
        with tf.GradientTape() as tape:
            value = loss(tf.gather(x, [i]))
        return tape.gradient(value, w)
    got = pf.pfor(effects, 16, fallback="error", memory_budget=budget_)
    testing.assert_allclose(got, want[0])
    assert counter.numpy() == 16 and list(unmeasured.values()) == [None]
    unmeasured.clear()

    def no_stats(device):
        raise ValueError(f"Cannot reset memory stats for device '{device}'")
    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats", no_stats)
    got = pf.per_example_gradients(loss, [w], x, keepdims=True, fallback="error",
                                   memory_budget=budget_)
    testing.assert_allclose(got, want)
    assert list(unmeasured.values()) == [None]
