"""Tensor lists made with an element shape that differs between iterations (raw
``TensorListReserve`` / ``EmptyTensorList`` of each iteration's own shape): a list of
ragged items that keeps each row's element shape, its unset items reading as zeros of
it and its writes checked against it, also in loops of the body. Against the
sequential loop, with no fallback."""

from unittest import mock

import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

import pfor_core as pf
from pfor_core import testing
from pfor_controlflow.loops import masking

R = tf.raw_ops


def _strategy(masked):
    """A loop with per-iteration trip counts runs masked or on the active subset."""
    return mock.patch.object(masking, "pays", lambda loop: masked)


def _flat(*values):
    return tf.concat([tf.reshape(tf.cast(v, tf.float32), [-1]) for v in values], 0)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_drawn_reserved_lists_of_each_iterations_element_shape(data):
    n = data.draw(st.integers(1, 4), label="n")
    ks = tf.constant(data.draw(testing.lengths_strategy(n, 4), label="element sizes"))
    count = data.draw(st.integers(1, 3), label="items")
    per_iteration_count = data.draw(st.booleans(), label="per-iteration number of items")
    written = data.draw(st.sets(st.integers(0, count - 1)), label="items written")
    x = tf.random.stateless_normal([n, 4], seed=[n, 31])

    def body(i):
        k = tf.gather(ks, i)
        shape = tf.reshape(k, [1])
        size = count + (i % 2 if per_iteration_count else 0)
        items = R.TensorListReserve(element_shape=shape, num_elements=size,
                                    element_dtype=tf.float32)
        for t in sorted(written):
            items = R.TensorListSetItem(input_handle=items, index=t,
                                        item=tf.gather(x, i)[:k] * float(t + 1))
        first = R.TensorListGetItem(input_handle=items, index=0, element_shape=shape,
                                    element_dtype=tf.float32)
        whole = R.TensorListStack(input_handle=items, element_shape=shape,
                                  element_dtype=tf.float32)
        own_shape = R.TensorListElementShape(input_handle=items, shape_type=tf.int32)
        return _flat(whole, first, own_shape, R.TensorListLength(input_handle=items))

    testing.assert_matches_loop(body, n, ragged=True, modes=testing.draw_modes(data))


@pytest.mark.parametrize("steps", ["invariant", "per-iteration"])
@pytest.mark.parametrize("masked", [False, True])
def test_pushes_in_a_loop_into_an_empty_list_of_a_partly_known_element_shape(
        steps, masked, case_modes):
    x = tf.random.stateless_normal([3, 4, 5], seed=[3, 32])
    ks = tf.constant([2, 0, 3])

    def body(i):
        k = tf.gather(ks, i)
        items = R.EmptyTensorList(element_shape=tf.stack([k, -1]), max_num_elements=-1,
                                  element_dtype=tf.float32)
        limit = 3 if steps == "invariant" else i + 1

        def step(t, items):
            item = tf.gather(x, i)[:k, t:t + 2]  # [k, 2]: fits [k, -1]
            return t + 1, R.TensorListPushBack(input_handle=items, tensor=item)

        _, items = tf.while_loop(lambda t, items: t < limit, step, (0, items))
        whole = R.TensorListStack(input_handle=items, element_shape=tf.stack([k, -1]),
                                  element_dtype=tf.float32)
        return _flat(whole, R.TensorListLength(input_handle=items))

    with _strategy(masked):
        testing.assert_matches_loop(body, 3, ragged=True, modes=case_modes)


def test_a_list_of_per_row_size_made_in_each_step_of_a_loop():
    """Made inside a loop of the body (as a gradient's lists are), its unset items are
    still zeros of each row's element shape."""
    x = tf.random.stateless_normal([3, 5], seed=[6, 35])
    ks = tf.constant([2, 0, 4])

    def body(i):
        k = tf.gather(ks, i)

        def step(t, total):
            items = R.TensorListReserve(element_shape=tf.reshape(k, [1]),
                                        num_elements=2 + i % 2, element_dtype=tf.float32)
            items = R.TensorListSetItem(input_handle=items, index=0,
                                        item=tf.gather(x, i)[:k] * tf.cast(t + 1, tf.float32))
            unset = R.TensorListGetItem(input_handle=items, index=1,
                                        element_shape=tf.reshape(k, [1]),
                                        element_dtype=tf.float32)
            whole = R.TensorListStack(input_handle=items, element_shape=tf.reshape(k, [1]),
                                      element_dtype=tf.float32)
            return t + 1, total + tf.reduce_sum(whole) + tf.cast(tf.size(unset) + tf.size(whole),
                                                                  tf.float32)

        return tf.while_loop(lambda t, total: t < 2, step, (0, 0.0))[1]

    testing.assert_matches_loop(body, 3, modes=testing.RUN_MODES)


def _writes_past_the_shape(where, sizes=(2, 1, 3)):
    """A body that writes ``x[i][:min(k_i, 2)]`` into a list of element shape
    ``[k_i]``, which does not fit where ``k_i`` is 3: directly, in a loop, or after a
    conditional that passed the list on (``where``)."""
    x = tf.random.stateless_normal([3, 5], seed=[4, 33])
    ks = tf.constant(sizes)

    def body(i):
        k = tf.gather(ks, i)
        items = R.TensorListReserve(element_shape=tf.reshape(k, [1]), num_elements=2,
                                    element_dtype=tf.float32)
        item = tf.gather(x, i)[:tf.minimum(k, 2)]
        if where in ("invariant steps", "per-iteration steps"):
            steps = 2 if where == "invariant steps" else i % 2 + 1
            _, items = tf.while_loop(
                lambda t, items: t < steps,
                lambda t, items: (t + 1, R.TensorListSetItem(input_handle=items, index=t,
                                                             item=item)), (0, items))
        else:
            if where == "after a conditional":
                items = tf.cond(tf.reduce_sum(x) > -1e9,  # the same in every iteration
                                lambda: R.TensorListSetItem(input_handle=items, index=0,
                                                            item=tf.gather(x, i)[:k]),
                                lambda: items)
            items = R.TensorListSetItem(input_handle=items, index=1, item=item)
        return tf.reduce_sum(R.TensorListStack(input_handle=items, element_shape=-1,
                                               element_dtype=tf.float32))

    return body


@pytest.mark.parametrize("where, masked", [
    ("directly", False), ("invariant steps", False), ("per-iteration steps", False),
    ("per-iteration steps", True), ("after a conditional", False)])
def test_a_write_that_does_not_fit_the_iterations_element_shape_fails_like_the_loop(
        where, masked):
    with _strategy(masked):
        testing.assert_fails_like_loop(_writes_past_the_shape(where), 3,
                                       match="element shape|incompatible")


def test_writes_that_fit_after_a_conditional():
    testing.assert_matches_loop(_writes_past_the_shape("after a conditional", (2, 1, 2)), 3, modes=testing.RUN_MODES)


def test_a_reserved_list_of_a_partly_known_element_shape_fails_clearly():
    """Its unset items would read as zeros of a shape pfor does not know."""
    ks = tf.constant([2, 1])

    def body(i):
        shape = tf.stack([tf.gather(ks, i), -1])
        items = R.TensorListReserve(element_shape=shape, num_elements=1,
                                    element_dtype=tf.float32)
        item = tf.ones(tf.stack([tf.gather(ks, i), 2]))  # fits: the loop runs
        items = R.TensorListSetItem(input_handle=items, index=0, item=item)
        return R.TensorListStack(input_handle=items, element_shape=-1,
                                 element_dtype=tf.float32)

    with pytest.raises(tf.errors.InvalidArgumentError, match="not fully defined"):
        pf.pfor(body, 2, fallback="error")

