"""Random chains of math and array ops composed into loop bodies, against the loop.

Each step draws an op and its operands from a pool of values of known per-iteration
shape; the pool starts with stacked rows and invariant tensors, so every invariance
combination shows up somewhere in the chain. No fallback is allowed.
"""

import numpy as np
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from pfor_core import testing

A, B = 3, 4  # per-iteration values are [A, B], [B, A], [A] or [B]


def _unary(name, fn):
    return name, 1, lambda shapes: True, fn, lambda shapes: shapes[0]


STEPS = [
    _unary("tanh", tf.tanh),
    _unary("square", tf.square),
    _unary("abs+exp", lambda x: tf.exp(-tf.abs(x))),
    _unary("cumsum", lambda x: tf.cumsum(x, axis=-1)),
    _unary("reverse", lambda x: tf.reverse(x, axis=[0])),
    ("add", 2, lambda s: s[0] == s[1], tf.add, lambda s: s[0]),
    ("mul-broadcast", 2, lambda s: len(s[0]) == 2 and s[1] == s[0][-1:], tf.multiply,
     lambda s: s[0]),
    ("maximum", 2, lambda s: s[0] == s[1], tf.maximum, lambda s: s[0]),
    ("where", 2, lambda s: s[0] == s[1], lambda x, y: tf.where(x > y, x, y),
     lambda s: s[0]),
    ("matmul", 2, lambda s: len(s[0]) == 2 and len(s[1]) == 2 and s[0][1] == s[1][0],
     tf.matmul, lambda s: (s[0][0], s[1][1])),
    ("matvec", 2, lambda s: len(s[0]) == 2 and s[1] == s[0][1:], tf.linalg.matvec,
     lambda s: s[0][:1]),
    ("transpose", 1, lambda s: len(s[0]) == 2, tf.transpose, lambda s: s[0][::-1]),
    ("reduce_sum", 1, lambda s: len(s[0]) == 2, lambda x: tf.reduce_sum(x, axis=1),
     lambda s: s[0][:1]),
    ("reduce_max", 1, lambda s: len(s[0]) == 2, lambda x: tf.reduce_max(x, axis=0),
     lambda s: s[0][1:]),
    ("softmax-ish", 1, lambda s: True,
     lambda x: x - tf.reduce_logsumexp(x, axis=-1, keepdims=True), lambda s: s[0]),
    ("reshape", 1, lambda s: len(s[0]) == 2,
     lambda x: tf.reshape(tf.reshape(x, [-1]), [x.shape[1], x.shape[0]]),
     lambda s: s[0][::-1]),
    ("outer", 2, lambda s: len(s[0]) == 1 and len(s[1]) == 1,
     lambda x, y: x[:, None] * y[None, :], lambda s: (s[0][0], s[1][0])),
    ("concat-slice", 2, lambda s: s[0] == s[1] and len(s[0]) == 2,
     lambda x, y: tf.concat([x, y], axis=0)[1:1 + x.shape[0]], lambda s: s[0]),
    ("stack-sum", 2, lambda s: s[0] == s[1],
     lambda x, y: tf.reduce_mean(tf.stack([x, y]), axis=0), lambda s: s[0]),
    ("gather", 1, lambda s: len(s[0]) == 2,
     lambda x: tf.gather(x, [1, 0, 1], axis=1 if x.shape[1] > 1 else 0)[:, :1],
     lambda s: (s[0][0], 1) if s[0][1] > 1 else None),
]


@st.composite
def chains(draw):
    n = draw(st.integers(0, 4))
    length = draw(st.integers(1, 8))
    program = []
    shapes = [(A, B), (B, A), (B,), (A,)]
    stacked = [draw(st.booleans()) for _ in shapes]
    stacked[0] = True
    for _ in range(length):
        name, arity, ok, _fn, out = draw(st.sampled_from(STEPS))
        pool = list(range(len(shapes)))
        operands = [draw(st.sampled_from(pool)) for _ in range(arity)]
        operand_shapes = [shapes[k] for k in operands]
        if not ok(operand_shapes) or out(operand_shapes) is None:
            continue
        program.append((name, operands))
        shapes.append(tuple(out(operand_shapes)))
    return n, stacked, program


STEP_BY_NAME = {s[0]: s for s in STEPS}


@given(chains(), st.integers(0, 2**31 - 1))
def test_random_chains_match_the_loop(chain, seed):
    n, stacked, program = chain
    rng = np.random.RandomState(seed % (2**32))
    starts = [(A, B), (B, A), (B,), (A,)]
    inputs = [tf.constant(rng.uniform(-1, 1, ([n] if s else []) + list(shape)).astype(np.float32))
              for shape, s in zip(starts, stacked)]

    def body(i):
        pool = [tf.gather(x, i) if s else x for x, s in zip(inputs, stacked)]
        for name, operands in program:
            pool.append(STEP_BY_NAME[name][3](*[pool[k] for k in operands]))
        return pool[-1] if program else pool[0]

    testing.assert_matches_loop(body, n, rtol=1e-4, atol=1e-4)
