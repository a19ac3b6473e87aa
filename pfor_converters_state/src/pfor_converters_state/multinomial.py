"""StatelessMultinomial rebuilt per iteration from its Philox stream (``philox``).

The CPU kernel (``MultinomialFunctor``) draws for logits row ``b`` and sample ``j`` one
double ``u`` from two consecutive 32-bit words of the stream, words ``2 (b S + j)`` and
``2 (b S + j) + 1`` for ``S`` samples per row, and returns the first class whose running
total of ``exp(logit - max)`` (in double, over the finite logits) exceeds ``u`` times
the row's total. That holds when the kernel runs its rows in one shard: a shard starting
at a later row skips to another place of the stream. Eigen runs one shard when the
work (``B * 50 * (S log2 C + C)`` cost units, the kernel's estimate) is below its
threshold for a second thread; ``one_shard`` tells the converter when that is certain,
and the others fall back to the loop, which draws them exactly.

The exponentials and running totals are TensorFlow's float64 ops rather than the
kernel's loop, so they may differ from it in the last bit: a draw then differs only
when ``u`` falls within an ulp of a class boundary.
"""

from __future__ import annotations

import math

import tensorflow as tf

from pfor_converters_state import philox

# Eigen's ThreadPoolDevice::parallelFor runs one block (the kernel's single shard) while
# the total cost stays below its startup cost (100000 cycles) for any thread count.
_ONE_SHARD_COST = 100000


def one_shard(batch, classes, samples) -> bool:
    """Whether the kernel draws ``batch`` rows in one shard (static sizes, or False)."""
    if not all(isinstance(d, int) for d in (batch, classes, samples)):
        return False
    if batch * samples == 0:
        return True
    cost = int(50 * (samples * math.log(max(classes, 1)) / math.log(2) + classes))
    return batch * cost < _ONE_SHARD_COST


def draw(key, counter, logits, samples: int, output_dtype) -> tf.Tensor:
    """Each row's draw: ``key [m, 1]``, ``counter [m, 2]`` (m = 1 or n) and logits
    ``[m', B, C]`` (m' = 1 or n) -> ``[n, B, samples]``."""
    logits = tf.cast(logits, tf.float64) if logits.dtype != tf.float64 else logits
    finite = tf.math.is_finite(logits)
    lowest = tf.constant(logits.dtype.min, logits.dtype)
    top = tf.reduce_max(tf.where(finite, logits, lowest), axis=-1, keepdims=True)
    weights = tf.where(finite, tf.exp(logits - top), tf.zeros_like(logits))
    cdf = tf.cumsum(weights, axis=-1)  # [m', B, C]
    batch = tf.shape(logits)[1]
    count = tf.cast(batch, tf.int64) * samples * 2
    words = philox.words(key, counter, count)  # [m, 2 B S]
    doubles = philox.uniform_double(words[:, 0::2], words[:, 1::2])  # [m, B S]
    doubles = tf.reshape(doubles, tf.stack([tf.shape(doubles)[0], batch, samples]))
    to_find = doubles * cdf[..., -1:]  # [n, B, S]
    # upper_bound: the number of running totals <= to_find.
    below = tf.less_equal(cdf[:, :, None, :], to_find[..., None])
    return tf.reduce_sum(tf.cast(below, output_dtype), axis=-1)
