"""DynamicStitch with invariant indices and stacked or invariant data, against the
sequential loop with no fallback."""

import numpy as np
import pytest
import tensorflow as tf

from pfor_core.testing import assert_matches_loop

X = tf.constant(np.random.RandomState(2).normal(size=(3, 4, 2)), tf.float32)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("stacked", [(True, True), (True, False), (False, True)])
def test_stitch_of_rows(parallel, stacked):
    stitch = tf.raw_ops.ParallelDynamicStitch if parallel else tf.raw_ops.DynamicStitch

    def body(i):
        a = tf.gather(X, i)[:2] if stacked[0] else X[0, :2]
        b = tf.gather(X, i)[2:] * 2. if stacked[1] else X[1, 2:]
        return stitch(indices=[tf.constant([3, 0]), tf.constant([[1], [2]])],
                      data=[a, tf.reshape(b, [2, 1, 2])])

    assert_matches_loop(body, 3, graph=True)

