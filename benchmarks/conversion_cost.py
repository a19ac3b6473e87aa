"""What converting a loop body costs: time and graph ops per body op, pf.pfor vs TF.

The body is a chain of elementwise, matmul, reduction and reshape ops built in a Python
loop, sized to about 100 and 2,000 ops. For pf.pfor and for TensorFlow's built-in
``tf.vectorized_map`` (``fallback_to_while_loop=False``) on the same body it reports

- ``convert``: seconds to trace and convert the body into a graph (the call of
  ``pf.pfor`` / ``tf.vectorized_map`` while a graph is being built), per body op;
- ``tf.function``: the same inside ``tf.function(...).get_concrete_function()``, which
  adds building the function (what a user waits for on a first call), per body op;
- ``ops/op``: graph ops the call added (ops in the graph after it minus before), per
  body op. Body ops are the ops of ``loop_fn`` traced alone (constants included);
- ``dyn-n``: convert time and ops/op again with the number of iterations known only at
  run time (x's first dimension unknown), where static shapes cannot help.

Then it converts while loops with per-iteration trip counts nested ``d`` deep (each
body converted on trial once per layout of its inputs, so the work grows linearly with
``d``): seconds to convert and function graphs converted (trials included).

Then it times repeated eager calls: a ``pf.vmap``-decorated function (converted once,
cached) vs ``tf.vectorized_map`` called eagerly (TensorFlow retraces and reconverts on
every eager call) vs the hand-batched computation. ``--profile`` adds the cProfile top
entries of pf.pfor's conversion of the largest body.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
import warnings

import _bench  # first: it quiets TensorFlow's logging before TensorFlow loads
import numpy as np
import tensorflow as tf

import pfor_core as pf
from pfor_core import api

D = 16  # feature size of the chain body


def chain(xi, w, v, groups: int):
    """``groups`` rounds of tanh, matmul, reduce_sum, broadcasting sub, reshape, mul,
    reshape on one example ``xi`` of shape [D] (10 ops per round, constants included)."""
    h = tf.reshape(xi, [1, D])
    for _ in range(groups):
        h = tf.matmul(tf.tanh(h), w)
        h = h - tf.reduce_sum(h, axis=1, keepdims=True)
        h = tf.reshape(tf.reshape(h, [D]) * v, [1, D])
    return h


def inputs(n: int, dynamic: bool = False):
    """x [n, D], w [D, D], v [D]; with ``dynamic`` (in a graph) x's first dimension is
    known only at run time, so conversion cannot use a static n."""
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((n, D)), tf.float32)
    if dynamic:
        x = tf.compat.v1.placeholder_with_default(x, [None, D])
    w = tf.constant(rng.standard_normal((D, D)) / 4.0, tf.float32)
    v = tf.constant(rng.standard_normal(D), tf.float32)
    return x, w, v


def body_op_count(loop_fn) -> int:
    """Ops of ``loop_fn`` traced alone, less its inputs and the output identities."""
    graph = tf.function(loop_fn, autograph=False).get_concrete_function(
        tf.TensorSpec([], tf.int32)).graph
    outputs = {t.op for t in graph.outputs}
    return sum(1 for op in graph.get_operations()
               if op.type != "Placeholder" and op not in outputs)


def groups_for(target_ops: int, x, w, v) -> int:
    """The number of chain rounds that gives a body of about ``target_ops`` ops."""
    def count(groups):
        return body_op_count(lambda i: chain(tf.gather(x, i), w, v, groups))
    base, per = count(0), count(1) - count(0)
    return max(1, round((target_ops - base) / per))


def vectorizers(fallback: str):
    """name -> fn(x, w, v, groups) that emits the vectorized chain in the current graph."""
    def with_pfor(x, w, v, groups):
        n = x.shape[0] if x.shape[0] is not None else tf.shape(x)[0]
        return pf.pfor(lambda i: chain(tf.gather(x, i), w, v, groups), n,
                       fallback=fallback)

    def with_tf(x, w, v, groups):
        return tf.vectorized_map(lambda xi: chain(xi, w, v, groups), x,
                                 fallback_to_while_loop=False)

    return {"pf.pfor": with_pfor, "tf.vectorized_map": with_tf}


def convert_in_graph(vectorize, n, groups, dynamic=False):
    """(seconds, ops added) for one call of ``vectorize`` while a graph is built."""
    graph = tf.Graph()
    with graph.as_default():
        x, w, v = inputs(n, dynamic)
        before = len(graph.get_operations())
        _, seconds = _timed(lambda: vectorize(x, w, v, groups))
        return seconds, len(graph.get_operations()) - before


def convert_in_function(vectorize, n, groups):
    x, w, v = inputs(n)
    fn = tf.function(lambda: vectorize(x, w, v, groups), autograph=False)
    return _timed(fn.get_concrete_function)[1]


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def fallbacks(n, groups) -> int:
    x, w, v = inputs(n)
    report = pf.explain(lambda i: chain(tf.gather(x, i), w, v, groups), n)
    return len(report.fallbacks)


def cost_table(sizes, n, repeats, fallback):
    x, w, v = inputs(n)
    rows = []
    for target in sizes:
        groups = groups_for(target, x, w, v)
        body_ops = body_op_count(lambda i: chain(tf.gather(x, i), w, v, groups))
        fell_back = fallbacks(n, groups)
        for name, vectorize in vectorizers(fallback).items():
            note = f" ({fell_back} ops fell back)" if name == "pf.pfor" and fell_back else ""
            convert, added = min(convert_in_graph(vectorize, n, groups) for _ in range(repeats))
            in_fn = min(convert_in_function(vectorize, n, groups) for _ in range(repeats))
            dyn, dyn_added = min(convert_in_graph(vectorize, n, groups, dynamic=True)
                                 for _ in range(repeats))
            rows.append((name + note, body_ops, f"{convert * 1e3 / body_ops:.2f}",
                         f"{in_fn * 1e3 / body_ops:.2f}", f"{added / body_ops:.2f}",
                         f"{dyn * 1e3 / body_ops:.2f}", f"{dyn_added / body_ops:.2f}"))
    return _bench.table(("vectorizer", "body ops", "convert ms/op", "tf.function ms/op",
                         "ops/op", "dyn-n ms/op", "dyn-n ops/op"), rows)


def nested_loops(depth: int, x, trips):
    """A loop_fn with ``depth`` while loops inside each other, each running the
    iteration's own number of steps (``trips[i]``)."""
    def loop_fn(i):
        xi, steps = tf.gather(x, i), tf.gather(trips, i)

        def level(k, h):
            if k == 0:
                return tf.tanh(h) * 0.5 + xi
            return tf.while_loop(lambda t, h: t < steps,
                                 lambda t, h: (t + 1, level(k - 1, h)), (0, h))[1]

        return level(depth, xi)
    return loop_fn


def conversions_of(depth, x, trips):
    """(seconds, function graphs converted) for pf.pfor of ``nested_loops`` in a new
    graph (``x`` and ``trips`` as NumPy arrays)."""
    made = []
    original = api._conversion  # pylint: disable=protected-access

    def conversion(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    api._conversion = conversion  # pylint: disable=protected-access
    try:
        with tf.Graph().as_default():
            loop_fn = nested_loops(depth, tf.constant(x), tf.constant(trips))
            _, seconds = _timed(lambda: pf.pfor(loop_fn, len(x), fallback="error"))
    finally:
        api._conversion = original  # pylint: disable=protected-access
    return seconds, sum(sum(c.conversions.values()) for c in made[:1])


def nested_table(depths, n):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((n, D)).astype(np.float32)
    trips = rng.integers(0, 4, n).astype(np.int32)
    conversions_of(1, x, trips)  # warm-up: loading the packs, first traces
    rows = []
    for depth in depths:
        seconds, count = conversions_of(depth, x, trips)
        rows.append((depth, count, f"{seconds:.2f}"))
    return _bench.table(("while loops nested", "graphs converted", "convert s"), rows)


def eager_table(n, budget, fallback):
    """Repeated eager calls of one MLP layer applied per example."""
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((n, 64)), tf.float32)
    w = tf.constant(rng.standard_normal((64, 64)) / 8.0, tf.float32)
    b = tf.constant(rng.standard_normal(64), tf.float32)

    def layer(xi):
        return tf.tanh(tf.linalg.matvec(w, xi, transpose_a=True) + b)

    vmapped = pf.vmap(layer, fallback=fallback)
    hand_fn = tf.function(lambda x: tf.tanh(x @ w + b), autograph=False)
    runs = {
        "hand-batched, eager: tf.tanh(x @ w + b)": lambda: tf.tanh(x @ w + b),
        "hand-batched in a tf.function, eager call": lambda: hand_fn(x),
        "pf.vmap(layer)(x), eager (converted once, cached)": lambda: vmapped(x),
        "pf.pfor(loop_fn, n), eager (converts every call)":
            lambda: pf.pfor(lambda i: layer(tf.gather(x, i)), n, fallback=fallback),
        "tf.vectorized_map(layer, x), eager (retraces every call)":
            lambda: tf.vectorized_map(layer, x),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = _bench.compare(runs, budget=budget, max_calls=200)
    base = next(iter(times.values()))
    rows = [(name, _bench.fmt_time(t), f"{t / base:.1f}x") for name, t in times.items()]
    return _bench.table((f"repeated eager call, n={n}, MLP layer 64->64", "per call",
                         "vs hand-batched"), rows)


def profile(n, groups, fallback, top):
    graph = tf.Graph()
    with graph.as_default():
        x, w, v = inputs(n)
        profiler = cProfile.Profile()
        profiler.enable()
        vectorizers(fallback)["pf.pfor"](x, w, v, groups)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 2000],
                        help="body sizes in ops (approximate)")
    parser.add_argument("--n", type=int, default=32, help="iterations")
    parser.add_argument("--repeats", type=int, default=3, help="conversions per figure (best)")
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 3, 5, 7],
                        help="nesting depths of while loops with per-iteration trip counts")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of timed calls per eager figure")
    parser.add_argument("--fallback", default="loop", choices=("loop", "error"),
                        help="pf.pfor's fallback mode (loop: count fallbacks and go on)")
    parser.add_argument("--profile", action="store_true",
                        help="also print cProfile's top entries for pf.pfor's conversion")
    parser.add_argument("--top", type=int, default=30, help="entries per profile listing")
    args = parser.parse_args(argv)
    tf.get_logger().setLevel("ERROR")
    warnings.simplefilter("ignore", pf.FallbackWarning)
    print(_bench.header("conversion cost: pf.pfor vs tf.vectorized_map"))
    print(cost_table(args.sizes, args.n, args.repeats, args.fallback))
    print("\nconvert = trace + convert while a graph is built (n static); tf.function = "
          "get_concrete_function(), which adds building the function; ops/op = graph ops "
          "added per body op; dyn-n = the same with n known only at run time.\n")
    print(nested_table(args.depths, args.n))
    print("\ngraphs converted = function graphs the walk converted, trials included "
          "(linear in the depth: each body once per layout of its inputs).\n")
    print(eager_table(args.n, args.budget, args.fallback))
    if args.profile:
        x, w, v = inputs(args.n)
        groups = groups_for(max(args.sizes), x, w, v)
        print(f"\ncProfile of pf.pfor converting the {max(args.sizes)}-op body "
              "(in a graph under construction):")
        print(profile(args.n, groups, args.fallback, args.top))


if __name__ == "__main__":
    sys.exit(main())
