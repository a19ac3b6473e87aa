import tensorflow as tf

import pfor_core as pf
from pfor_core import testing


def test_pfor_loop_index_output():
    out = pf.pfor(lambda i: i * 2, 4, fallback="error")
    testing.assert_allclose(out, tf.constant([0, 2, 4, 6]))
