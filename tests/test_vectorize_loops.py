"""pf.vectorize_loops against the function it rewrites (issue 31, part 1): drawn loop
forms, sizes and invariant inputs; every loop that should vectorize does (no While
left in the graph), and the others stay with a reason."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import existing_loops, loop_analysis, loop_rewrite


@pytest.fixture(autouse=True)
def timed_alike(monkeypatch):
    """The first eager call times the rewrite against fn: here both time alike (the
    rewrite is kept), so no decision depends on the machine's load; the tests of that
    timing set their own figures."""
    monkeypatch.setattr(existing_loops, "_timings", lambda fns, a, k: {n: 1.0 for n in fns})


def _whiles_left(vf, *args):
    graph = tf.function(vf).get_concrete_function(*args).graph
    return loop_analysis.holds_loop(graph)


def _assert_same(got, want, tol=1e-5):
    for g, w in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def _body_fn(form, reduce, per_row_weight, w):
    """A function of (x, v) looping over x's rows in the drawn ``form``; ``v`` is read
    per row (``v[i]``) or as a whole (loop-invariant)."""
    def step(xi, vi):
        return tf.tanh(tf.linalg.matvec(w, xi) + vi)

    def fn(x, v):
        n = tf.shape(x)[0]
        read = (lambda i: v[i]) if per_row_weight else (lambda i: v[0])
        if form == "map_fn":
            rows = tf.map_fn(lambda i: step(x[i], read(i)), tf.range(n),
                             fn_output_signature=tf.float32)
            acc = tf.reduce_sum(rows) if reduce else tf.zeros([])
            return rows, acc
        ta = tf.TensorArray(tf.float32, size=n, element_shape=[x.shape[1]])
        acc = tf.zeros([]) if reduce != "max" else tf.fill([], -1e9)
        if form == "for":
            for i in tf.range(n):
                y = step(x[i], read(i))
                ta = ta.write(i, y)
                if reduce == "sum":
                    acc += tf.reduce_sum(y)
                elif reduce == "max":
                    acc = tf.maximum(acc, tf.reduce_max(y))
            return ta.stack(), acc

        def body(i, ta, acc):
            y = step(x[i], read(i))
            new = acc + tf.reduce_sum(y) if reduce == "sum" else (
                tf.maximum(acc, tf.reduce_max(y)) if reduce == "max" else acc)
            return i + 1, ta.write(i, y), new
        _, ta, acc = tf.while_loop(lambda i, *_: i < n, body, (0, ta, acc))
        return ta.stack(), acc
    return fn


@settings(max_examples=12, deadline=None)
@given(form=st.sampled_from(["map_fn", "for", "while_loop"]),
       reduce=st.sampled_from([None, "sum", "max"]),
       per_row_weight=st.booleans(),
       n=st.integers(1, 5), d=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_drawn_independent_loops_vectorize_and_match(form, reduce, per_row_weight, n, d, seed):
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=[n, d]), tf.float32)
    v = tf.constant(rng.normal(size=[n, d]), tf.float32)
    w = tf.constant(rng.normal(size=[d, d]), tf.float32)
    fn = _body_fn(form, reduce, per_row_weight, w)
    vf = pf.vectorize_loops(fn, check=True)
    _assert_same(vf(x, v), tf.function(fn)(x, v))
    report = vf.explain(x, v)
    if n == 1:  # one iteration: nothing to vectorize
        assert report[0].decision == "kept" and "runs once" in report[0].reason
        return
    assert [e.decision for e in report] == ["vectorized"], str(report)
    assert report[0].kind == ("map_fn" if form == "map_fn" else "while_loop")
    assert not _whiles_left(vf, x, v)


def test_a_carried_dependence_stays_and_says_which_value():
    x = tf.random.stateless_normal([6, 3], [1, 2])

    def ema(x):
        h = tf.zeros([3])
        for i in tf.range(tf.shape(x)[0]):
            h = 0.9 * h + 0.1 * x[i]
        return h
    vf = pf.vectorize_loops(ema)
    _assert_same(vf(x), tf.function(ema)(x), tol=0)
    (entry,) = vf.explain(x)
    assert entry.decision == "kept" and "depends on the previous iteration" in entry.reason
    assert "AddV2" in entry.reason
    assert "kept" in str(vf.explain(x))


def test_a_loop_with_an_effect_stays_and_names_the_op():
    x = tf.random.stateless_normal([4, 3], [1, 2])
    total = tf.Variable(0.)

    def accumulate(x):
        for i in tf.range(4):
            total.assign_add(tf.reduce_sum(x[i]))
        return total.read_value()
    vf = pf.vectorize_loops(accumulate)
    (entry,) = vf.explain(x)
    assert entry.decision == "kept" and "AssignAddVariableOp" in entry.reason


def test_nested_loops_calls_and_branches_vectorize_inner_first():
    x = tf.random.stateless_normal([4, 3, 2], [3, 4])
    w = tf.Variable(tf.random.stateless_normal([2, 2], [5, 6]))

    @tf.function
    def inner(r):
        return tf.map_fn(lambda c: tf.reduce_sum(tf.linalg.matvec(w, c)), r)

    def fn(x, flag):
        nested = tf.map_fn(lambda r: tf.map_fn(lambda c: tf.tanh(c) * 2., r), x)
        called = tf.map_fn(inner, x)
        branch = tf.cond(flag, lambda: tf.map_fn(tf.reduce_sum, x), lambda: tf.zeros([4]))
        return nested, called, branch
    vf = pf.vectorize_loops(fn, check=True)
    for flag in (True, False):
        _assert_same(vf(x, tf.constant(flag)), tf.function(fn)(x, tf.constant(flag)))
    report = vf.explain(x, tf.constant(True))
    assert len(report) == 5 and {e.decision for e in report} == {"vectorized"}, str(report)
    assert report[0].name.count("while") == 2  # the inner loop of ``nested`` comes first
    assert not _whiles_left(vf, x, tf.constant(True))


def test_gradients_flow_through_a_vectorized_loop():
    x = tf.random.stateless_normal([5, 3], [7, 8])
    w = tf.Variable(tf.random.stateless_normal([3, 3], [9, 1]))

    def fn(x):
        return tf.map_fn(lambda r: tf.tanh(tf.linalg.matvec(w, r)), x)
    vf = pf.vectorize_loops(fn)
    grads = []
    for f in (vf, fn):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(f(x) ** 2)
        grads.append(tape.gradient(loss, w))
    _assert_same(grads[0], grads[1])


def test_inside_a_tf_function_with_a_count_known_only_at_run_time():
    @tf.function(input_signature=[tf.TensorSpec([None, 2])])
    def outer(x):
        return pf.vectorize_loops(lambda x: tf.map_fn(lambda r: r * r, x))(x)
    for n in (0, 1, 5):
        x = tf.reshape(tf.range(2 * n, dtype=tf.float32), [n, 2])
        _assert_same(outer(x), x * x, tol=0)
    graph = outer.get_concrete_function().graph
    assert not loop_analysis.holds_loop(graph)


def test_a_keras_layer_built_on_map_fn():
    class PerExample(tf.keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(shape[-1], 4))

        def call(self, x):
            return tf.map_fn(lambda r: tf.nn.relu(tf.linalg.matvec(self.w, r, True)), x)
    layer = PerExample()
    x = tf.random.stateless_normal([6, 5], [2, 2])
    want = layer(x)
    vl = pf.vectorize_loops(layer, check=True)
    _assert_same(vl(x), want)
    assert vl.explain(x)[0].decision == "vectorized"


def test_random_draws_differ_per_iteration():
    x = tf.zeros([3, 2])
    vf = pf.vectorize_loops(lambda x: tf.map_fn(lambda r: r + tf.random.uniform([2]), x))
    out = vf(x).numpy()
    assert vf.explain(x)[0].decision == "vectorized"
    assert not np.allclose(out[0], out[1]) and ((out >= 0) & (out < 1)).all()


def test_a_py_function_is_an_effect_and_stays():
    x = tf.constant([[2., 1.], [3., 4.]])
    vf = pf.vectorize_loops(
        lambda x: tf.map_fn(lambda r: tf.numpy_function(np.sort, [r], tf.float32), x))
    _assert_same(vf(x), np.array([[1., 2.], [3., 4.]]), tol=0)
    (entry,) = vf.explain(x)
    assert entry.decision == "kept" and "PyFunc" in entry.reason


def test_a_body_that_does_not_vectorize_is_kept_with_the_reason():
    def fn(x):  # each iteration writes an item of its own length
        ta = tf.TensorArray(tf.float32, size=3, infer_shape=False,
                            element_shape=tf.TensorShape(None))
        for i in tf.range(3):
            ta = ta.write(i, tf.range(tf.cast(i, tf.float32)) + x)
        return ta.concat()
    vf = pf.vectorize_loops(fn)
    _assert_same(vf(tf.constant(1.)), np.array([1., 1., 2.]), tol=0)
    (entry,) = vf.explain(tf.constant(1.))
    assert entry.decision == "kept" and entry.reason.startswith("its body does not vectorize")


# Loops whose iterations read what earlier ones wrote, at indices known before the loop.

D = 3


@st.composite
def trees(draw, max_nodes=12):
    """Children of each node among the nodes before it (post-order), or -1."""
    n = draw(st.integers(1, max_nodes))
    kids = np.full([n, 2], -1, np.int32)
    for t in range(1, n):
        for j in range(2):
            if draw(st.booleans()):
                kids[t, j] = draw(st.integers(0, t - 1))
    return kids


def node_loop(w, u):
    def fn(x, kids):
        n = tf.shape(x)[0]
        hs = tf.TensorArray(tf.float32, size=n, element_shape=[D])
        for t in tf.range(n):
            left, right = kids[t, 0], kids[t, 1]
            hl = tf.where(left >= 0, hs.read(tf.maximum(left, 0)), tf.zeros([D]))
            hr = tf.where(right >= 0, hs.read(tf.maximum(right, 0)), tf.zeros([D]))
            hs = hs.write(t, tf.tanh(tf.linalg.matvec(w, x[t]) + tf.linalg.matvec(u, hl + hr)))
        return hs.stack()
    return fn


@pytest.fixture
def always_levels(monkeypatch):
    """The level schedule with no run-time choice of the loop as it was: a result that
    matches can only come from the schedule."""
    monkeypatch.setattr(loop_rewrite, "_LEVELS_SHARE", None)


@settings(max_examples=12, deadline=None)
@given(kids=trees(), seed=st.integers(0, 2**16))
def test_drawn_tree_node_loops_run_by_levels_and_match(kids, seed):
    rng = np.random.default_rng(seed)
    w, u = (tf.constant(rng.normal(size=[D, D]) * 0.5, tf.float32) for _ in range(2))
    x = tf.constant(rng.normal(size=[len(kids), D]), tf.float32)
    fn = node_loop(w, u)
    vf = pf.vectorize_loops(fn, check=True)
    with mock.patch.object(loop_rewrite, "_LEVELS_SHARE", None):  # the schedule only
        _assert_same(vf(x, tf.constant(kids)), tf.function(fn)(x, tf.constant(kids)))
        (entry,) = vf.explain(x, tf.constant(kids))
    assert entry.decision == "levels", str(entry)


def _complete_tree(n):
    """Children of a complete binary tree of n nodes, numbered in post-order."""
    order = []

    def visit(v):
        if v < n:
            visit(2 * v + 1), visit(2 * v + 2), order.append(v)
    visit(0)
    at = {v: t for t, v in enumerate(order)}
    return np.array([[at.get(2 * v + 1, -1), at.get(2 * v + 2, -1)] for v in order], np.int32)


def test_the_schedule_runs_where_it_pays_and_the_loop_where_not():
    """A complete tree of 127 nodes has 7 levels: run by levels; a chain of 80 nodes has
    80: the loop as it was runs (the schedule would take as many steps, each costing
    more), chosen at run time, and after the first eager call it is kept as it was;
    forced, the schedule gives the same. Under 64 iterations the loop stays when
    traced."""
    fn = node_loop(tf.eye(D) * 0.5, tf.eye(D) * 0.5)
    chain = np.stack([np.arange(-1, 79), np.full(80, -1)], 1).astype(np.int32)
    for kids, after in ((_complete_tree(127), "levels"), (chain, "kept")):
        x = tf.random.stateless_normal([len(kids), D], [1, 1])
        want = tf.function(fn)(x, tf.constant(kids))
        vf = pf.vectorize_loops(fn)
        assert vf.explain(x, tf.constant(kids))[0].decision == "levels"
        _assert_same(vf(x, tf.constant(kids)), want)  # the probe: levels pay or not
        (entry,) = vf.explain(x, tf.constant(kids))
        assert entry.decision == after, str(entry)
        _assert_same(vf(x, tf.constant(kids)), want)  # traced with that decision
        with mock.patch.object(loop_rewrite, "_LEVELS_SHARE", None):
            _assert_same(pf.vectorize_loops(fn)(x, tf.constant(kids)), want)
        # Inside a tf.function there is no probe: the choice is made at run time.
        _assert_same(tf.function(vf)(x, tf.constant(kids)), want)
    small = tf.constant(_complete_tree(15))
    (entry,) = pf.vectorize_loops(fn).explain(tf.zeros([15, D]), small)
    assert entry.decision == "kept" and "too few" in entry.reason


def test_a_sparse_triangular_solve_by_forward_substitution_runs_by_levels(always_levels):
    rng = np.random.default_rng(3)
    n, k = 40, 3
    cols = np.zeros([n, k], np.int32)
    vals = np.zeros([n, k], np.float32)
    for t in range(1, n):
        for j in range(k):
            if rng.random() < 0.5:
                cols[t, j], vals[t, j] = rng.integers(0, t), rng.normal()
    diag = rng.uniform(1, 2, n).astype(np.float32)
    b = rng.normal(size=n).astype(np.float32)

    def solve(b, cols, vals, diag):
        xs = tf.TensorArray(tf.float32, size=tf.shape(b)[0], element_shape=[])
        for t in tf.range(tf.shape(b)[0]):
            earlier = xs.gather(cols[t])
            xs = xs.write(t, (b[t] - tf.reduce_sum(vals[t] * earlier)) / diag[t])
        return xs.stack()
    args = [tf.constant(a) for a in (b, cols, vals, diag)]
    vf = pf.vectorize_loops(solve, check=True)
    dense = np.diag(diag)
    for t in range(n):
        for j in range(k):
            dense[t, cols[t, j]] += vals[t, j]
    np.testing.assert_allclose(vf(*args).numpy(), np.linalg.solve(dense, b), rtol=1e-4,
                               atol=1e-4)
    assert vf.explain(*args)[0].decision == "levels"


def test_reads_of_items_not_yet_written_see_the_list_the_loop_started_with(always_levels):
    def fn(init):
        n = init.shape[0]
        ta = tf.TensorArray(tf.float32, size=n, element_shape=[D]).unstack(init)
        for t in tf.range(n):
            parent = ta.read(t // 2)  # written before t (except at t = 0: itself)
            later = ta.read(tf.minimum(t + 1, n - 1))  # not written yet: the initial item
            ta = ta.write(t, parent * 0.5 + later)
        return ta.stack()
    init = tf.random.stateless_normal([16, D], [4, 4])
    vf = pf.vectorize_loops(fn, check=True)
    _assert_same(vf(init), tf.function(fn)(init))
    assert vf.explain(init)[0].decision == "levels"


def test_gradients_flow_through_a_loop_run_by_levels(always_levels):
    w = tf.Variable(tf.random.stateless_normal([D, D], [5, 5]) * 0.5)
    fn = node_loop(w, w)
    kids = tf.constant([[-1, -1], [-1, -1], [0, 1], [-1, -1], [2, 3]])
    x = tf.random.stateless_normal([5, D], [6, 6])
    grads = []
    for f in (pf.vectorize_loops(fn), tf.function(fn)):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(f(x, kids) ** 2)
        grads.append(tape.gradient(loss, w))
    _assert_same(grads[0], grads[1])


def test_a_read_outside_the_list_fails_as_in_the_loop(always_levels):
    fn = node_loop(tf.eye(D), tf.eye(D))
    kids = tf.constant([[-1, -1], [0, 7]])  # node 1 reads item 7 of a list of 2
    x = tf.zeros([2, D])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.function(fn)(x, kids)
    with pytest.raises(tf.errors.InvalidArgumentError, match="reads an item outside its list"):
        pf.vectorize_loops(fn)(x, kids)


def _squares(x):
    return tf.map_fn(lambda r: tf.reduce_sum(r * r), x)


def _timed(monkeypatch, rewritten, original):
    monkeypatch.setattr(existing_loops, "_timings",
                        lambda fns, a, k: {"rewritten": rewritten, "original": original})


def test_a_rewrite_that_measured_slower_on_the_first_call_is_not_used(monkeypatch):
    _timed(monkeypatch, 2e-3, 1e-3)
    vf, x = pf.vectorize_loops(_squares), tf.random.normal([8, 3])
    _assert_same(vf(x), _squares(x))
    _assert_same(vf(x), _squares(x))
    (later,) = vf._ready.values()  # pylint: disable=protected-access
    assert later is vf._original  # pylint: disable=protected-access  # fn itself
    report = vf.explain(x)
    assert report.measured == {"rewritten": 2e-3, "original": 1e-3}
    assert report[0].decision == "kept" and "later calls run fn as it is" in report[0].reason
    assert "first call: rewritten 2 ms, fn 1 ms" in str(report)


def test_a_rewrite_that_measured_faster_is_used_and_effects_are_not_timed(monkeypatch):
    _timed(monkeypatch, 1e-3, 2e-3)
    vf, x = pf.vectorize_loops(_squares), tf.random.normal([8, 3])
    _assert_same(vf(x), _squares(x))
    report = vf.explain(x)
    assert report[0].decision == "vectorized" and report.measured["original"] == 2e-3
    counter = tf.Variable(0.0)

    def counted(x):
        counter.assign_add(1.0)
        return _squares(x)

    vf = pf.vectorize_loops(counted)
    _assert_same(vf(x), _squares(x))
    assert counter.numpy() == 1.0  # no extra calls to time it: they would count too
    assert vf.explain(x).measured is None


@pytest.mark.parametrize("budget", [None, 4 << 20, 1 << 18])
def test_a_memory_budget_runs_the_loop_in_chunks_or_keeps_it(budget):
    """Each iteration holds 256 KiB temporaries: all 64 in one piece (no budget), in
    chunks under 4 MiB, and under 256 KiB (not one iteration fits) as the loop was;
    the chunks are said in the loop's reason, and the result is fn's either way."""
    w = tf.random.stateless_normal([256, 256], [7, 1])
    x = tf.random.stateless_normal([64, 256], [7, 2])

    def fn(x):
        return tf.map_fn(lambda r: tf.reduce_sum(tf.tanh(r[:, None] * w) @ w, 0), x)
    vf = pf.vectorize_loops(fn, memory_budget=budget)
    _assert_same(vf(x), tf.function(fn)(x), tol=1e-4)
    (entry,) = vf.explain(x)
    if budget == 4 << 20:
        assert entry.decision == "vectorized" and "in chunks of" in entry.reason, str(entry)
        chunk = int(entry.reason.split("in chunks of ")[1].split()[0])
        assert 1 < chunk < 64
    elif budget is None:
        assert entry.decision == "vectorized" and "chunks" not in entry.reason
    else:
        assert entry.decision == "kept" and "one iteration at a time" in entry.reason
        assert _whiles_left(vf, x)


def test_a_level_schedule_under_a_memory_budget_runs_each_level_in_chunks(always_levels):
    """A complete tree's widest level (64 leaves) runs in chunks under the budget."""
    fn = node_loop(tf.eye(D) * 0.5, tf.eye(D) * 0.5)
    kids = tf.constant(_complete_tree(127))
    x = tf.random.stateless_normal([127, D], [1, 3])
    vf = pf.vectorize_loops(fn, memory_budget=2048)
    _assert_same(vf(x, kids), tf.function(fn)(x, kids))
    (entry,) = vf.explain(x, kids)
    assert entry.decision == "levels", str(entry)
    chunk = int(entry.reason.split("each level in chunks of at most ")[1].split()[0])
    assert 1 < chunk < 64


def _kind_loop(kind, x, w):
    """A loop over x's rows of the drawn kind, as people write it (AutoGraph ``for``):
    its outputs, and the decision vectorize_loops should make."""
    n, d = tf.shape(x)[0], x.shape[-1]
    if kind == "carried":  # each step needs the previous one's h
        h = tf.zeros([d])
        for i in tf.range(n):
            h = tf.tanh(tf.linalg.matvec(w, h) + x[i])
        return h, "kept"
    if kind == "reduction":  # only summed over the iterations
        total = tf.zeros([d])
        for i in tf.range(n):
            total += tf.tanh(tf.linalg.matvec(w, x[i]))
        return total, _vectorized(x)
    ta = tf.TensorArray(tf.float32, size=n, element_shape=[d])
    for i in tf.range(n):
        y = tf.tanh(tf.linalg.matvec(w, x[i]))
        if kind == "levels":  # reads the row before: indices known before the loop
            y += tf.where(i > 0, ta.read(tf.maximum(i - 1, 0)), tf.zeros([d]))
        ta = ta.write(i, y)
    return ta.stack(), "levels" if kind == "levels" else _vectorized(x)


def _vectorized(x):
    """The decision for an independent loop over x's rows: one row stays as it is."""
    return "kept" if x.shape[0] == 1 else "vectorized"


@settings(max_examples=16, deadline=None)
@given(kind=st.sampled_from(["independent", "reduction", "carried", "levels"]),
       nested=st.booleans(), n=st.integers(0, 4), m=st.integers(1, 3),
       d=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_drawn_loop_kinds_get_their_decision_and_match(kind, nested, n, m, d, seed):
    """Independent, reduction-only, carried and computable-dependence loops, alone or
    inside an independent tf.map_fn (the inner one decided first), with zero trips
    too: each decision as drawn, and fn's result."""
    if nested and kind == "levels":
        kind = "independent"  # (a level schedule inside a pfor: not rewritten by levels)
    rng = np.random.default_rng(seed)
    w = tf.constant(rng.normal(size=[d, d]) * 0.5, tf.float32)
    x = tf.constant(rng.normal(size=[m, n, d] if nested else [n, d]), tf.float32)
    decided = []

    def fn(x):
        if not nested:
            out, decision = _kind_loop(kind, x, w)
            decided[:] = [decision]
            return out

        def row(r):
            out, decision = _kind_loop(kind, r, w)
            # (an outer loop that runs once stays, with its body as it was)
            decided[:] = ["kept"] if m == 1 else [decision, "vectorized"]
            return out
        return tf.map_fn(row, x)
    vf = pf.vectorize_loops(fn, check=True)
    with mock.patch.object(loop_rewrite, "_LEVELS_SHARE", None):  # levels at any depth
        _assert_same(vf(x), tf.function(fn)(x))
        report = vf.explain(x)
    assert [e.decision for e in report] == decided, str(report)


def test_per_example_while_loops_read_the_first_calls_lengths():
    """A map_fn whose rows loop to their own length, given as fn's argument: the
    rewrite's per-example while loop chooses masked or compacted from the first call's
    lengths (and keeps that for the signature)."""
    from pfor_controlflow.loops import masking
    x = tf.random.stateless_normal([64, 4], [8, 1])
    lengths = tf.constant(np.random.default_rng(5).integers(0, 20, 64), tf.int32)

    def fn(x, lengths):
        def row(a):
            return tf.while_loop(lambda t, v: t < a[1], lambda t, v: (t + 1, v * 0.5 + 1.0),
                                 (0, a[0]))[1]
        return tf.map_fn(row, (x, lengths), fn_output_signature=tf.float32)
    real, seen = masking._choose, []  # pylint: disable=protected-access
    with mock.patch.object(masking, "_choose", lambda loop: seen.append(real(loop))
                           or seen[-1]):
        vf = pf.vectorize_loops(fn, check=True)
        _assert_same(vf(x, lengths), tf.function(fn)(x, lengths))
    assert seen and all("the first call's trip counts" in c.reason for c in seen), seen


def test_under_jit_compile_independent_loops_vectorize_and_level_loops_stay():
    """Inside tf.function(jit_compile=True): a map_fn and an AutoGraph ``for`` writing a
    TensorArray vectorize into ops XLA compiles (the whole list made from its items, no
    scatter into a list); a loop that would run by levels stays (its levels' sizes are
    known only at run time), and says why."""
    w = tf.random.stateless_normal([4, 4], [9, 1])
    x = tf.random.stateless_normal([8, 4], [9, 2])

    def mapped(x):
        return tf.map_fn(lambda r: tf.tanh(tf.linalg.matvec(w, r)), x)

    def written(x):
        ta = tf.TensorArray(tf.float32, size=tf.shape(x)[0], element_shape=[4])
        for i in tf.range(tf.shape(x)[0]):
            ta = ta.write(i, tf.tanh(tf.linalg.matvec(w, x[i])))
        return ta.stack()
    for fn in (mapped, written):
        vf = pf.vectorize_loops(fn)
        compiled = tf.function(vf, jit_compile=True)
        _assert_same(compiled(x), tf.function(fn)(x))
        assert not _whiles_left(tf.function(vf, jit_compile=True), x)
    tree = node_loop(tf.eye(D) * 0.5, tf.eye(D) * 0.5)
    kids, nodes = tf.constant(_complete_tree(127)), tf.random.stateless_normal([127, D], [9, 3])
    vf = pf.vectorize_loops(tree)
    seen = []

    @tf.function(jit_compile=True)
    def run(nodes, kids):
        out = vf(nodes, kids)
        seen.extend(vf._entries)  # pylint: disable=protected-access
        return out
    with mock.patch.object(loop_rewrite, "_LEVELS_SHARE", None):  # else levels
        _assert_same(run(nodes, kids), tf.function(tree)(nodes, kids))
    assert seen and seen[0].decision == "kept" and "jit_compile" in seen[0].reason
