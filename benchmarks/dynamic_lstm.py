"""Auto-batching the paper's dynamic LSTM: tokens/s of pfor vs a loop vs hand masking.

Each example runs its own number of steps (lengths uniform in 1..100, input 128,
state 256): the loop body is a `tf.while_loop` whose trip count is `lengths[i]`, with
no padding inside it. Compared, side by side in one run, all under `tf.function`:
- pfor: `pf.pfor` of that body (active-subset loop);
- pfor, XLA: the same under `jit_compile=True` (masked loop);
- hand masking: the batched code a user would write (padded batch, max-length steps,
  `tf.where` keeps finished rows), also under XLA;
- loop: `tf.map_fn` of the body (one example at a time);
- tf.vectorized_map: TensorFlow's built-in vectorizer (falls back to a loop for the
  while loop with a per-example trip count).
Tokens/s counts real tokens (the sum of the lengths). A second table times
per-example gradients (of the final state's squared norm with respect to the LSTM's
weights) through the same loop: pfor, a loop of tapes (`tf.map_fn`) and
`tf.vectorized_map`, at a smaller batch (`--grad-batch`); a third the same for a loss
over every step's output, collected in a `tf.TensorArray(size=lengths[i])`. Run:
    .venv/bin/python benchmarks/dynamic_lstm.py [--batch 128] [--grad-batch 32] [--skip-slow]
"""

import argparse
import warnings

import numpy as np
import tensorflow as tf

from _bench import compare, header, table  # pylint: disable=import-error

import pfor_core as pf


def lstm_step(x_t, h, c, weights, bias):
    z = tf.matmul(tf.concat([x_t, h], -1), weights) + bias
    f, g, o, u = tf.split(z, 4, axis=-1)
    c = tf.sigmoid(f) * c + tf.sigmoid(u) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(c), c


def data(batch, dim, state, max_len, seed=0):
    """``make``'s inputs, lengths, weights and bias as numpy arrays (for JAX)."""
    rng = np.random.default_rng(seed)
    return {"inputs": rng.normal(size=[batch, max_len, dim]).astype(np.float32),
            "lengths": rng.integers(1, max_len + 1, size=[batch]).astype(np.int32),
            "weights": (rng.normal(size=[dim + state, 4 * state])
                        / np.sqrt(dim + state)).astype(np.float32),
            "bias": np.zeros([4 * state], np.float32)}


def per_example(inputs, lengths, weights, bias):
    """The loop body for one example: a `tf.while_loop` to its own length."""
    state = weights.shape[1] // 4

    def body(i):
        x, steps = tf.gather(inputs, i), tf.gather(lengths, i)

        def step(t, h, c):
            h, c = lstm_step(x[t][None], h, c, weights, bias)
            return t + 1, h, c

        zeros = tf.zeros([1, state])
        return tf.while_loop(lambda t, h, c: t < steps, step, (0, zeros, zeros))[1][0]
    return body


def make(batch, dim, state, max_len, seed=0):
    inputs, lengths, weights, bias = (
        tf.constant(a) for a in data(batch, dim, state, max_len, seed).values())
    body = per_example(inputs, lengths, weights, bias)

    def masked():
        def step(t, h, c):
            h2, c2 = lstm_step(inputs[:, t], h, c, weights, bias)
            live = (t < lengths)[:, None]
            return t + 1, tf.where(live, h2, h), tf.where(live, c2, c)

        zeros = tf.zeros([batch, state])
        return tf.while_loop(lambda t, h, c: t < tf.reduce_max(lengths), step,
                             (0, zeros, zeros))[1]

    def grad_body(i):
        with tf.GradientTape() as tape:
            tape.watch(weights)
            h = body(i)
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, weights)

    return body, masked, grad_body, int(tf.reduce_sum(lengths))


def outputs_grad_body(batch, seed=2):
    """Per-example gradients of a loss over every step's output, which each example
    collects in a ``tf.TensorArray`` of its own length (``size=lengths[i]``)."""
    inputs, lengths, weights, bias = (
        tf.constant(a) for a in data(batch, 128, 256, 100, seed).values())

    def grad_body(i):
        x, steps = tf.gather(inputs, i), tf.gather(lengths, i)
        with tf.GradientTape() as tape:
            tape.watch(weights)
            outputs = tf.TensorArray(tf.float32, size=steps, element_shape=[1, 256])

            def step(t, h, c, outputs):
                h, c = lstm_step(x[t][None], h, c, weights, bias)
                return t + 1, h, c, outputs.write(t, h)

            zeros = tf.zeros([1, 256])
            outputs = tf.while_loop(lambda t, *_: t < steps, step,
                                    (0, zeros, zeros, outputs))[3]
            loss = tf.reduce_mean(tf.square(outputs.stack()))
        return tape.gradient(loss, weights)

    return grad_body, int(tf.reduce_sum(lengths))


def _gradients_table(batch, skip_slow, outputs=False):
    if outputs:
        grad_body, tokens = outputs_grad_body(batch)
    else:
        _, _, grad_body, tokens = make(batch, 128, 256, 100, seed=1)
    fns = {"pfor": tf.function(lambda: pf.pfor(grad_body, batch, fallback="error"))}
    if not skip_slow:
        fns["loop of tapes (tf.map_fn)"] = tf.function(
            lambda: tf.map_fn(grad_body, tf.range(batch), fn_output_signature=tf.float32))
    status = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tf.function(lambda: tf.vectorized_map(grad_body, tf.range(batch)))()
        fns["tf.vectorized_map"] = tf.function(
            lambda: tf.vectorized_map(grad_body, tf.range(batch)))
    except Exception as err:  # pylint: disable=broad-except
        status["tf.vectorized_map"] = f"fails: {type(err).__name__}"
    if not skip_slow:
        reference = fns["loop of tapes (tf.map_fn)"]()
        for name, fn in fns.items():
            np.testing.assert_allclose(fn(), reference, rtol=2e-3, atol=2e-4, err_msg=name)
    times = compare(fns, budget=2.0, rounds=3)
    rows = [(name, f"{t * 1e3:.1f}", f"{batch / t:,.0f}") for name, t in times.items()]
    rows += [(name, why, "-") for name, why in status.items()]
    what = ("of a loss over every step's output (a TensorArray of each example's length)"
            if outputs else "through the loop")
    print(f"\nPer-example gradients {what}, batch {batch} ({tokens} tokens)")
    print(table(("implementation", "ms/batch", "examples/s"), rows))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--grad-batch", type=int, default=32)
    parser.add_argument("--skip-slow", action="store_true",
                        help="leave out the loop and tf.vectorized_map")
    args = parser.parse_args()
    batch = args.batch
    body, masked, _, tokens = make(batch, 128, 256, 100)
    fns = {
        "pfor": tf.function(lambda: pf.pfor(body, batch, fallback="error")),
        "pfor, XLA": tf.function(lambda: pf.pfor(body, batch, fallback="error"),
                                 jit_compile=True),
        "hand masking": tf.function(masked),
        "hand masking, XLA": tf.function(masked, jit_compile=True),
    }
    if not args.skip_slow:
        fns["loop (tf.map_fn)"] = tf.function(
            lambda: tf.map_fn(body, tf.range(batch), fn_output_signature=tf.float32))
        fns["tf.vectorized_map"] = tf.function(
            lambda: tf.vectorized_map(body, tf.range(batch)))
    reference = fns["hand masking"]()
    for name, fn in fns.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_allclose(fn(), reference, rtol=2e-3, atol=2e-4,
                                       err_msg=name)
    times = compare(fns, budget=2.0, rounds=3)
    best_hand = min(times["hand masking"], times["hand masking, XLA"])
    rows = [(name, f"{t * 1e3:.1f}", f"{tokens / t:,.0f}", f"{best_hand / t:.2f}")
            for name, t in times.items()]
    print(header(f"Dynamic LSTM, batch {batch}, input 128, state 256, lengths 1..100 "
                 f"({tokens} tokens)"))
    print(table(("implementation", "ms/batch", "tokens/s", "vs best hand masking"), rows))
    _gradients_table(args.grad_batch, args.skip_slow)
    _gradients_table(args.grad_batch, args.skip_slow, outputs=True)


if __name__ == "__main__":
    main()
