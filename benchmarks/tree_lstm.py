"""A binary TreeLSTM over a batch of random trees: pf.dag_map against the by-depth form.

The model (Tai et al. 2015, the binary N-ary TreeLSTM): input 64, hidden 64, gates
i, f_l, f_r, o, u; every node has an input row, a leaf's children are absent (zero
states). Trees are random binary trees of 5-40 leaves, nodes in post-order (the root
last). The output is each tree's root state h.

Columns, side by side in one run (``_bench.compare``), each in a ``tf.function``:

- ``by-depth``: the hand-batched form TensorFlow Fold emits: the batch's trees as one
  disjoint union, levels computed before (in NumPy, as Fold does when it builds the
  loom), then per level one cell call over the level's nodes of all trees, with a
  gather of the children's states and a scatter of the results;
- ``dag_map``: ``pf.vectorized_map`` over the ragged rows (each tree's inputs and
  children) of a function calling ``pf.dag_map(cell, x, children)`` for one tree;
  levels are found at run time;
- ``node loop``: ``pf.pfor`` over trees of the natural per-tree code: a
  ``tf.while_loop`` over the nodes reading the children's states from a TensorArray
  (``tf.where`` for absent children): one step per node of the largest tree;
- ``map_fn``: ``tf.map_fn`` over trees of the same node loop;
- ``dynet``: DyNet with autobatching (``pip install dynet38``; optional, as JAX is for
  the other benchmarks): the same cell per node, ``dy.esum`` of the roots, one forward.

``--grads`` measures per-example gradients of the sum of the root's h with respect
to the weights instead: ``pf.per_example_gradients`` of the dag_map loss and of the
node loop's against a ``tf.map_fn`` loop of tapes. Peak memory as in lstm_per_example.py. Run:

    .venv/bin/python benchmarks/tree_lstm.py [--batch 1 8 32 128 256] [--grads]
"""

from __future__ import annotations

import argparse

from _bench import compare, header, peak_bytes, table  # pylint: disable=import-error  (sets TF's log level)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import pfor_core as pf  # noqa: E402

IN, HID = 64, 64


def random_tree(rng, leaves):
    """Children [2n-1, 2] of a random binary tree in post-order (root last)."""
    def build(count):  # returns the post-order list of (left, right) relative nodes
        if count == 1:
            return [(-1, -1)]
        split = int(rng.integers(1, count))
        left, right = build(split), build(count - split)
        shift = len(left)
        right = [(a + shift if a >= 0 else -1, b + shift if b >= 0 else -1) for a, b in right]
        return left + right + [(len(left) - 1, len(left) + len(right) - 1)]
    return np.array(build(leaves), np.int32)


def make_batch(rng, batch):
    trees = [random_tree(rng, int(rng.integers(5, 41))) for _ in range(batch)]
    xs = [rng.normal(size=[len(t), IN]).astype(np.float32) for t in trees]
    return trees, xs


class Model:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.wx = tf.Variable((rng.normal(size=[IN, 5 * HID]) * IN ** -0.5).astype(np.float32))
        self.ul = tf.Variable((rng.normal(size=[HID, 5 * HID]) * HID ** -0.5).astype(np.float32))
        self.ur = tf.Variable((rng.normal(size=[HID, 5 * HID]) * HID ** -0.5).astype(np.float32))
        self.b = tf.Variable(np.zeros([5 * HID], np.float32))
        self.variables = [self.wx, self.ul, self.ur, self.b]

    def cell_rows(self, x, hl, cl, hr, cr):
        """The cell on rows: x [m, IN], children's states [m, HID]."""
        z = x @ self.wx + hl @ self.ul + hr @ self.ur + self.b
        i, fl, fr, o, u = tf.split(z, 5, axis=-1)
        c = tf.sigmoid(i) * tf.tanh(u) + tf.sigmoid(fl) * cl + tf.sigmoid(fr) * cr
        return tf.sigmoid(o) * tf.tanh(c), c

    def cell(self, x, child_states, child_mask):
        """For one node, as pf.dag_map calls it (absent children's states are zero)."""
        h, c = child_states
        h_new, c_new = self.cell_rows(x[None], h[:1], c[:1], h[1:], c[1:])
        return h_new[0], c_new[0]

    # -- the forms ------------------------------------------------------------------
    def dag_map(self, x, kids):
        def one(tree):
            h, _ = pf.dag_map(self.cell, tree[0], tree[1], fallback="error")
            return h[-1]
        return pf.vectorized_map(one, (x, kids), fallback="error")

    def node_loop_one(self, x, kids):
        n = tf.shape(kids)[0]

        def body(t, hs, cs):
            l, r = kids[t, 0], kids[t, 1]

            def read(ta, j):
                return tf.where(j >= 0, ta.read(tf.maximum(j, 0)), tf.zeros([HID]))
            h, c = self.cell_rows(x[t][None], read(hs, l)[None], read(cs, l)[None],
                                  read(hs, r)[None], read(cs, r)[None])
            return t + 1, hs.write(t, h[0]), cs.write(t, c[0])
        arrays = [tf.TensorArray(tf.float32, size=n, element_shape=[HID]) for _ in "hc"]
        _, hs, _ = tf.while_loop(lambda t, *_: t < n, body, (0, *arrays))
        return hs.read(n - 1)

    def node_loop(self, x, kids):
        return pf.pfor(lambda i: self.node_loop_one(x[i], kids[i]), x.nrows(),
                       fallback="error")

    def map_fn(self, x, kids):
        return tf.map_fn(lambda t: self.node_loop_one(t[0], t[1]), (x, kids),
                         fn_output_signature=tf.TensorSpec([HID]))

    def by_depth(self, flat_x, flat_kids, level_ids, roots):
        """Fold's form: per level, gather children, one cell call, scatter."""
        n = tf.shape(flat_x)[0]
        zeros = tf.zeros([n + 1, HID])  # row n: the absent child

        def body(level, h, c):
            ids = level_ids[level]
            kid = tf.gather(flat_kids, ids)
            kid = tf.where(kid >= 0, kid, n)
            hn, cn = self.cell_rows(tf.gather(flat_x, ids), tf.gather(h, kid[:, 0]),
                                    tf.gather(c, kid[:, 0]), tf.gather(h, kid[:, 1]),
                                    tf.gather(c, kid[:, 1]))
            return (level + 1, tf.tensor_scatter_nd_update(h, ids[:, None], hn),
                    tf.tensor_scatter_nd_update(c, ids[:, None], cn))
        depth = tf.cast(level_ids.nrows(), tf.int32)
        _, h, _ = tf.while_loop(lambda level, *_: level < depth, body,
                                (tf.constant(0), zeros, zeros))
        return tf.gather(h, roots)

    # -- per-example gradients -----------------------------------------------------
    def loss_one(self, x, kids):
        h, _ = pf.dag_map(self.cell, x, kids, fallback="error")
        return tf.reduce_sum(h[-1])

    def grads_pfor(self, x, kids):
        return pf.per_example_gradients(self.loss_one, self.variables, x, kids,
                                        fallback="error")

    def grads_node_loop(self, x, kids):
        return pf.per_example_gradients(
            lambda x, kids: tf.reduce_sum(self.node_loop_one(x, kids)), self.variables,
            x, kids, fallback="error")

    def grads_loop(self, x, kids):
        def one(tree):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(self.node_loop_one(tree[0], tree[1]))
            return tape.gradient(loss, self.variables)
        return tf.map_fn(one, (x, kids), fn_output_signature=[
            tf.TensorSpec(v.shape) for v in self.variables])


def union(trees, xs):
    """The disjoint union and its levels, as Fold builds them before running."""
    offsets = np.cumsum([0] + [len(t) for t in trees])
    flat_kids = np.concatenate([np.where(t >= 0, t + o, -1) for t, o in zip(trees, offsets)]
                               ).astype(np.int32)
    level = np.zeros(len(flat_kids), np.int64)
    for v, (a, b) in enumerate(flat_kids):  # post-order: children come first
        level[v] = 1 + max(level[a] if a >= 0 else -1, level[b] if b >= 0 else -1)
    level_ids = tf.ragged.stack([np.flatnonzero(level == d).astype(np.int32)
                                 for d in range(level.max() + 1)])
    return (tf.constant(np.concatenate(xs)), tf.constant(flat_kids), level_ids,
            tf.constant(offsets[1:] - 1, tf.int32))


def dynet_forward(model, trees, xs):
    """DyNet with autobatching, or None when it is not installed."""
    try:
        import dynet_config
        dynet_config.set(autobatch=1)
        import dynet as dy
    except ImportError:
        return None
    pc = dy.ParameterCollection()
    wx, ul, ur, b = (pc.parameters_from_numpy(v.numpy().T if v.shape.rank == 2 else v.numpy())
                     for v in model.variables)

    def run():
        assert pc is not None  # the parameters live as long as their collection
        dy.renew_cg()
        roots = []
        for kids, x in zip(trees, xs):
            h, c = [None] * len(kids), [None] * len(kids)
            for v, (a, bb) in enumerate(kids):
                z = wx * dy.inputTensor(x[v]) + b
                if a >= 0:
                    z = z + ul * h[a] + ur * h[bb]
                i, fl, fr, o, u = (dy.pick_range(z, k * HID, (k + 1) * HID) for k in range(5))
                cv = dy.cmult(dy.logistic(i), dy.tanh(u))
                if a >= 0:
                    cv = cv + dy.cmult(dy.logistic(fl), c[a]) + dy.cmult(dy.logistic(fr), c[bb])
                c[v], h[v] = cv, dy.cmult(dy.logistic(o), dy.tanh(cv))
            roots.append(h[-1])
        out = dy.concatenate_cols(roots)
        return out.npvalue().T
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, nargs="*", default=[1, 8, 32, 128, 256])
    parser.add_argument("--grads", action="store_true")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per column")
    args = parser.parse_args()
    model = Model()
    rows = []
    for batch in args.batch:
        trees, xs = make_batch(np.random.default_rng(batch), batch)
        lengths = tf.constant([len(t) for t in trees], tf.int64)
        x = tf.RaggedTensor.from_row_lengths(np.concatenate(xs), lengths)
        kids = tf.RaggedTensor.from_row_lengths(np.concatenate(trees), lengths)
        if args.grads:
            fns = {"loop of tapes": tf.function(lambda: model.grads_loop(x, kids)),
                   "dag_map": tf.function(lambda: model.grads_pfor(x, kids)),
                   "node loop": tf.function(lambda: model.grads_node_loop(x, kids))}
            reference = "loop of tapes"
        else:
            parts = union(trees, xs)
            fns = {"by-depth": tf.function(lambda: model.by_depth(*parts)),
                   "dag_map": tf.function(lambda: model.dag_map(x, kids)),
                   "node loop": tf.function(lambda: model.node_loop(x, kids)),
                   "map_fn": tf.function(lambda: model.map_fn(x, kids))}
            reference = "by-depth"
        want = fns[reference]()
        for name, fn in fns.items():
            for g, w in zip(tf.nest.flatten(fn()), tf.nest.flatten(want)):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-3, atol=2e-4,
                                           err_msg=name)
        dynet = None if args.grads else dynet_forward(model, trees, xs)
        if dynet is not None:
            np.testing.assert_allclose(dynet(), want.numpy(), rtol=2e-3, atol=2e-4)
            fns["dynet"] = dynet
        seconds = compare(fns, budget=args.budget)
        peaks = {name: peak_bytes(fn) for name, fn in fns.items() if name != "dynet"}
        for name, s in seconds.items():
            rows.append((batch, name, f"{batch / s:,.0f}",
                         f"{seconds[reference] / s:.2f}x",
                         f"{peaks[name] / (1 << 20):,.1f}" if name in peaks else "-"))
    what = "per-example gradients" if args.grads else "forward (root h)"
    print(header(f"Binary TreeLSTM (input {IN}, hidden {HID}, 5-40 leaves), {what}"))
    print(table(("batch", "implementation", "trees/s", f"/ {reference}", "peak MiB"), rows))


if __name__ == "__main__":
    main()
