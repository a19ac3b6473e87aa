"""Per-iteration values that a loop with per-iteration trip counts reads one item of
per step are read by row number, not compacted with the active rows (row_views.py)."""

from unittest import mock

import tensorflow as tf
from hypothesis import given, settings, strategies as st

from pfor_core import testing
from pfor_controlflow.loops import row_views


def _views_read(body, n, **kwargs):
    """How many items were read through a row view; checks the result too."""
    read = []
    original = row_views._item  # pylint: disable=protected-access

    def spy(view, index, **kwargs):
        read.append(view)
        return original(view, index, **kwargs)

    with mock.patch.object(row_views, "_item", spy):
        testing.assert_matches_loop(body, n, **kwargs)
    return len(read)


def _sequences(n, length=6, dim=3, seed=0):
    return tf.random.stateless_normal([max(n, 1), length, dim], seed=[seed, 5])


@given(trips=st.lists(st.integers(0, 6), min_size=0, max_size=5), graph=st.booleans(),
       gather=st.booleans(), from_end=st.booleans())
@settings(max_examples=15)
def test_items_of_each_sequence_by_step(trips, graph, gather, from_end):
    n = len(trips)
    seqs = _sequences(n)
    limits = tf.constant(trips or [0])

    def body(i):
        x = tf.gather(seqs, i)

        def step(t, h):
            # x[-1 - t] counts from the end; tf.gather takes no negative index.
            item = tf.gather(x, t) if gather else x[-1 - t] if from_end else x[t]
            return t + 1, tf.tanh(h + item)

        return tf.while_loop(lambda t, h: t < tf.gather(limits, i), step,
                             (0, tf.zeros([3])))[1]

    read = _views_read(body, n, graph=graph)
    assert read > 0 or not any(trips)


def test_per_row_index_into_each_sequence():
    """The index differs per row (a stacked begin), not only the step."""
    seqs = _sequences(4)
    offsets = tf.constant([0, 2, 1, 3])
    limits = tf.constant([3, 1, 0, 2])

    def body(i):
        x, offset = tf.gather(seqs, i), tf.gather(offsets, i)
        return tf.while_loop(lambda t, h: t < tf.gather(limits, i),
                             lambda t, h: (t + 1, h + x[t + offset]), (0, tf.zeros([3])))[1]

    assert _views_read(body, 4) > 0


def _step_loop(step_value):
    """Three sequences, each summed over its own number of steps by ``step_value(x, t)``."""
    seqs = _sequences(3)
    limits = tf.constant([2, 0, 3])

    def body(i):
        x = tf.gather(seqs, i)
        return tf.while_loop(lambda t, h: t < tf.gather(limits, i),
                             lambda t, h: (t + 1, h + step_value(x, t)),
                             (0, tf.zeros([3])))[1]
    return body


def test_a_value_read_whole_is_compacted_with_the_rows():
    body = _step_loop(lambda x, t: tf.reduce_sum(x, 0) + x[t])
    assert _views_read(body, 3) == 0  # x is also read whole: no view


def test_a_slice_of_several_items_reads_the_view_whole():
    body = _step_loop(lambda x, t: tf.reduce_sum(x[t:t + 2], 0))
    assert _views_read(body, 3) == 0  # declined: the plain converter gathers the rows
