"""pfor demo: a few loop bodies vectorized, checked against the loop, and timed.

Each body is written for ONE example (``fn(row, ...)``). For each we

1. check ``pf.pfor(loop_fn, n, fallback="error")`` against the sequential loop (a body
   that needs the fallback because a converter is missing is reported, not fatal), and
2. time one call of the same computation done four ways:

   - ``python loop``: ``tf.stack([fn(x[i]) for i in range(n)])``, eagerly;
   - ``tf.map_fn``: a sequential ``tf.while_loop`` inside a ``tf.function`` (traced once);
   - ``pf.vmap``: called eagerly; it converts once per input signature and caches, so the
     per-call time excludes tracing and conversion;
   - ``tf.vectorized_map``: TensorFlow's built-in vectorizer inside a ``tf.function``
     (traced once; called eagerly it would retrace and reconvert on every call).

A second table shows the applications pfor is for, each checked against the loop it
replaces and timed against it (and against TensorFlow's own vectorizer and hand-batched
code where there is one): a jacobian, per-example gradients of the paper's MNIST CNN and
the auto-batched dynamic LSTM (each sequence runs its own number of steps).

Run with ``bash dev/demo`` (or ``.venv/bin/python examples/demo.py [--n N] [--quick]``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
import warnings
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import pfor_core as pf  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable  # one example's computation: fn(*rows)
    args: tuple  # tensors with a leading example axis of size n


def standard_normal(rng, *shape):
    return tf.constant(rng.standard_normal(shape), tf.float32)


def make_cases(n: int, seed: int = 0) -> list[Case]:
    """The demo's loop bodies: math and array ops a per-example computation uses."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return standard_normal(rng, *shape)

    d = 64
    w, b = normal(d, d) / 8.0, normal(d)
    w2 = normal(d, 16) / 8.0
    table = normal(1000, 32)
    a = normal(16, 16) / 4.0

    def affine_tanh(x):  # x: [d]
        return tf.tanh(tf.linalg.matvec(w, x, transpose_a=True) + b)

    def normalize_rows(x):  # x: [16, 32], each row to mean 0, variance 1
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        centered = x - mean
        var = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
        return centered * tf.math.rsqrt(var + 1e-5)

    def tanh_jacobian(x):  # x: [d]; d tanh(W^T x) / dx, then projected by w2
        h = tf.tanh(tf.linalg.matvec(w, x, transpose_a=True))
        jac = tf.expand_dims(1.0 - h * h, 1) * tf.transpose(w)  # [d, d]
        return tf.matmul(jac, w2)  # stacked x invariant matmul

    def embedding_bag(ids):  # ids: [8] int32 rows of the table
        return tf.reduce_sum(tf.gather(table, ids), axis=0)

    def bilinear_einsum(x):  # x: [8, 16]
        return tf.einsum("td,de,se->ts", x, a, x)

    return [
        Case("affine + tanh", affine_tanh, (normal(n, d),)),
        Case("normalize rows", normalize_rows, (normal(n, 16, 32),)),
        Case("tanh jacobian @ W", tanh_jacobian, (normal(n, d),)),
        Case("gather (embedding bag)", embedding_bag,
             (tf.constant(rng.integers(0, 1000, size=(n, 8)), tf.int32),)),
        Case("einsum x A x^T", bilinear_einsum, (normal(n, 8, 16),)),
    ]


# -- the four ways of running a case ----------------------------------------------------

def python_loop(case: Case):
    n = int(case.args[0].shape[0])
    return tf.stack([case.fn(*[a[i] for a in case.args]) for i in range(n)])


def map_fn_runner(case: Case):
    def run(*args):
        return tf.map_fn(lambda rows: case.fn(*rows), args,
                         fn_output_signature=tf.float32)
    return tf.function(run, autograph=False)


def vectorized_map_runner(case: Case):
    def run(*args):
        return tf.vectorized_map(lambda rows: case.fn(*rows), args)
    return tf.function(run, autograph=False)


def loop_fn_of(case: Case):
    def loop_fn(i):
        return case.fn(*[tf.gather(a, i) for a in case.args])
    return loop_fn


# -- measuring ----------------------------------------------------------------------------

def time_per_call(fns: dict, *args, budget: float, rounds: int = 3,
                  max_calls: int = 200) -> dict:
    """Seconds per call of each ``fns[name](*args)``, measured side by side: after a
    warm-up call (tracing, conversion), ``rounds`` rounds each time a group of calls of
    every function in turn; each keeps its best group, so a busy machine disturbs all
    alike."""
    per_group = {}
    for name, fn in fns.items():
        fn(*args)  # warm-up
        start = time.perf_counter()
        fn(*args)
        one = max(time.perf_counter() - start, 1e-6)
        per_group[name] = max(1, min(max_calls, int(budget / rounds / one)))
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(per_group[name]):
                fn(*args)
            best[name] = min(best[name], (time.perf_counter() - start) / per_group[name])
    return best


def check(case: Case, reference) -> tuple[str, str]:
    """(status, fallback mode to time pf.vmap with)."""
    n = int(case.args[0].shape[0])
    try:
        got = pf.pfor(loop_fn_of(case), n, fallback="error")
    except pf.ConversionError:
        report = pf.explain(loop_fn_of(case), n)
        missing = sorted({r.op_type for r in report.fallbacks})
        return f"FALLBACK (no converter for {', '.join(missing)})", "loop"
    except Exception as err:  # a bug; report it and go on with the other bodies
        return f"ERROR {type(err).__name__}: {str(err).splitlines()[0][:120]}", ""
    diff = float(tf.reduce_max(tf.abs(tf.cast(got, tf.float64)
                                      - tf.cast(reference, tf.float64))))
    ok = np.allclose(got.numpy(), reference.numpy(), rtol=1e-4, atol=1e-4)
    return f"{'OK' if ok else 'MISMATCH'} (max abs diff {diff:.1e})", "error"


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def run_case(case: Case, budget: float) -> dict:
    reference = python_loop(case)
    status, mode = check(case, reference)
    row = {"body": case.name, "n": int(case.args[0].shape[0]), "status": status,
           "pfor": None, "vmap_tf": None, "pfor_note": "*" if mode == "loop" else ""}
    row["loop"] = time_per_call({"loop": python_loop}, case, budget=budget,
                                max_calls=20)["loop"]
    fns = {"map_fn": map_fn_runner(case)}
    if mode:
        fns["pfor"] = pf.vmap(case.fn, fallback=mode)
    try:
        vectorized = vectorized_map_runner(case)
        vectorized(*case.args)
        fns["vmap_tf"] = vectorized
    except Exception as err:  # pylint: disable=broad-except
        row["status"] += f"; tf.vectorized_map failed: {type(err).__name__}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.FallbackWarning)
        row.update(time_per_call(fns, *case.args, budget=budget))
    return row


def speedup(pfor: float | None, other: float | None) -> str:
    return "-" if pfor is None or other is None else f"{other / pfor:.1f}x"


def print_aligned(lines: list[tuple]) -> None:
    """A plain-text table: the first line is the header, the first column left-aligned."""
    widths = [max(len(line[k]) for line in lines) for k in range(len(lines[0]))]
    for k, line in enumerate(lines):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                        for j, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def print_table(rows: list[dict]) -> None:
    lines = [("body", "n", "python loop", "tf.map_fn", "pf.vmap", "tf.vectorized_map",
              "vs loop", "vs map_fn", "vs tf.vectorized_map")]
    for r in rows:
        p = r["pfor"]
        lines.append((r["body"], str(r["n"]), fmt_time(r["loop"]), fmt_time(r["map_fn"]),
                      fmt_time(p) + r.get("pfor_note", ""), fmt_time(r["vmap_tf"]),
                      speedup(p, r["loop"]), speedup(p, r["map_fn"]),
                      speedup(p, r["vmap_tf"])))
    print_aligned(lines)


# -- applications: derivatives and auto-batching ------------------------------------------

@dataclasses.dataclass(frozen=True)
class Application:
    """One computation done several ways; each way is a tf.function of ``args``."""
    name: str
    how: str  # what the loop / TF built-in / hand-batched ways are, for the legend
    n: int  # iterations pfor vectorizes
    args: tuple
    loop: Callable  # the reference: one iteration at a time
    pfor: Callable
    builtin: Callable  # TensorFlow's own vectorizer
    hand: Callable | None = None  # batched by hand


def jacobian_application(rng) -> Application:
    """d mlp(x) / dx of a two-layer tanh MLP, [64] -> [64]: one gradient per output."""
    w1, b1 = standard_normal(rng, 64, 128) / 8.0, standard_normal(rng, 128)
    w2, b2 = standard_normal(rng, 128, 64) / 11.0, standard_normal(rng, 64)

    def mlp(x):  # x: [64]
        h = tf.tanh(tf.linalg.matvec(w1, x, transpose_a=True) + b1)
        return tf.tanh(tf.linalg.matvec(w2, h, transpose_a=True) + b2)

    def tape_jacobian(use_pfor):
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = mlp(x)
            return tape.jacobian(y, x, experimental_use_pfor=use_pfor)
        return tf.function(run)

    return Application(
        "jacobian, tanh MLP 64 -> 64",
        "loop = tape.jacobian(experimental_use_pfor=False); pfor = pf.jacobian; "
        "TF built-in = tape.jacobian (TF's pfor)",
        64, (standard_normal(rng, 64),),
        loop=tape_jacobian(False),
        pfor=tf.function(lambda x: pf.jacobian(mlp, x, fallback="error")),
        builtin=tape_jacobian(True))


def mnist_application(rng, batch: int) -> Application:
    """Per-example gradients of the paper's MNIST CNN (its dense layer 256 wide, not 1024,
    to keep the demo fast). Continuous random inputs, so max-pooling meets no ties."""
    keras.utils.set_random_seed(0)  # the same weights every run
    model = keras.Sequential([
        keras.Input([28, 28, 1]),
        keras.layers.Conv2D(32, 5, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 5, activation="relu"), keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(), keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(10)])
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    variables = model.trainable_variables

    def loss_fn(x, y):  # one example as a batch of one: x [1, 28, 28, 1], y [1]
        return cross_entropy(y, model(x, training=False))

    def gradients(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(x, y)
        return tape.gradient(loss, variables)

    def loop(x, y):  # a Python loop of GradientTapes, one example at a time
        rows = [gradients(x[i:i + 1], y[i:i + 1]) for i in range(batch)]
        return [tf.stack(g) for g in zip(*rows)]

    def builtin(x, y):
        return tf.vectorized_map(lambda row: gradients(row[0][None], row[1][None]), (x, y))

    def ours(x, y):
        return pf.per_example_gradients(loss_fn, variables, x, y, keepdims=True,
                                        fallback="error")

    x = standard_normal(rng, batch, 28, 28, 1)
    y = tf.constant(rng.integers(0, 10, size=batch), tf.int32)
    return Application(
        "per-example grads, MNIST CNN",
        "loop = Python loop of GradientTapes; pfor = pf.per_example_gradients; "
        "TF built-in = tf.vectorized_map",
        batch, (x, y), loop=tf.function(loop), pfor=tf.function(ours),
        builtin=tf.function(builtin))


def lstm_application(rng, batch: int, max_len: int, dim: int = 128,
                     state: int = 256) -> Application:
    """The paper's auto-batched dynamic LSTM: each sequence runs its own number of steps,
    a tf.while_loop with trip count lengths[i] and no padding inside."""
    inputs = standard_normal(rng, batch, max_len, dim)
    lengths = tf.constant(rng.integers(1, max_len + 1, size=batch), tf.int32)
    weights = standard_normal(rng, dim + state, 4 * state) / np.sqrt(dim + state)
    bias = tf.zeros([4 * state])

    def cell(x, h, c):  # x: [b, dim]; h, c: [b, state]
        z = tf.matmul(tf.concat([x, h], -1), weights) + bias
        f, g, o, u = tf.split(z, 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(u) * tf.tanh(g)
        return tf.sigmoid(o) * tf.tanh(c), c

    def lstm(x, length):  # ONE sequence, x: [max_len, dim]; runs `length` steps
        def step(t, h, c):
            h, c = cell(x[t][None], h, c)
            return t + 1, h, c

        zeros = tf.zeros([1, state])
        return tf.while_loop(lambda t, h, c: t < length, step, (0, zeros, zeros))[1][0]

    def per_row(row):
        return lstm(*row)

    def hand_masked(x, lengths):  # the whole batch for the longest length, masked
        def step(t, h, c):
            h2, c2 = cell(x[:, t], h, c)
            live = (t < lengths)[:, None]
            return t + 1, tf.where(live, h2, h), tf.where(live, c2, c)

        zeros = tf.zeros([batch, state])
        return tf.while_loop(lambda t, h, c: t < tf.reduce_max(lengths), step,
                             (0, zeros, zeros))[1]

    return Application(
        f"dynamic LSTM, lengths 1..{max_len}",
        "loop = tf.map_fn; pfor = pf.vectorized_map; TF built-in = tf.vectorized_map; "
        "by hand = the whole batch for the longest length, masked with tf.where",
        batch, (inputs, lengths),
        loop=tf.function(lambda x, steps: tf.map_fn(per_row, (x, steps),
                                                    fn_output_signature=tf.float32)),
        pfor=tf.function(lambda x, steps: pf.vectorized_map(per_row, (x, steps),
                                                            fallback="error")),
        builtin=tf.function(lambda x, steps: tf.vectorized_map(per_row, (x, steps))),
        hand=tf.function(hand_masked))


def check_application(app: Application) -> str:
    """pfor against the loop: the largest difference relative to the largest value."""
    def relative_diff(got, want):
        scale = max(float(tf.reduce_max(tf.abs(want))), 1e-30)
        return float(tf.reduce_max(tf.abs(got - want))) / scale

    pairs = zip(tf.nest.flatten(app.pfor(*app.args)), tf.nest.flatten(app.loop(*app.args)))
    rel = max(relative_diff(got, want) for got, want in pairs)
    return f"{'OK' if rel < 1e-4 else 'MISMATCH'} (rel. diff {rel:.0e})"


def run_application(app: Application, budget: float) -> dict:
    fns = {"loop": app.loop, "pfor": app.pfor, "builtin": app.builtin}
    if app.hand is not None:
        fns["hand"] = app.hand
    try:
        status = check_application(app)
    except Exception as err:  # pylint: disable=broad-except  # report it, time the others
        status = f"ERROR {type(err).__name__}: {str(err).splitlines()[0][:120]}"
        del fns["pfor"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = time_per_call(fns, *app.args, budget=budget)
    return {"name": app.name, "n": app.n, "status": status, **times}


def print_applications(rows: list[dict]) -> None:
    lines = [("application", "n", "pfor vs loop", "loop", "pfor", "TF built-in", "by hand",
              "vs loop", "vs TF built-in", "vs by hand")]
    for r in rows:
        p = r.get("pfor")
        lines.append((r["name"], str(r["n"]), r["status"], fmt_time(r["loop"]), fmt_time(p),
                      fmt_time(r["builtin"]), fmt_time(r.get("hand")),
                      speedup(p, r["loop"]), speedup(p, r["builtin"]),
                      speedup(p, r.get("hand"))))
    print_aligned(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="iterations (examples) per call")
    parser.add_argument("--batch", type=int, default=32,
                        help="batch of the MNIST and LSTM applications")
    parser.add_argument("--max-len", type=int, default=100,
                        help="longest LSTM sequence (lengths uniform in 1..max-len)")
    parser.add_argument("--budget", type=float, default=0.3,
                        help="seconds of timed calls per measurement")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and budget: checks everything runs, times nothing "
                             "meaningful (for tests)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.batch, args.max_len, args.budget = 8, 4, 10, 0.01
    tf.get_logger().setLevel("ERROR")
    started = time.perf_counter()
    rows = []
    print(f"pfor demo: {args.n} iterations per call, TensorFlow {tf.__version__}, "
          f"{os.cpu_count()} CPU cores\n")
    for case in make_cases(args.n):
        row = run_case(case, args.budget)
        print(f"  {case.name:<24} pf.pfor vs loop: {row['status']}")
        rows.append(row)
    print("\nTime per call (best of 3 rounds; the graph versions timed side by side):")
    print("  python loop       = eager Python loop over the examples, results stacked")
    print("  tf.map_fn         = sequential tf.while_loop, in a tf.function traced once")
    print("  pf.vmap           = eager call of pf.vmap(fn): converted once on the first call "
          "and cached, so conversion is excluded")
    print("  tf.vectorized_map = TensorFlow's built-in vectorizer, in a tf.function traced once")
    print("  vs X              = speed-up of pf.vmap over X; * = ran with fallback "
          "(a converter is missing)\n")
    print_table(rows)

    rng = np.random.default_rng(1)
    applications = [jacobian_application(rng), mnist_application(rng, args.batch),
                    lstm_application(rng, args.batch, args.max_len)]
    print("\nApplications: pfor checked against the loop; time per call, best of 3 rounds "
          "side by side,\neach way in a tf.function traced (and converted) once before timing; "
          'all pfor calls use fallback="error".')
    for app in applications:
        print(f"  {app.name}: {app.how}")
    print("  vs X = speed-up of pfor over X\n")
    print_applications([run_application(app, args.budget) for app in applications])
    print(f"\ndone in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
