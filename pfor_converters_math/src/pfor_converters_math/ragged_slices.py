"""Slices whose size differs between iterations: ragged results.

``x[:n_i]``, ``x[b_i:e_i]``, ``tf.slice(x, [b_i], [s_i])``, and any slice of a ragged
value (whose bounds then resolve against each iteration's own extent: ``-1`` is another
element per row). Each sliced axis is planned per iteration (first element, size, or a
single index for a shrunk axis) with the bounds resolved as the kernel does them (a
negative bound counts from the iteration's end, strided-slice bounds are clipped, a
plain slice's are checked); then one batched gather per axis reads ``first + range(W)``
with the indices clipped into the padded axis, ``W`` being the largest size (under XLA
the input's static size), and a select zeroes what lies past each iteration's size.

Windows of one size up to clipping (``x[i:i + k]``: the end is the begin plus a
constant) are left to offsets.py, which keeps them stacked, when the begin provably
stays inside the axis (a linear form in the loop index over a static number of
iterations). Otherwise the last windows may be clipped: the result is ragged with its
lengths marked ``usually_uniform``, so ops without ragged converters still take it as
stacked (checked to be of one shape when it runs). The gradient of such a
slice, StridedSliceGrad of a ragged ``dy``, places the padded ``dy`` at each iteration's
begin: its zero padding lands where the gradient is zero anyway.
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import (ConversionError, Invariant, Ragged, Stacked, shapes,
                              usually_uniform)
from pfor_converters_math.offsets import grad_dims, grad_output, place

_LINEAR_DEPTH = 12


# -- the input --------------------------------------------------------------------------
class _Source:
    """A sliced value: its tensor (padded when ragged), whether it is stacked, each
    per-iteration axis's padded size and each iteration's extent ([n] where it varies)."""

    def __init__(self, ctx, value):
        if isinstance(value, Ragged):
            self.tensor, self.stacked = value.padded, True
            self.lengths = list(value.lengths)
        else:
            self.tensor, self.stacked = value.tensor, value.is_stacked
            self.lengths = [None] * (value.shape.rank or 0)
        self.padded = shapes.dims(self.tensor, ctx.n if self.stacked else None)[
            int(self.stacked):]
        self.extents = [tf.cast(d, tf.int32) if length is None else length
                        for d, length in zip(self.padded, self.lengths)]


def _column(ctx, k, entry):
    """Spec entry ``entry`` of bound input ``k``: a Python int where the body knows it,
    an int32 scalar when invariant, an int32 ``[n]`` when it differs per iteration."""
    value = ctx.inputs[k]
    if value.is_stacked:
        static = tf.get_static_value(ctx.op.inputs[k], partial=True)
        if static is not None and static[entry] is not None:
            return int(static[entry])
        return tf.cast(value.tensor[:, entry], tf.int32)
    static = tf.get_static_value(value.tensor)
    if static is not None:
        return int(static[entry])
    return tf.cast(value.tensor[entry], tf.int32)


def _varies(t) -> bool:
    return isinstance(t, tf.Tensor) and t.shape.rank == 1


def _clip(value, low, high):
    """``value`` within ``[low, high]``, broadcasting scalars against ``[n]`` vectors."""
    return tf.minimum(tf.maximum(value, low), high)


def _resolve(bound, extent):
    """A bound counted from the end when negative."""
    if isinstance(bound, int) and bound >= 0:
        return bound
    return tf.where(bound < 0, bound + extent, bound)


# -- plans: per axis ("whole",), ("range", first, size), ("index", index) ----------------
def _strided_plan(ctx, source, x):
    steps = tf.get_static_value(ctx.inputs[3].tensor)
    if steps is None or any(int(s) != 1 for s in steps):
        return ctx.decline("strides must be static and all 1")
    if ctx.attr("ellipsis_mask"):
        return ctx.decline("an ellipsis in the slice")
    if x.shape.rank is None or len(steps) > x.shape.rank:
        return ctx.decline("the slice's rank is unknown or larger than the input's")
    begin_mask, end_mask = ctx.attr("begin_mask"), ctx.attr("end_mask")
    shrink, new = ctx.attr("shrink_axis_mask"), ctx.attr("new_axis_mask")
    plan = []
    for k, extent in enumerate(source.extents):
        bit = 1 << k
        if k >= len(steps) or new & bit or (begin_mask & end_mask & bit and not shrink & bit):
            plan.append(("whole",))
            continue
        if shrink & bit:
            plan.append(("index", _resolve(_column(ctx, 1, k), extent)))
            continue
        first = 0 if begin_mask & bit else _clip(_resolve(_column(ctx, 1, k), extent),
                                                 0, extent)
        last = extent if end_mask & bit else _clip(_resolve(_column(ctx, 2, k), extent),
                                                   0, extent)
        plan.append(("range", first, tf.maximum(last - first, 0)))
    return plan, True


def _slice_plan(ctx, source):
    x = ctx.inputs[0]
    if x.shape.rank is None:
        return ctx.decline("a slice of unknown rank")
    plan, checks = [], []
    for k, extent in enumerate(source.extents):
        first, size = _column(ctx, 1, k), _column(ctx, 2, k)
        size = tf.where(tf.equal(size, -1), extent - first, size)
        checks.append(tf.reduce_all((first >= 0) & (size >= 0) & (first + size <= extent)))
        plan.append(("range", first, size))
    return plan, tf.reduce_all(tf.stack(checks)) if checks else True


# -- the gather -------------------------------------------------------------------------
def _front(tensor, axis):
    """``tensor`` with ``axis`` moved to the front (a gather put the iterations there)."""
    if axis == 0:
        return tensor
    rank = tensor.shape.rank
    return tf.transpose(tensor, [axis] + [d for d in range(rank) if d != axis])


def _gather(out, stacked, axis, index, varies):
    """Gather ``index`` along per-iteration ``axis``: per iteration when ``varies``
    (``index`` [n, ...]); the result is stacked when either is."""
    if stacked and varies:
        return tf.gather(out, index, axis=axis + 1, batch_dims=1), True
    if stacked:
        return tf.gather(out, index, axis=axis + 1), True
    out = tf.gather(out, index, axis=axis)
    return (_front(out, axis), True) if varies else (out, False)


def _width(ctx, size, padded, known):
    """The padded size of a sliced axis: what the body knows, else the largest size
    (under XLA the input's static size, which bounds every iteration's)."""
    if known is not None:
        return known
    if not _varies(size):
        return size
    if ctx.compiled:
        if isinstance(padded, int):
            return padded
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' slices a different size in different "
            "iterations from an axis of no static size, which XLA cannot pad to a size "
            "known at compile time; give the sliced input a static shape.")
    return tf.maximum(tf.reduce_max(size), 0)


def _apply(ctx, source, plan, valid):
    """The sliced value from a plan: stacked, or ragged along the axes whose sizes may
    differ between iterations."""
    known = [None if d is None else d for d in ctx.output_shapes[0].as_list()] \
        if ctx.output_shapes[0].rank is not None else None
    # The output axis of every kept input axis.
    kept = [k for k, step in enumerate(plan) if step[0] != "index"]
    out_known = dict(zip(kept, known)) if known is not None else {}
    out, stacked = source.tensor, source.stacked
    lengths = {}
    for k in reversed(range(len(plan))):
        step, padded = plan[k], source.padded[k]
        if step[0] == "whole":
            lengths[k] = source.lengths[k]
            continue
        if step[0] == "index":
            index, extent = step[1], source.extents[k]
            varies = _varies(index) or _varies(extent)
            inside = tf.reduce_all((index >= 0) & (index < extent))
            valid = tf.logical_and(valid, inside)
            # Clipped: an index out of range fails the check below, as the loop fails.
            index = _clip(index, 0, tf.maximum(tf.cast(padded, tf.int32) - 1, 0))
            if varies:
                index = tf.broadcast_to(index, [ctx.n])
            out, stacked = _gather(out, stacked, k, index, varies)
            continue
        _, first, size = step
        varies = _varies(first) or _varies(size)
        width = _width(ctx, size, padded, out_known.get(k))
        top = tf.maximum(tf.cast(padded, tf.int32) - 1, 0)
        if varies:
            first = tf.broadcast_to(first, [ctx.n])
            index = tf.clip_by_value(first[:, None] + tf.range(width)[None, :], 0, top)
        else:
            index = tf.clip_by_value(first + tf.range(width), 0, top)
        out, stacked = _gather(out, stacked, k, index, varies)
        ragged = varies and out_known.get(k) is None
        lengths[k] = tf.broadcast_to(size, [ctx.n]) if ragged else None
    out_lengths = [lengths[k] for k in kept]
    if valid is not True:
        out = ctx.check(valid, "begin, size or index out of range for an iteration's "
                        "input", tensor=out)
    if not stacked:
        return Invariant(tensor=out)
    if all(length is None for length in out_lengths):
        return Stacked(tensor=out)
    return Ragged.from_stacked(out, out_lengths)


# -- provably one size: offsets.py's windows --------------------------------------------
def _linear(t, depth=_LINEAR_DEPTH):
    """A scalar int body tensor as a linear form {term: coefficient} (the constant under
    None), terms being structural keys of what is not a sum; None if unknown."""
    static = tf.get_static_value(t)
    if static is not None and getattr(static, "ndim", 0) == 0:
        return {None: int(static)}
    op = t.op
    if depth and op.type in ("AddV2", "Add", "Sub"):
        a, b = (_linear(u, depth - 1) for u in op.inputs)
        if a is None or b is None:
            return None
        sign = -1 if op.type == "Sub" else 1
        return {k: a.get(k, 0) + sign * b.get(k, 0) for k in set(a) | set(b)}
    if depth and op.type == "Neg":
        a = _linear(op.inputs[0], depth - 1)
        return None if a is None else {k: -v for k, v in a.items()}
    if depth and op.type == "Identity":
        return _linear(op.inputs[0], depth - 1)
    return {_key(t, depth): 1}


def _key(t, depth):
    """Equal for tensors the body computes the same way from the same inputs (``i % 2``
    written twice); stateful ops and deep graphs are keyed by name."""
    op = t.op
    static = tf.get_static_value(t)
    if static is not None:
        return ("const", static.tobytes(), str(static.dtype), static.shape)
    if depth <= 0 or op._is_stateful or op.type == "Placeholder" or not op.inputs:  # pylint: disable=protected-access
        return t.name
    attrs = tuple(sorted((k, v.SerializeToString()) for k, v in op.node_def.attr.items()))
    return (op.type, t.value_index, attrs, tuple(_key(u, depth - 1) for u in op.inputs))


def _entry_form(bound, k):
    """Spec entry ``k`` of a body bound tensor as a linear form, or None."""
    op = bound.op
    if op.type == "Pack" and k < len(op.inputs):
        return _linear(op.inputs[k])
    static = tf.get_static_value(bound, partial=True)
    if static is not None and static[k] is not None:
        return {None: int(static[k])}
    return None


def _one_window_size(ctx, inside=False) -> bool:
    """Whether every range axis with a stacked bound has both bounds and their
    difference is a constant (``x[i:i + k]``): then each iteration's window has one
    size, up to clipping. With ``inside``: and provably no window is clipped."""
    x, begin, end, _ = ctx.inputs
    if not (begin.is_stacked or end.is_stacked) or begin.shape.rank != 1:
        return False
    dims = x.shape.as_list() if x.shape.rank is not None else []
    begin_mask, end_mask = ctx.attr("begin_mask"), ctx.attr("end_mask")
    shrink = ctx.attr("shrink_axis_mask")
    for k in range(begin.shape[0] or 0):
        bit = 1 << k
        if shrink & bit or (begin_mask & end_mask & bit):
            continue
        first, last = _entry_form(ctx.op.inputs[1], k), _entry_form(ctx.op.inputs[2], k)
        if first is None or last is None:
            return False
        if set(first) == set(last) == {None}:
            continue  # static bounds
        if begin_mask & bit or end_mask & bit:
            return False
        difference = {t: last.get(t, 0) - first.get(t, 0) for t in set(first) | set(last)}
        if any(v for t, v in difference.items() if t is not None):
            return False
        if inside and not _inside(ctx, first, difference.get(None, 0),
                                  dims[k] if k < len(dims) else None):
            return False
    return True


def _inside(ctx, first, size, dim) -> bool:
    """Whether a window of ``size`` at ``first`` (a linear form) lies inside an axis of
    ``dim`` in every iteration: ``first`` must be linear in the loop index alone, over
    a static number of iterations."""
    count = ctx.iterations_static
    if dim is None or count is None or size < 0:
        return False
    low = high = first.get(None, 0)
    for term, coefficient in first.items():
        if term is None:
            continue
        if not isinstance(term, str) or not _is_index(ctx, term):
            return False
        low += min(0, coefficient * (count - 1))
        high += max(0, coefficient * (count - 1))
    return count == 0 or (low >= 0 and high + size <= dim)


def _is_index(ctx, name: str) -> bool:
    try:
        return ctx.is_body_index(ctx.op.graph.get_tensor_by_name(name))
    except (KeyError, ValueError):
        return False


# -- converters -------------------------------------------------------------------------
def convert_strided_slice_ragged(ctx):
    """StridedSlice whose size may differ between iterations (stacked bounds, or a
    ragged input): a ragged result."""
    x = ctx.inputs[0]
    new = ctx.attr("new_axis_mask")
    windows = not new and not isinstance(x, Ragged) and _one_window_size(ctx)
    if windows and _one_window_size(ctx, inside=True):
        return ctx.decline("every iteration's window has one size (offsets.py)")
    if new and not ctx.attr("ellipsis_mask"):
        if type(x) not in (Ragged, Stacked, Invariant):
            return ctx.decline("a new axis on a view")
        x = _with_new_axes(x, new)
    source = _Source(ctx, x)
    plan = _strided_plan(ctx, source, x)
    if not isinstance(plan, tuple):
        return plan
    out = _apply(ctx, source, *plan)
    if windows and isinstance(out, Ragged):  # one size but where clipped
        out = Ragged(padded=out.padded, lengths=tuple(
            None if length is None else usually_uniform(length) for length in out.lengths))
    return out


def _with_new_axes(x, new):
    """``x`` with an axis of size 1 at every spec entry of ``new`` (a new_axis_mask
    without ellipsis: spec entry k is then axis k), which the slice takes whole (what
    ``x[:, None]`` does; ragged converters emit such slices inside an outer pfor)."""
    rank = x.shape.rank
    if rank is None:
        return x
    padded = x.padded if isinstance(x, Ragged) else x.tensor
    lengths = list(x.lengths) if isinstance(x, Ragged) else None
    offset = int(x.is_stacked)
    k = 0
    while new >> k:
        if new >> k & 1:
            padded = tf.expand_dims(padded, k + offset)
            if lengths is not None:
                lengths.insert(k, None)
        k += 1
    if lengths is not None:
        return Ragged(padded=padded, lengths=tuple(lengths))
    return type(x)(tensor=padded)


def convert_slice_ragged(ctx):
    """Slice with a stacked size, a stacked begin and sizes not known statically, or a
    ragged input."""
    source = _Source(ctx, ctx.inputs[0])
    plan = _slice_plan(ctx, source)
    if not isinstance(plan, tuple):
        return plan
    return _apply(ctx, source, *plan)


def convert_strided_slice_grad_ragged(ctx):
    """StridedSliceGrad of a ragged ``dy`` (the gradient of a slice whose size differs
    between iterations): the padded ``dy`` placed at each iteration's begin."""
    _, _, _, strides, dy = ctx.inputs
    steps = tf.get_static_value(strides.tensor)
    if steps is None or any(int(s) != 1 for s in steps):
        return ctx.decline("strides must be static and all 1")
    if ctx.attr("ellipsis_mask") or ctx.attr("new_axis_mask"):
        return ctx.decline("an ellipsis or new axis in the slice")
    out_static = ctx.output_shapes[0]
    if out_static.rank is None:
        return ctx.decline("the output rank is unknown")
    dims, row_dims = grad_dims(ctx)
    begin_mask, end_mask = ctx.attr("begin_mask"), ctx.attr("end_mask")
    shrink = ctx.attr("shrink_axis_mask")
    values, offsets = dy.padded, []
    for k in range(out_static.rank):
        bit = 1 << k
        if k < len(steps) and shrink & bit:
            values = tf.expand_dims(values, k + 1)
        if k >= len(steps) or (begin_mask & end_mask & bit and not shrink & bit):
            offsets.append(None)
        elif begin_mask & bit and not shrink & bit:
            offsets.append(tf.zeros([ctx.n], tf.int32))
        else:
            first = tf.broadcast_to(_column(ctx, 1, k), [ctx.n])
            first = tf.where(first < 0, first + row_dims[k], first)
            offsets.append(tf.clip_by_value(first, 0, row_dims[k]))
    return grad_output(ctx, place(values, offsets, dims, tf.zeros([], values.dtype), ctx.n),
                       row_dims)


def register(registry):
    """Add this family's converters to the pack's registrar. After slicing.py's
    converters (single indices, static sizes), before offsets.py's windows of one
    size (priority -2), which this one leaves alone."""
    for pattern in ("*S*U", "*USU", "R**U"):
        registry.add("StridedSlice", convert_strided_slice_ragged, inputs=pattern,
                     priority=-1)
    for pattern in ("*SU", "**S", "R**"):
        registry.add("Slice", convert_slice_ragged, inputs=pattern, priority=-1)
    # (a stacked shape: a slice of a value whose shape differs per iteration)
    for pattern in ("USUUR", "UUSUR", "USSUR", "S**UR"):
        registry.add("StridedSliceGrad", convert_strided_slice_grad_ragged, inputs=pattern)
