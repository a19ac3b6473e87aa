"""StridedSlice (``x[...]``) in every layout.

Invariant bounds prepend a full slice for the iteration axis (every mask shifts by one
bit; the new first spec is an ordinary full range, so an ellipsis or new axis later in
the spec expands exactly as before). A stacked index on a shrunk axis (``x[i]``,
``x[:, i]``) becomes batched gathers.

Windows of one size at per-iteration offsets (``x[i:i + k]``, both bounds stacked) read
a box of the same size at each iteration's offsets (``common``); boxes whose sizes
differ between iterations make values of different shapes: a run-time error naming the
op.

Slices whose size differs between iterations (``x[:n_i]``, ``x[b_i:e_i]``, any slice of
a ragged value) make ragged results (``common``'s plans). Windows of one size up to
clipping (the end is the begin plus a constant) are left to the window converter, which
keeps them stacked, when the begin provably stays inside the axis (a linear form in the
loop index over a static number of iterations). Otherwise the last windows may be
clipped: the result is ragged with its lengths marked ``usually_uniform``, so ops without
ragged converters still take it as stacked (checked to be of one shape when it runs).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Decline, Invariant, Ragged, Stacked, shapes, usually_uniform
from pfor_converters_math.shape_ops import static_value
from pfor_converters_math.slicing.common import (MASKS, Source, apply_plan, bound_column,
                                                 bound_entries, clip_bound, move_first,
                                                 prepend_tensor, resolve_bound, static_list,
                                                 uniform_sizes)


def _strided(ctx, x_tensor, stacked, begin, end, strides, masks):
    """Emit a StridedSlice with invariant bounds (tensors) on a stacked or invariant
    tensor: a stacked one gets a full slice in front and every mask shifted by a bit."""
    if not stacked:
        return ctx.emit(x_tensor, begin, end, strides, attrs=masks)[0]
    shifted = {k: v << 1 for k, v in masks.items()}
    shifted["begin_mask"] |= 1
    shifted["end_mask"] |= 1
    return ctx.emit(x_tensor, *(prepend_tensor(t, v) for t, v in
                                ((begin, 0), (end, 0), (strides, 1))), attrs=shifted)[0]


def convert_strided_slice(ctx):
    """Invariant bounds: a full slice of the iteration axis in front, masks shifted."""
    x, begin, end, strides = ctx.inputs
    masks = {k: ctx.attr(k) for k in MASKS}
    column = _stacked_column(x.tensor, begin.tensor, end.tensor, strides.tensor, masks)
    if column is not None:
        return Stacked(tensor=column)
    return Stacked(tensor=_strided(ctx, x.tensor, True, begin.tensor, end.tensor,
                                   strides.tensor, masks))


def _stacked_column(x, begin, end, strides, masks):
    """``shape[k]`` of a value whose per-iteration shapes were stacked from columns
    (``tf.stack(extents, axis=1)``, a ragged value's shape): that column itself, so
    values sized by it keep the very lengths tensor (ragged ops then see equal
    lengths and skip broadcasting and masks)."""
    op = x.op
    if (op.type != "Pack" or op.get_attr("axis") != 1 or x.shape.rank != 2
            or masks["shrink_axis_mask"] != 1
            or any(masks[m] for m in MASKS if m != "shrink_axis_mask")):
        return None
    k, stop, step = (tf.get_static_value(t) for t in (begin, end, strides))
    if k is None or stop is None or step is None or len(k) != 1 or int(step[0]) != 1:
        return None
    k = int(k[0])
    if not 0 <= k < len(op.inputs) or int(stop[0]) != k + 1:
        return None
    return op.inputs[k]


def convert_strided_slice_stacked_bounds(ctx):
    """A stacked bound: single indices on shrunk axes become batched gathers."""
    plan = _plan_stacked_bounds(ctx, {k: ctx.attr(k) for k in MASKS})
    if isinstance(plan, str):
        raise Decline(plan)
    return _strided_slice_by_gather(ctx, plan)


def _plan_stacked_bounds(ctx, masks):
    """Kind of each spec entry, or a reason to decline. A stacked bound entry may only
    be a single index on a shrunk axis ("gather"); other entries must be static,
    invariant or masked."""
    _, begin, end, strides = ctx.inputs
    length = begin.shape[0] if begin.shape.rank == 1 else None
    steps = static_value(strides)
    if length is None or steps is None:
        return "stacked bounds need static strides and spec length"
    starts, stops = bound_entries(ctx, 1, length), bound_entries(ctx, 2, length)
    known_start = [not begin.is_stacked or v is not None for v in starts]
    known_stop = [not end.is_stacked or v is not None for v in stops]
    kinds = []
    for j in range(length):
        bit = 1 << j
        if masks["ellipsis_mask"] & bit:
            kinds.append("ellipsis")
        elif masks["new_axis_mask"] & bit:
            kinds.append("new")
        elif masks["shrink_axis_mask"] & bit:
            if steps[j] <= 0:
                return "shrunk axis with a non-positive stride"
            kinds.append("shrink" if known_start[j] else "gather")
        elif ((known_start[j] or masks["begin_mask"] & bit)
              and (known_stop[j] or masks["end_mask"] & bit)):
            kinds.append("range")
        else:
            return f"stacked slice bound on range axis {j}"
    return dict(kinds=kinds, starts=starts, stops=stops, steps=steps.tolist(), masks=masks)


def _output_axes(kinds, rank):
    """Per-iteration output axis of every spec entry of the invariant slice (None for
    a shrunk entry)."""
    consuming = sum(k in ("shrink", "gather", "range") for k in kinds)
    axes, pos = [], 0
    for kind in kinds:
        axes.append(None if kind == "shrink" else pos)
        pos += {"ellipsis": rank - consuming, "shrink": 0}.get(kind, 1)
    return axes


def _strided_slice_by_gather(ctx, plan):
    """One invariant-bounds slice that keeps each gathered axis whole, then a batched
    gather of each iteration's index on it (last axis first, so the axis numbers of
    earlier ones stay valid)."""
    x, begin, end, _ = ctx.inputs
    kinds, masks, steps = plan["kinds"], dict(plan["masks"]), plan["steps"]
    if x.shape.rank is None and ("ellipsis" in kinds or not x.is_stacked):
        return ctx.decline("stacked indices into a tensor of unknown rank")
    gather = [j for j, k in enumerate(kinds) if k == "gather"]
    for j in gather:
        masks["begin_mask"] |= 1 << j
        masks["end_mask"] |= 1 << j
        masks["shrink_axis_mask"] &= ~(1 << j)
        steps[j] = 1
    out = x.tensor
    if not all(_whole(j, kind, masks, steps) for j, kind in enumerate(kinds)):
        starts = _bound_tensor(begin, plan["starts"])
        stops = _bound_tensor(end, plan["stops"])
        steps = tf.constant(steps, dtype=ctx.inputs[3].dtype)
        out = _strided(ctx, out, x.is_stacked, starts, stops, steps, masks)
    stacked = x.is_stacked
    axes = _output_axes(kinds, x.shape.rank or 0)
    for j in reversed(gather):
        axis = axes[j] + int(stacked)
        index = _column(begin.tensor, j)
        size = out.shape[axis]
        if size is None:
            size = tf.shape(out, out_type=index.dtype)[axis]
        index = tf.where(index < 0, index + size, index)
        if stacked:
            out = tf.gather(out, index, axis=axis, batch_dims=1)
        else:
            out = move_first(tf.gather(out, index, axis=axis), axis)
            stacked = True
    return Stacked(tensor=out) if stacked else Invariant(tensor=out)


def _column(bound, j):
    """Entry ``j`` of a stacked bound ``[n, length]``: the stacked index itself where the
    bound was packed from such indices (``x[i]``'s begin is ``tf.stack([i])``), else its
    column."""
    op = bound.op
    if (op.type == "Pack" and op.get_attr("axis") == 1 and j < len(op.inputs)
            and op.inputs[j].shape.rank == 1):
        return op.inputs[j]
    return bound[:, j]


def _whole(j, kind, masks, steps):
    """Whether spec entry ``j`` keeps its axis as it is (e.g. ``x[i]``: no slice needed
    before the gather)."""
    bit = 1 << j
    return (kind in ("gather", "range") and steps[j] == 1
            and masks["begin_mask"] & masks["end_mask"] & bit)


def _bound_tensor(value, entries):
    """An invariant bound as it is; a stacked one as its static entries (0 where the
    entry is masked or gathered)."""
    if not value.is_stacked:
        return value.tensor
    return tf.constant([0 if v is None else v for v in entries], dtype=value.dtype)


def convert_strided_slice_window(ctx):
    """StridedSlice with stacked bounds, unit strides, every iteration's box of the same
    size: a batched gather per sliced axis (shrunk axes pick one index)."""
    x, begin, end, strides = ctx.inputs
    steps = static_list(strides.tensor)
    if steps is None or any(s != 1 for s in steps):
        return ctx.decline("strides must be static and all 1")
    if ctx.attr("ellipsis_mask") or ctx.attr("new_axis_mask") or x.shape.rank is None:
        return ctx.decline("an ellipsis or new axis in the slice, or an unknown rank")
    begin_mask, end_mask = ctx.attr("begin_mask"), ctx.attr("end_mask")
    shrink = ctx.attr("shrink_axis_mask")
    dims = shapes.dims(x.tensor, ctx.n if x.is_stacked else None)[int(x.is_stacked):]
    starts, stops = ctx.stack(begin), ctx.stack(end)
    out, stacked = x.tensor, x.is_stacked
    for k in reversed(range(len(steps))):  # last axis first: earlier axes keep their place
        bit = 1 << k
        if begin_mask & end_mask & bit and not shrink & bit:
            continue
        first = tf.zeros([ctx.n], tf.int32) if begin_mask & bit and not shrink & bit else (
            tf.cast(starts[:, k], tf.int32))
        first = tf.where(first < 0, first + dims[k], first)
        if shrink & bit:
            index = first  # out of range raises in the gather, as the slice would
        else:
            last = tf.fill([ctx.n], tf.cast(dims[k], tf.int32)) if end_mask & bit else (
                tf.cast(stops[:, k], tf.int32))
            last = tf.clip_by_value(tf.where(last < 0, last + dims[k], last), 0, dims[k])
            first = tf.clip_by_value(first, 0, dims[k])
            size = uniform_sizes(tf.maximum(last - first, 0), ctx, "slices windows")
            index = first[:, None] + tf.range(size)[None, :]
        if stacked:
            out = tf.gather(out, index, axis=k + 1, batch_dims=1)
        else:
            out = tf.gather(out, index, axis=k)
            if k:
                rank = out.shape.rank
                out = tf.transpose(out, [k] + [d for d in range(rank) if d != k])
            stacked = True
    return Stacked(tensor=out)


_LINEAR_DEPTH = 12


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
            plan.append(("index", resolve_bound(bound_column(ctx, 1, k), extent)))
            continue
        bound = lambda j: clip_bound(resolve_bound(bound_column(ctx, j, k), extent),  # noqa: E731
                                     0, extent)
        first = 0 if begin_mask & bit else bound(1)
        last = extent if end_mask & bit else bound(2)
        plan.append(("range", first, tf.maximum(last - first, 0)))
    return plan, True


# -- provably one size: the window converter's -------------------------------------------
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
        return ctx.decline("every iteration's window has one size (convert_strided_slice_window)")
    if new and not ctx.attr("ellipsis_mask"):
        if type(x) not in (Ragged, Stacked, Invariant):
            return ctx.decline("a new axis on a view")
        x = _with_new_axes(x, new)
    source = Source(ctx, x)
    plan = _strided_plan(ctx, source, x)
    if not isinstance(plan, tuple):
        return plan
    if isinstance(x, Ragged) and all(step == ("whole",) for step in plan[0]) and len(
            plan[0]) == x.rank:
        return x  # x[...] (what a RaggedTensor's row read ends with): itself, not re-masked
    out = apply_plan(ctx, source, *plan)
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


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("StridedSlice", convert_strided_slice, inputs="SUUU")
    # A stacked begin, or a stacked end with an invariant begin.
    registry.add("StridedSlice", convert_strided_slice_stacked_bounds, inputs="*S*U")
    registry.add("StridedSlice", convert_strided_slice_stacked_bounds, inputs="*USU")
    # After the converter above (single items, x[i]) and the ragged one (sizes that
    # differ), which leaves it the windows of one size (x[i:i + k]): both bounds stacked.
    registry.add("StridedSlice", convert_strided_slice_window, inputs="*SSU", priority=-2)
    # Sizes that differ per iteration: after the single indices and static sizes above,
    # before the windows of one size (priority -2), which it leaves alone.
    for pattern in ("*S*U", "*USU", "R**U"):
        registry.add("StridedSlice", convert_strided_slice_ragged, inputs=pattern,
                     priority=-1)
