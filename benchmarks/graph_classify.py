"""Graph classification, one graph per example: pf.vectorized_map against the disjoint union.

The model: node features 64, two rounds of message passing (each node adds the sum of
its in-neighbours' messages, ``h = relu(h @ W_self + segment_sum(h[src] @ W_msg, dst))``),
then the mean of the nodes and a dense layer to 10 classes. Graphs are random, 5-50
nodes and 1-3 edges per node (both directions drawn independently).

Columns, side by side in one run (``_bench.compare``), each in a ``tf.function``:

- ``disjoint union``: the hand-batched form: the batch's graphs as one graph (edges
  shifted by each graph's first node), one segment sum per round over all edges, the
  readout a segment mean by graph;
- ``pfor``: ``pf.vectorized_map`` over the ragged rows (each graph's nodes and edges)
  of the function written for one graph;
- ``map_fn``: ``tf.map_fn`` over the graphs of the same function.

Run:

    .venv/bin/python benchmarks/graph_classify.py [--batch 1 8 32 128 256]
"""

from __future__ import annotations

import argparse

from _bench import compare, header, peak_bytes, table  # pylint: disable=import-error  (sets TF's log level)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import pfor_core as pf  # noqa: E402

D, CLASSES, ROUNDS = 64, 10, 2


def make_batch(rng, batch):
    """Per graph: node features [n, D] and edges [e, 2] (source, destination)."""
    graphs = []
    for _ in range(batch):
        n = int(rng.integers(5, 51))
        e = int(rng.integers(n, 3 * n + 1))
        edges = rng.integers(0, n, size=[e, 2]).astype(np.int32)
        graphs.append((rng.normal(size=[n, D]).astype(np.float32), edges))
    return graphs


class Model:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        scale = D ** -0.5
        self.w_self = [tf.Variable((rng.normal(size=[D, D]) * scale).astype(np.float32))
                       for _ in range(ROUNDS)]
        self.w_msg = [tf.Variable((rng.normal(size=[D, D]) * scale).astype(np.float32))
                      for _ in range(ROUNDS)]
        self.head = tf.Variable((rng.normal(size=[D, CLASSES]) * scale).astype(np.float32))

    def rounds(self, h, src, dst, nodes):
        for w_self, w_msg in zip(self.w_self, self.w_msg):
            messages = tf.gather(h, src) @ w_msg
            h = tf.nn.relu(h @ w_self + tf.math.unsorted_segment_sum(messages, dst, nodes))
        return h

    def one_graph(self, graph):
        """Written for one graph: nodes [n, D], edges [e, 2]."""
        h, edges = graph
        h = self.rounds(h, edges[:, 0], edges[:, 1], tf.shape(h)[0])
        return tf.linalg.matvec(self.head, tf.reduce_mean(h, 0), transpose_a=True)

    def pfor(self, nodes, edges):
        return pf.vectorized_map(self.one_graph, (nodes, edges), fallback="error")

    def map_fn(self, nodes, edges):
        return tf.map_fn(self.one_graph, (nodes, edges),
                         fn_output_signature=tf.TensorSpec([CLASSES]))

    def union(self, flat_h, src, dst, graph_of, batch):
        h = self.rounds(flat_h, src, dst, tf.shape(flat_h)[0])
        return tf.math.unsorted_segment_mean(h, graph_of, batch) @ self.head


def union_inputs(graphs):
    """The disjoint union, as the hand-batched code builds it before running."""
    sizes = [len(h) for h, _ in graphs]
    offsets = np.cumsum([0] + sizes)[:-1]
    edges = np.concatenate([e + o for (_, e), o in zip(graphs, offsets)])
    graph_of = np.repeat(np.arange(len(graphs)), sizes).astype(np.int32)
    return (tf.constant(np.concatenate([h for h, _ in graphs])), tf.constant(edges[:, 0]),
            tf.constant(edges[:, 1]), tf.constant(graph_of), len(graphs))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, nargs="*", default=[1, 8, 32, 128, 256])
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per column")
    args = parser.parse_args()
    model = Model()
    rows = []
    for batch in args.batch:
        graphs = make_batch(np.random.default_rng(batch), batch)
        nodes = tf.RaggedTensor.from_row_lengths(
            np.concatenate([h for h, _ in graphs]), [len(h) for h, _ in graphs])
        edges = tf.RaggedTensor.from_row_lengths(
            np.concatenate([e for _, e in graphs]), [len(e) for _, e in graphs])
        parts = union_inputs(graphs)
        fns = {"disjoint union": tf.function(lambda: model.union(*parts)),
               "pfor": tf.function(lambda: model.pfor(nodes, edges)),
               "map_fn": tf.function(lambda: model.map_fn(nodes, edges))}
        want = fns["disjoint union"]()
        for name, fn in fns.items():
            np.testing.assert_allclose(fn().numpy(), want.numpy(), rtol=2e-3, atol=2e-4,
                                       err_msg=name)
        seconds = compare(fns, budget=args.budget)
        for name, s in seconds.items():
            rows.append((batch, name, f"{batch / s:,.0f}",
                         f"{seconds['disjoint union'] / s:.2f}x",
                         f"{peak_bytes(fns[name]) / (1 << 20):,.1f}"))
    print(header(f"Graph classification ({ROUNDS} rounds of message passing, features {D}, "
                 "5-50 nodes, 1-3 edges per node)"))
    print(table(("batch", "implementation", "graphs/s", "/ disjoint union", "peak MiB"), rows))


if __name__ == "__main__":
    main()
