"""The fallback loop with per-iteration tensor lists: each iteration's own list goes
in (its row of every item, only its own items where rows hold their own numbers), and
the lists the iterations make come out stacked again, each row's length kept."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing


def _grown_under_cond(flags, sizes, per_row_size):
    """A TensorArray the taken branch grows for its rows only (no converter takes that:
    rows would differ in length), made of each row's own size where ``per_row_size``."""
    def body(i):
        size = sizes[i] if per_row_size else 1
        ta = tf.TensorArray(tf.float32, size=size, dynamic_size=True, element_shape=[2])
        x = tf.cast(i, tf.float32) + tf.ones([2])
        ta = ta.write(0, x)  # a per-iteration list enters the fallback
        end = ta.size()  # (an eager TensorArray's size changes as it is written)
        ta = tf.cond(flags[i], lambda: ta.write(end, -x).write(end + 1, x * x), lambda: ta)
        return ta.stack() * 2.0  # the list the fallback made is read after it
    return body


@settings(deadline=None, max_examples=6)
@given(rows=st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=5),
       per_row_size=st.booleans(), graph=st.booleans())
def test_a_list_grown_under_a_per_iteration_conditional_runs_in_the_fallback(
        rows, per_row_size, graph):
    flags = tf.constant([f for f, _ in rows])
    sizes = tf.constant([s for _, s in rows])
    body = _grown_under_cond(flags, sizes, per_row_size)
    testing.assert_matches_loop(body, len(rows), ragged=True, fallback="loop", graph=graph)


def test_the_fallback_reads_lists_by_each_rows_items():
    """Rows of their own list lengths (a per-iteration size) each get their own items."""
    sizes = tf.constant([1, 3, 2])
    flags = tf.constant([False, True, False])
    with pytest.raises(pf.ConversionError, match="fixed size"):  # so it falls back
        pf.pfor(_grown_under_cond(flags, sizes, True), 3, fallback="error")
    got = pf.pfor(_grown_under_cond(flags, sizes, True), 3, fallback="loop",
                  ragged_outputs=True)
    assert [len(r) for r in got.to_list()] == [1, 5, 2]
    np.testing.assert_allclose(got[1].numpy(), [[4, 4], [0, 0], [0, 0], [-4, -4], [8, 8]])
