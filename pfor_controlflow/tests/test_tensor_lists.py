"""Tensor lists (tf.TensorArray, raw TensorList ops) in a loop body convert with no fallback.

The bodies build their lists with Python loops (unrolled). Eager TensorArrays clear an
element when it is read unless clear_after_read=False, and lists in a tf.function never
do: the bodies pass clear_after_read=False so that the sequential reference agrees.
"""

import types

import pytest
import tensorflow as tf
from hypothesis import given, strategies as st

import pfor_core as pf
from pfor_core import testing
import pfor_controlflow
from pfor_controlflow.lists import plain

_R = tf.raw_ops

_ns = st.integers(0, 4)
_dims = st.lists(st.integers(0, 3), max_size=2)


def _data(shape, seed):
    return tf.random.stateless_normal(shape, seed=[seed, 7])


def _shape(dims):
    """An element-shape input (an empty list would otherwise become float32)."""
    return tf.constant(dims, tf.int32)


def _row(i, x, stacked, c):
    return tf.gather(x, i) if stacked else c


@given(n=_ns, k=st.integers(1, 3), shape=_dims, known=st.booleans(), dynamic=st.booleans(),
       own_index=st.booleans(), stacked_writes=st.lists(st.booleans(), min_size=3, max_size=3),
       graph=st.booleans(), chunk=st.sampled_from([None, 2]))
def test_tensor_array_writes_and_reads(n, k, shape, known, dynamic, own_index, stacked_writes,
                                       graph, chunk):
    x, c = _data([n, k] + shape, 1), _data([k] + shape, 2)

    def body(i):
        # A dynamic array written at the iteration's own positions must not grow
        # differently per iteration: it starts at its final size then.
        size = k if own_index or not dynamic else 1
        ta = tf.TensorArray(tf.float32, size=size, dynamic_size=dynamic,
                            element_shape=shape if known else None, clear_after_read=False)
        for t in range(k):
            position = (i + t) % k if own_index else t
            ta = ta.write(position, _row(i, x, stacked_writes[t], c)[t])
        out = {"stack": ta.stack(), "first": ta.read(0), "own": ta.read(i % k),
               "gather": ta.gather([k - 1, 0]), "gather_own": ta.gather(tf.stack([i % k, 0])),
               "size": ta.size()}
        if shape:
            out["concat"] = ta.concat()
        return out

    testing.assert_matches_loop(body, n, graph=graph, parallel_iterations=chunk)


@given(n=_ns, k=st.integers(1, 3), shape=_dims, how=st.sampled_from(["unstack", "scatter",
                                                                      "scatter_own"]),
       stacked=st.booleans(), write_after=st.booleans(), graph=st.booleans(),
       dtype=st.sampled_from([tf.float32, tf.float64, tf.int32, tf.bool]))
def test_unstack_and_scatter(n, k, shape, how, stacked, write_after, graph, dtype):
    x = tf.cast(_data([n, k] + shape, 3) * 3.0, dtype)
    c = tf.cast(_data([k] + shape, 4) * 3.0, dtype)

    def body(i):
        value = _row(i, x, stacked, c)
        ta = tf.TensorArray(dtype, size=k, clear_after_read=False)
        if how == "unstack":
            ta = ta.unstack(value)
        elif how == "scatter":
            ta = ta.scatter(list(range(k))[::-1], value)
        else:
            ta = ta.scatter((tf.range(k) + i) % k, value)
        if write_after:  # a stacked write into a maybe-invariant list
            ta = ta.write(k - 1, tf.gather(x, i)[0])
        return ta.stack(), ta.read(k - 1), ta.read(i % k)

    testing.assert_matches_loop(body, n, graph=graph)


@given(n=_ns, lengths=st.lists(st.integers(0, 3), min_size=1, max_size=3), rest=_dims,
       stacked=st.booleans(), graph=st.booleans())
def test_split_and_ragged_concat(n, lengths, rest, stacked, graph):
    total = sum(lengths)
    x, c = _data([n, total] + rest, 5), _data([total] + rest, 6)
    y = _data([n, 3] + rest, 7)

    def body(i):
        ta = tf.TensorArray(tf.float32, size=len(lengths), infer_shape=False,
                            clear_after_read=False)
        ta = ta.split(_row(i, x, stacked, c), lengths)
        first = ta.read(0)
        if stacked or len(set(lengths)) == 1:  # (stack_list needs equal element shapes)
            ta = ta.write(0, tf.gather(y, i)[:lengths[0]] + 1.0)
        return ta.concat(), first, ta.read(len(lengths) - 1)

    testing.assert_matches_loop(body, n, graph=graph)


@given(n=_ns, widths=st.lists(st.integers(0, 3), min_size=1, max_size=3), rest=_dims,
       stacked=st.lists(st.booleans(), min_size=3, max_size=3), graph=st.booleans())
def test_concat_of_elements_of_different_lengths(n, widths, rest, stacked, graph):
    x, c = _data([n, 3] + rest, 8), _data([3] + rest, 9)
    if not stacked[0]:
        # An invariant list of elements of different shapes can become stacked only
        # once no element is unset (an unset one would read with an unknown shape).
        stacked = [False] * 3

    def body(i):
        ta = tf.TensorArray(tf.float32, size=len(widths), infer_shape=False,
                            element_shape=tf.TensorShape([None] + rest), clear_after_read=False)
        for t, width in enumerate(widths):
            ta = ta.write(t, _row(i, x, stacked[t], c)[:width] * float(t + 1))
        # Also one stacked write, so that the list is stacked whatever was drawn (an
        # eager TensorArray cannot concat zero elements: the reference needs one).
        ta = ta.write(0, tf.gather(x, i)[:widths[0]])
        return ta.concat(), ta.size() + i

    testing.assert_matches_loop(body, n, graph=graph)


@given(n=_ns, shape=_dims, stacked=st.lists(st.booleans(), min_size=0, max_size=3),
       pops=st.integers(0, 3), known=st.booleans(), graph=st.booleans())
def test_push_pop_length_element_shape_resize(n, shape, stacked, pops, known, graph):
    pops = min(pops, len(stacked))
    x, c = _data([n, 3] + shape, 10), _data([3] + shape, 11)
    declared = _shape(shape) if known else -1

    def body(i):
        h = _R.EmptyTensorList(element_shape=declared, max_num_elements=-1,
                               element_dtype=tf.float32)
        for t, s in enumerate(stacked):
            h = _R.TensorListPushBack(input_handle=h, tensor=_row(i, x, s, c)[t])
        h = _R.TensorListPushBack(input_handle=h, tensor=tf.gather(x, i)[0] * 3.0)
        items = []
        for _ in range(pops):
            h, item = _R.TensorListPopBack(input_handle=h, element_shape=_shape(shape),
                                           element_dtype=tf.float32)
            items.append(item)
        length = len(stacked) + 1 - pops
        h = _R.TensorListResize(input_handle=h, size=length + 1)  # one element unset
        whole = _R.TensorListStack(input_handle=h, element_shape=_shape(shape),
                                   element_dtype=tf.float32, num_elements=length + 1)
        return (items, whole, _R.TensorListLength(input_handle=h),
                _R.TensorListElementShape(input_handle=h, shape_type=tf.int32))

    testing.assert_matches_loop(body, n, graph=graph)


@given(n=_ns, k=st.integers(1, 3), shape=_dims, stacked_tensor=st.booleans(),
       own_indices=st.booleans(), extra=st.sampled_from([None, 0, 1]),
       graph=st.booleans())
def test_raw_scatter_into_new_list_and_reads(n, k, shape, stacked_tensor, own_indices, extra,
                                            graph):
    x, c = _data([n, k] + shape, 12), _data([k] + shape, 13)

    def body(i):
        value = _row(i, x, stacked_tensor, c)
        indices = (tf.range(k) + i) % k if own_indices else tf.range(k)[::-1]
        if extra is None:
            h = _R.TensorListScatter(tensor=value, indices=indices, element_shape=_shape(shape))
        else:  # extra > 0 leaves an element unset
            h = _R.TensorListScatterV2(tensor=value, indices=indices, element_shape=_shape(shape),
                                       num_elements=k + extra)
        return (_R.TensorListStack(input_handle=h, element_shape=_shape(shape),
                                   element_dtype=tf.float32),
                _R.TensorListGetItem(input_handle=h, index=i % k, element_shape=_shape(shape),
                                     element_dtype=tf.float32),
                _R.TensorListGather(input_handle=h, indices=indices, element_shape=_shape(shape),
                                    element_dtype=tf.float32),
                _R.TensorListLength(input_handle=h))

    testing.assert_matches_loop(body, n, graph=graph)


@given(k=st.integers(1, 3), m=st.integers(1, 3), dynamic=st.booleans())
def test_jacobian_through_a_tensor_array(k, m, dynamic):
    """The gradient of list ops adds lists (AddN of variants) and re-reserves them."""
    x = _data([m], 16)

    def f(v):
        ta = tf.TensorArray(tf.float32, size=1 if dynamic else k, dynamic_size=dynamic,
                            clear_after_read=False)
        for t in range(k):
            ta = ta.write(t, tf.sin(v) * float(t + 1) + (ta.read(t - 1) if t else 0.0))
        return tf.reduce_sum(ta.stack() ** 2, 0) + ta.concat()[:m] + ta.gather([0])[0]

    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x)
    want = tape.jacobian(y, x, experimental_use_pfor=False)
    testing.assert_allclose(pf.jacobian(f, x, fallback="error"), want)


@given(n=_ns, k=st.integers(1, 3), shape=_dims, written=st.booleans(), known=st.booleans())
def test_stack_list_of_invariant_lists(n, k, shape, written, known):
    """A reserved list (unset elements stay unset) and a written one (copied element by
    element): every element broadcast to [n, ...]."""
    c = _data([k] + shape, 14)
    ctx = types.SimpleNamespace(n=tf.constant(n), n_static=n)

    @tf.function(autograph=False)
    def run():
        h = _R.TensorListReserve(element_shape=_shape(shape) if known else -1, num_elements=k,
                                 element_dtype=tf.float32)
        if written:
            h = _R.TensorListSetItem(input_handle=h, index=k - 1, item=c[k - 1])
        assert plain.is_list(pf.Invariant(tensor=h))
        stacked = plain.stack_list(ctx, pf.Invariant(tensor=h))
        assert plain.stack_list(ctx, pf.Stacked(tensor=stacked)) is stacked
        got = _R.TensorListStack(input_handle=stacked, element_shape=_shape([n] + shape),
                                 element_dtype=tf.float32)
        want = _R.TensorListStack(input_handle=h, element_shape=_shape(shape),
                                  element_dtype=tf.float32)
        return got, want, _R.TensorListLength(input_handle=stacked)

    got, want, length = run()
    assert int(length) == k
    testing.assert_allclose(got, tf.broadcast_to(want[:, None], [k, n] + shape))


def test_per_iteration_list_size_stacks_ragged():
    def body(i):
        ta = tf.TensorArray(tf.float32, size=i + 1)
        return ta.write(0, 1.0).stack()

    with pytest.raises(ValueError, match="ragged_outputs=True"):
        pf.pfor(body, 3, fallback="error")
    got = pf.pfor(body, 3, fallback="error", ragged_outputs=True)
    assert got.to_list() == [[1.0], [1.0, 0.0], [1.0, 0.0, 0.0]]


@given(n=_ns, graph=st.booleans())
def test_stacked_write_growing_every_list_alike(n, graph):
    x = _data([n, 2], 17)

    def body(i):
        ta = tf.TensorArray(tf.float32, size=1, dynamic_size=True, clear_after_read=False)
        ta = ta.write(0, tf.gather(x, i))
        ta = ta.write(2 + 0 * i, tf.gather(x, i) * 2.0)  # a stacked index, the same in all
        return ta.stack(), ta.size()

    testing.assert_matches_loop(body, n, graph=graph)


def test_growing_to_different_lengths_is_a_clear_error():
    x = _data([3], 15)

    def body(i):
        ta = tf.TensorArray(tf.float32, size=1, dynamic_size=True)
        return ta.write(i, tf.gather(x, i)).stack()

    with pytest.raises(tf.errors.InvalidArgumentError, match="different lengths"):
        pf.pfor(body, 3, fallback="error")


def test_listed_by_pfor_ops():
    ours = {"TensorListReserve", "EmptyTensorList", "TensorListFromTensor", "TensorListSetItem",
            "TensorListGetItem", "TensorListStack", "TensorListGather",
            "TensorListScatterIntoExistingList", "TensorListScatterV2", "TensorListScatter",
            "TensorListPushBack", "TensorListPopBack", "TensorListLength",
            "TensorListElementShape", "TensorListConcatV2", "TensorListResize",
            "TensorListSplit"}
    testing.assert_pack_listed("pfor-controlflow", pfor_controlflow, op_types=ours)


def test_new_list_of_per_iteration_size():
    """A TensorArray made in the body with a per-iteration size: each row's list holds
    its own number of items (pfor_controlflow/tests/test_per_iteration_lists.py has
    more)."""
    def body(i):
        return tf.reduce_sum(tf.TensorArray(tf.float32, size=i + 1).write(0, 1.).stack())

    got = testing.assert_matches_loop(body, 3)
    assert got.numpy().tolist() == [1.0, 1.0, 1.0]




# (Items of no elements are left out: reading past such a list does not always fail.)
@given(n=st.integers(1, 4), extra=st.integers(-1, 2),
       shape=st.lists(st.integers(1, 3), max_size=2), offset=st.booleans())
def test_a_list_made_from_a_tensor_read_at_the_loop_index(n, extra, shape, offset):
    """What tf.map_fn does with its inputs: a list unstacked from a tensor, read at the
    loop index, is the tensor's rows (no copy into items and back); fewer rows than
    iterations fail as the loop does; other indices read the list."""
    x = _data([n + extra] + shape, 5)

    def run(x, use_pfor):
        ta = tf.TensorArray(tf.float32, size=n + extra, clear_after_read=False).unstack(x)
        body = lambda i: ta.read(i + 1 if offset else i) * 2.0  # noqa: E731
        if use_pfor:
            return pf.pfor(body, n, fallback="error")
        return tf.stack([body(tf.constant(i)) for i in range(n)])

    fast = tf.function(lambda x: run(x, True), autograph=False)
    if extra < 0 or (offset and extra < 1):
        for f in (fast, tf.function(lambda x: run(x, False), autograph=False)):
            with pytest.raises(tf.errors.InvalidArgumentError):
                f(x)
        return
    testing.assert_same_results(fast(x), run(x, False))
    types_ = {op.type for op in fast.get_concrete_function(x).graph.get_operations()}
    assert ("TensorListGather" in types_) == offset, types_
