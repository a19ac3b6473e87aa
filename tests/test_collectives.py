"""Cross-iteration collectives inside loop bodies, against values computed by hand."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing

REDUCERS = {"all_sum": np.sum, "all_mean": np.mean, "all_max": np.max, "all_min": np.min}


@given(name=st.sampled_from(sorted(REDUCERS)), n=st.integers(1, 4), stacked=st.booleans(),
       seed=st.integers(0, 99))
def test_reductions_give_every_iteration_the_same_value(name, n, stacked, seed):
    x = np.random.default_rng(seed).standard_normal([n, 3]).astype(np.float32)
    collective = getattr(pf, name)

    def body(i):
        xi = tf.gather(x, i) if stacked else tf.constant(x[0])
        return collective(xi) + 0.0 * tf.cast(i, tf.float32), xi

    shared, rows = pf.pfor(body, n, fallback="error")
    want = REDUCERS[name](rows.numpy(), axis=0)
    testing.assert_allclose(shared, tf.constant(np.broadcast_to(want, [n, 3]).copy()),
                            rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stacked", [True, False])
def test_all_gather(stacked):
    x = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))

    def body(i):
        xi = tf.gather(x, i) if stacked else x[0]
        everyone = pf.all_gather(xi)
        return everyone - xi  # per-iteration use of the gathered [n, 3] value

    got = pf.pfor(body, 4, fallback="error")
    rows = x.numpy() if stacked else np.broadcast_to(x.numpy()[0], [4, 3])
    testing.assert_allclose(got, tf.constant(rows[None] - rows[:, None]))


def test_clipping_by_the_batch_global_norm():
    grads = tf.constant(np.random.default_rng(0).standard_normal([5, 4]).astype(np.float32))

    def body(i):
        g = tf.gather(grads, i)
        norm = tf.sqrt(pf.all_sum(tf.reduce_sum(g * g)))
        return g * tf.minimum(1.0, 2.0 / norm)

    got = pf.pfor(body, 5, fallback="error")
    testing.assert_allclose(got, tf.clip_by_global_norm([grads], 2.0)[0][0], rtol=1e-5)


def test_outside_a_body_raises():
    with pytest.raises(RuntimeError, match="inside the loop body"):
        pf.all_sum(tf.ones([2]))


def test_chunking_is_refused():
    with pytest.raises(pf.ConversionError, match="parallel_iterations"):
        pf.pfor(lambda i: pf.all_sum(tf.cast(i, tf.float32)), 4, parallel_iterations=2)
