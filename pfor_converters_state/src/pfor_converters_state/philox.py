"""Philox-4x32-10 in TensorFlow ops, one key and counter per row.

TensorFlow's stateless random kernels (Philox algorithm) fill their output from one
stream of 32-bit words: word ``w`` is lane ``w % 4`` of Philox(counter + w // 4, key),
with a 128-bit counter; an element takes 1 word (32-bit types) or 2 (64-bit types) in
order. Rebuilding that stream with elementwise integer ops batched over rows gives every
iteration exactly the draw it would make alone, loop-free. 32-bit words are held in
uint64 tensors so that a 32x32-bit product is exact. The bit-exact distributions
are built here (uniform floats, uniform and full-range integers); normals, whose kernel
calls libm ``log``/``sincos``, are in ``normal``.
"""

from __future__ import annotations

import tensorflow as tf

_MASK = 0xFFFFFFFF
_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # key schedule increments
_ROUNDS = 10


def _u64(value) -> tf.Tensor:
    return tf.constant(value, tf.uint64)


def _split(x):
    """A uint64 tensor as (low 32 bits, high 32 bits), each in a uint64."""
    return tf.bitwise.bitwise_and(x, _u64(_MASK)), tf.bitwise.right_shift(x, _u64(32))


def _join(lo, hi):
    return tf.bitwise.bitwise_or(lo, tf.bitwise.left_shift(hi, _u64(32)))


def block(counter, key):
    """Philox-4x32-10 of 4 counter words and 2 key words (uint64 tensors holding 32-bit
    values, broadcast together); returns the 4 output words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    xor = tf.bitwise.bitwise_xor
    for r in range(_ROUNDS):
        lo0, hi0 = _split(_u64(_M0) * c0)
        lo1, hi1 = _split(_u64(_M1) * c2)
        c0, c1, c2, c3 = xor(xor(hi1, c1), k0), lo1, xor(xor(hi0, c3), k1), lo0
        if r < _ROUNDS - 1:
            k0 = tf.bitwise.bitwise_and(k0 + _u64(_W0), _u64(_MASK))
            k1 = tf.bitwise.bitwise_and(k1 + _u64(_W1), _u64(_MASK))
    return c0, c1, c2, c3


def key_counter_from_seed(seed: tf.Tensor):
    """What StatelessRandomGetKeyCounter computes, per row of ``seed`` [n, 2]: the seed
    as a counter, scrambled by one Philox block under a fixed key. Returns key [n, 1]
    and counter [n, 2] (uint64), as the kernel lays them out."""
    seed = tf.bitcast(tf.cast(seed, tf.int64), tf.uint64)
    s0, s1 = seed[:, 0], seed[:, 1]
    m0, m1, m2, m3 = block(_split(s0) + _split(s1), (_u64(0x3EC8F720), _u64(0x02461E29)))
    key = _join(m0, m1)[:, None]
    counter = tf.stack([tf.zeros_like(s0), _join(m2, m3)], 1)
    return key, counter


def blocks(key: tf.Tensor, counter: tf.Tensor, offsets: tf.Tensor) -> tf.Tensor:
    """Philox blocks at ``counter + offsets`` (offsets uint64 of any shape ``s``, the
    same for every row), as uint64 words [n, *s, 4].

    ``key`` [n, 1] and ``counter`` [n, 2] are uint64 as the V2 kernels take them."""
    rank = offsets.shape.rank
    offsets = offsets[None]
    trailing = (slice(None),) + (None,) * rank  # a row's value against all offsets
    low, high = counter[:, 0][trailing], counter[:, 1][trailing]
    low_g = low + offsets  # 128-bit counter + offset: carry into the high half
    high_g = high + tf.cast(tf.less(low_g, low), tf.uint64)
    c0, c1 = _split(low_g)
    c2, c3 = _split(high_g)
    k0, k1 = _split(key[:, 0][trailing])
    return tf.stack(block((c0, c1, c2, c3), (k0, k1)), rank + 1)


def words(key: tf.Tensor, counter: tf.Tensor, count) -> tf.Tensor:
    """The first ``count`` 32-bit words of each row's stream, as uint64 [n, count]."""
    count = tf.cast(count, tf.int64)
    out = blocks(key, counter, tf.cast(tf.range((count + 3) // 4), tf.uint64))
    n = tf.shape(out, out_type=tf.int64)[0]
    return tf.reshape(out, tf.stack([n, 4 * tf.shape(out, out_type=tf.int64)[1]]))[:, :count]


def _pairs(w: tf.Tensor):
    """Consecutive words as (first, second) per 64-bit element: [n, 2m] -> 2 x [n, m]."""
    n = tf.shape(w, out_type=tf.int64)[0]
    pairs = tf.reshape(w, tf.stack([n, tf.shape(w, out_type=tf.int64)[1] // 2, 2]))
    return pairs[:, :, 0], pairs[:, :, 1]


def words_per_element(dtype) -> int:
    return 2 if tf.as_dtype(dtype).size == 8 else 1


def uniform(w: tf.Tensor, dtype) -> tf.Tensor:
    """Floats in [0, 1): random mantissa bits under exponent 0, minus one."""
    if dtype == tf.float32:
        bits = tf.bitwise.bitwise_or(tf.bitwise.bitwise_and(w, _u64(0x7FFFFF)), _u64(127 << 23))
        return tf.bitcast(tf.cast(bits, tf.uint32), tf.float32) - 1.0
    return uniform_double(*_pairs(w))


def uniform_double(x0: tf.Tensor, x1: tf.Tensor) -> tf.Tensor:
    """A double in [0, 1) from two words: 20 mantissa bits from ``x0``, 32 from ``x1``."""
    mantissa = _join(x1, tf.bitwise.bitwise_and(x0, _u64(0xFFFFF)))
    bits = tf.bitwise.bitwise_or(mantissa, _u64(1023 << 52))
    return tf.bitcast(bits, tf.float64) - 1.0


def full_int(w: tf.Tensor, dtype) -> tf.Tensor:
    """Every bit random: one word, or two (first word low) for 64-bit types."""
    dtype = tf.as_dtype(dtype)
    if dtype.size == 8:
        bits = _join(*_pairs(w))
        return bits if dtype == tf.uint64 else tf.bitcast(bits, dtype)
    bits = tf.cast(w, tf.uint32)
    return bits if dtype == tf.uint32 else tf.bitcast(bits, dtype)


def uniform_int(w: tf.Tensor, dtype, minval: tf.Tensor, maxval: tf.Tensor) -> tf.Tensor:
    """``minval + bits % (maxval - minval)``, the range taken unsigned (wrapping)."""
    dtype = tf.as_dtype(dtype)
    wide = dtype.size == 8
    bits = _join(*_pairs(w)) if wide else w
    unsigned = tf.uint64 if wide else tf.uint32

    def as_u64(v):  # the value's bits, unsigned, widened
        v = tf.bitcast(v, unsigned) if v.dtype not in (tf.uint32, tf.uint64) else v
        return tf.cast(v, tf.uint64)

    lo, hi = as_u64(minval), as_u64(maxval)
    span = hi - lo if wide else tf.bitwise.bitwise_and(hi - lo, _u64(_MASK))
    out = lo + tf.math.floormod(bits, span)
    if not wide:
        out = tf.cast(tf.bitwise.bitwise_and(out, _u64(_MASK)), tf.uint32)
    return out if out.dtype == dtype else tf.bitcast(out, dtype)
