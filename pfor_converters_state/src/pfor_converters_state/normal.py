"""Stateless normal and truncated normal draws rebuilt from per-row Philox streams.

TensorFlow's kernels turn Philox words into normals by Box-Muller: a float pair from
two words ``x0, x1`` (a double pair from four: ``x0, x1`` and ``x2, x3``) is
``sqrt(-2 log u1) * (sin v, cos v)`` with ``u1 = max(uniform(x0), 1e-7)`` and
``v = 2 pi uniform(x1)`` (the product taken in double, ``v`` rounded to the type).
- Normal: the output takes pairs from the stream in order (element ``2k`` the sine,
  ``2k + 1`` the cosine of pair ``k``); half and bfloat16 compute in float and round.
- Truncated normal: output groups of 4 elements (2 for double), group ``g`` reading the
  stream from block ``256 g`` (``128 g`` for double); candidates come in pairs as above,
  each kept if ``|x| < 2``, until the group is full. We draw ``_CANDIDATES`` candidates
  per group (8 blocks, 16 for double) and keep each group's first accepted ones, with no
  loop. Running out needs at least 29 rejections (rate 4.6%) among 32 candidates (31 for
  double), a chance below 1e-34 per group; it is checked nonetheless (an assertion
  fails rather than return a wrong draw).

Exactness: the kernel calls glibc's ``logf``/``sincosf`` (``log``/``sincos`` for double),
which are not correctly rounded, and TensorFlow's ops do not match them bit for bit. We
round where the kernel rounds, computing float's transcendental steps in double, so
most elements are bit-exact and the rest are within a few ulps: a relative error below
2e-6 for float32 (observed at most 3 ulps) and 1e-13 for float64 (2 ulps); half and
bfloat16 are within one ulp of their type. A truncated candidate within a few ulps of
+-2 could be kept where the kernel drops it (or the reverse), shifting its group; the
chance is about 1e-9 per candidate.
"""

from __future__ import annotations

import math

import tensorflow as tf

from pfor_converters_state import philox

_TWO_PI = 2 * math.pi  # the kernel's 2 * M_PI, a double
_CANDIDATES = 32  # truncated-normal candidates drawn per output group
_RESERVED = 256  # kReservedSamplesPerOutput: stream words reserved per output


def group_size(dtype) -> int:
    """Elements per Philox block (and per truncated-normal group)."""
    return 2 if tf.as_dtype(dtype) == tf.float64 else 4


def _box_muller_float(x0, x1):
    """BoxMullerFloat: two float32 normals from two words (uint64 holding 32 bits)."""
    u1 = tf.maximum(philox.uniform(x0, tf.float32), tf.constant(1e-7, tf.float32))
    v1 = tf.cast(_TWO_PI * tf.cast(philox.uniform(x1, tf.float32), tf.float64), tf.float32)
    # logf / sincosf in double rounded once: closer to glibc than float32 ops are.
    log_u1 = tf.cast(tf.math.log(tf.cast(u1, tf.float64)), tf.float32)
    radius = tf.sqrt(-2.0 * log_u1)
    v = tf.cast(v1, tf.float64)
    return (tf.cast(tf.sin(v), tf.float32) * radius,
            tf.cast(tf.cos(v), tf.float32) * radius)


def _box_muller_double(x0, x1, x2, x3):
    """BoxMullerDouble: two doubles from four words."""
    u1 = tf.maximum(philox.uniform_double(x0, x1), tf.constant(1e-7, tf.float64))
    v1 = _TWO_PI * philox.uniform_double(x2, x3)
    radius = tf.sqrt(-2.0 * tf.math.log(u1))
    return tf.sin(v1) * radius, tf.cos(v1) * radius


def _pairs_from_blocks(b: tf.Tensor, dtype):
    """Box-Muller over Philox blocks [..., 4]: the candidates in stream order, [..., m]
    with m = 4 (float) or 2 (double), computed in float or double."""
    if tf.as_dtype(dtype) == tf.float64:
        d0, d1 = _box_muller_double(*(b[..., k] for k in range(4)))
        return tf.stack([d0, d1], -1)
    f0, f1 = _box_muller_float(b[..., 0::2], b[..., 1::2])  # pairs (w0, w1), (w2, w3)
    return tf.reshape(tf.stack([f0, f1], -1), tf.concat([tf.shape(b)[:-1], [4]], 0))


def _flatten_groups(x: tf.Tensor, size) -> tf.Tensor:
    """[n, groups, k] -> the first ``size`` of each row's ``groups * k`` values."""
    d = tf.shape(x, out_type=tf.int64)
    return tf.reshape(x, tf.stack([d[0], d[1] * d[2]]))[:, :size]


def normal(key: tf.Tensor, counter: tf.Tensor, size, dtype) -> tf.Tensor:
    """Each row's StatelessRandomNormal draw of ``size`` elements, [n, size]."""
    size = tf.cast(size, tf.int64)
    k = group_size(dtype)
    count = (size + k - 1) // k
    b = philox.blocks(key, counter, tf.cast(tf.range(count), tf.uint64))
    values = _flatten_groups(_pairs_from_blocks(b, dtype), size)
    return tf.cast(values, dtype)


def truncated_normal(key: tf.Tensor, counter: tf.Tensor, size, dtype) -> tf.Tensor:
    """Each row's StatelessTruncatedNormal draw of ``size`` elements, [n, size]."""
    size = tf.cast(size, tf.int64)
    k = group_size(dtype)
    groups = tf.cast(tf.range((size + k - 1) // k), tf.uint64)
    skip = tf.constant(k * _RESERVED // 4, tf.uint64)  # blocks between groups
    blocks = _CANDIDATES // k  # a block gives 4 float or 2 double candidates
    offsets = groups[:, None] * skip + tf.constant(list(range(blocks)), tf.uint64)[None, :]
    candidates = _pairs_from_blocks(philox.blocks(key, counter, offsets), dtype)
    d = tf.shape(candidates)  # [n, groups, blocks, k]
    candidates = tf.reshape(candidates, tf.stack([d[0], d[1], d[2] * d[3]]))
    accepted = tf.abs(candidates) < 2.0
    rank = tf.cumsum(tf.cast(accepted, tf.int32), axis=-1, exclusive=True)
    enough = tf.debugging.assert_greater_equal(
        tf.reduce_sum(tf.cast(accepted, tf.int32), -1), k,
        message="truncated normal: a group rejected too many candidates")
    with tf.control_dependencies([enough]):
        picks = [tf.reduce_sum(tf.where(accepted & tf.equal(rank, j), candidates, 0.0), -1)
                 for j in range(k)]  # the group's j-th accepted candidate
    return tf.cast(_flatten_groups(tf.stack(picks, -1), size), dtype)
