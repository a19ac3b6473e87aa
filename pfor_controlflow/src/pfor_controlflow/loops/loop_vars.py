"""What the while-loop converters know about one loop: its variables, which of them
the body passes through unchanged (read from outside the loop, never carried) and
which are stacked."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import array_ops, handle_data_util

from pfor_core.extend import ConversionError, Invariant, Ragged, Stacked
from pfor_controlflow.functions import branch_functions
from pfor_controlflow.lists import handles, ragged_items
from pfor_controlflow.lists.loop_views import ListView, grows_only
from pfor_controlflow.lists.with_lengths import ListWithLengths
from pfor_controlflow.split_optional import made_parts


class Loop:
    """What the converter knows about one While op."""

    def __init__(self, ctx, cond, body):
        self.ctx, self.cond, self.body = ctx, cond, body
        self.inputs = list(ctx.inputs)
        self.passed = [passes_through(body, k) for k in range(len(self.inputs))]
        self.carried = [k for k, p in enumerate(self.passed) if not p]
        self.stacked = [v.is_stacked for v in self.inputs]
        # Tensor lists of ragged items (ragged_items.py), by variable: their items' rank.
        # The loop carries such a list as a pair of lists.
        self.ragged_lists = {k: v.rank for k, v in enumerate(self.inputs)
                             if isinstance(v, ragged_items.RaggedList)}
        # Tensor lists whose rows hold their own numbers of items at their start
        # (with_lengths.py), by variable: those lengths, which the loop keeps (convert_while
        # lets in only loops that write such a list in place).
        self.lengths = {k: v.lengths for k, v in enumerate(self.inputs)
                        if isinstance(v, ListWithLengths) and not v.right_aligned
                        and v.lengths is not None}
        # Values whose shape differs between iterations carried through the loop, by
        # variable: their lengths, which every step must keep (a gradient loop's
        # accumulator of a ragged value's gradient); the loop carries their padded form.
        self.ragged_values = {k: v.lengths for k, v in enumerate(self.inputs)
                              if isinstance(v, Ragged) and k in self.carried}
        # Lists made with each iteration's own element shape, by variable: those shapes,
        # which writes in the loop are checked against.
        self.element_shapes = {k: v.element_shapes for k, v in enumerate(self.inputs)
                               if isinstance(v, ragged_items.RaggedList)
                               and v.element_shapes is not None}
        # Lists that hold handles of lists read for their shapes (shapes_record), by
        # variable: those lists' rows' lengths.
        self.records = {k: v.held_lengths for k, v in enumerate(self.inputs)
                        if isinstance(v, ListWithLengths) and v.records}
        self.lengths.update({k: v.counts for k, v in enumerate(self.inputs)
                             if isinstance(v, ragged_items.RaggedList) and v.counts_known
                             and not v.right_aligned and v.counts is not None
                             and length_change(body, k) == "same"})

    def layouts(self, carried_values, stacked=None, outside=None):
        """Layouts of all loop variables: carried ones from ``carried_values``,
        passed-through ones from ``outside`` (default: the loop's inputs)."""
        stacked = self.stacked if stacked is None else stacked
        outside = self.inputs if outside is None else outside
        values = list(outside)
        for k, value in zip(self.carried, carried_values):
            if isinstance(value, (Stacked, Invariant, Ragged)):
                values[k] = value
            elif isinstance(value, tuple):  # a list of ragged items
                values[k] = ragged_items.from_pair(value, self.ragged_lists[k],
                                                   self.lengths.get(k),
                                                   self.element_shapes.get(k))
            elif k in self.ragged_values:
                values[k] = self.ragged_value(k, value)
            else:
                values[k] = Stacked(tensor=value) if stacked[k] else Invariant(tensor=value)
            if k in self.lengths and type(values[k]) is Stacked:
                values[k] = ListWithLengths(tensor=values[k].tensor, lengths=self.lengths[k])
        return values

    def ragged_value(self, k, padded, rows=None) -> Ragged:
        """Carried ragged variable ``k`` from its ``padded`` form (of ``rows``, where the
        loop converts some rows); placeholder lengths in a trial's scratch graph."""
        lengths = self.ragged_values[k]
        if any(length is not None and not _within(padded.graph, length.graph)
               for length in lengths):
            lengths = tuple(None if length is None else array_ops.placeholder(tf.int32, [None])
                            for length in lengths)
        elif rows is not None:
            lengths = tuple(None if length is None else tf.gather(length, rows)
                            for length in lengths)
        return Ragged(padded=padded, lengths=lengths)

    @property
    def maximum_iterations(self):
        """The loop's ``maximum_iterations`` (an invariant tensor) where
        ``tf.while_loop`` gave it one, else None. The converted loop passes it on:
        it runs no more steps than that, and under XLA a gradient of the converted
        loop needs it to size its accumulators."""
        if len(self.inputs) < 2 or self.inputs[1].is_stacked or 1 in self.carried:
            return None
        counter, limit = self.cond.inputs[0], self.cond.inputs[1]
        for op in self.cond.get_operations():
            if op.type == "Less" and op.inputs[0] is counter and op.inputs[1] is limit:
                return self.inputs[1].tensor
        return None

    @property
    def step_bound(self) -> int | None:
        """A static bound on the loop's steps, or None: its ``maximum_iterations``, or
        for the gradient loop of a ``tf.while_loop`` (which runs as many steps as the
        forward loop did) the forward loop's, which ``while_v2`` passes as input 1."""
        limit = self.maximum_iterations
        if limit is None and len(self.inputs) > 1 and 1 not in self.carried:
            limit = self.inputs[1].tensor
        value = None if limit is None else _static(limit)
        return int(value) if value is not None and value.ndim == 0 and value >= 0 else None

    def shape_of(self, k, stacked=None) -> tf.TensorShape:
        """Shape invariant of carried variable ``k``, stacked or not."""
        stacked = self.stacked if stacked is None else stacked
        if k in self.ragged_lists:
            return (tf.TensorShape([]), tf.TensorShape([]))
        if k in self.ragged_values:
            return tf.TensorShape([None]).concatenate(self.inputs[k].shape)
        shape = self.body.inputs[k].shape
        if not stacked[k] or self.body.inputs[k].dtype == tf.variant:
            return shape
        return self.ctx.stacked_shape(shape)


def _within(graph, outer) -> bool:
    """Whether ``graph`` is ``outer`` or a function graph inside it (which captures
    ``outer``'s tensors), not a trial's scratch graph."""
    while graph is not None:
        if graph is outer:
            return True
        graph = getattr(graph, "outer_graph", None)
    return False


_REDUCE = {"Max": np.max, "Min": np.min}


def _static(tensor):
    """``tensor``'s value where it is known when building, also through a Max or Min
    of known values (Keras bounds its RNN loop by ``max(steps)`` of a static count)."""
    value = tf.get_static_value(tensor)
    op = tensor.op
    if value is None and op.type in _REDUCE:
        data, axes = (tf.get_static_value(t) for t in op.inputs)
        if data is not None and axes is not None:
            axes = tuple(int(a) % max(data.ndim, 1) for a in np.reshape(axes, [-1]))
            value = data if not axes else _REDUCE[op.type](
                data, axis=axes, keepdims=op.get_attr("keep_dims"))
    return None if value is None else np.asarray(value)


def passes_through(body, k) -> bool:
    out = body.outputs[k]
    while out.op.type == "Identity" and out is not body.inputs[k]:
        out = out.op.inputs[0]
    return out is body.inputs[k]


def stack_value(ctx, value, element_shape=None, dtypes=(None, None)) -> tf.Tensor:
    """``value`` as a stacked tensor, or a stacked list (``element_shape``: a static
    per-iteration element shape for a new list made without one; ``dtypes``: the list's
    element dtype and, for a list of lists, its inner lists', see ``list_dtypes``)."""
    if value.dtype == tf.variant:
        from pfor_controlflow.lists import plain  # pylint: disable=import-outside-toplevel
        return plain.stack_list(ctx, value, dtypes[0], element_shape=element_shape,
                                       inner_dtype=dtypes[1])
    return ctx.stack(value)


def list_dtypes(body, k, original=None) -> tuple:
    """Where carried variable ``k`` is a tensor list: its element dtype, and for a list
    of lists the element dtype of the inner lists, from how ``body`` uses them (a list
    handle need not carry them: an item read from a list of lists has none), else from
    the graph around the loop's input ``original``; None where nothing tells."""
    handle = body.inputs[k]
    if handle.dtype != tf.variant:
        return None, None
    lists, inner, seen, dtype = [handle], [], set(), None
    while lists:
        t = lists.pop()
        for op in t.consumers():
            if id(op) in seen or not op.inputs or op.inputs[0] is not t:
                continue
            seen.add(id(op))
            if op.type in handles.LIST_OUT:
                lists.append(op.outputs[0])
            if "element_dtype" not in op.node_def.attr or not op.type.startswith("TensorList"):
                continue
            dtype = op.get_attr("element_dtype")
            if dtype != tf.variant:
                return dtype, None
            if op.type == "TensorListGetItem":
                inner.append(op.outputs[0])
            elif op.type == "TensorListPopBack":
                inner.append(op.outputs[1])
            elif op.type in ("TensorListSetItem", "TensorListPushBack"):
                inner.append(op.inputs[-1])
    for t in inner:  # its handle data, or an op that reads or makes it, names the dtype
        data = handle_data_util.get_resource_handle_data(t)
        if data is not None and data.is_set and data.shape_and_type:
            found = tf.as_dtype(data.shape_and_type[0].dtype)
            if found != tf.variant:
                return dtype, found
        for op in [c for c in t.consumers() if c.inputs and c.inputs[0] is t] + [t.op]:
            if op.type.startswith("TensorList") and "element_dtype" in op.node_def.attr:
                found = op.get_attr("element_dtype")
                if found != tf.variant:
                    return dtype, found
    if dtype is None and original is not None:
        dtype = handles.list_dtype_near(original)
    return dtype, None


def written_shape(body, k):
    """The static shape of the items ``body`` writes or pushes to tensor list ``k``
    (between its input and output ``k``), or None."""
    out = body.outputs[k]
    while out is not body.inputs[k]:
        op = out.op
        item = {"TensorListSetItem": 2, "TensorListPushBack": 1}.get(op.type)
        if item is not None and op.inputs[item].shape.is_fully_defined():
            return op.inputs[item].shape
        if op.type not in ("Identity", "TensorListSetItem", "TensorListPushBack",
                           "TensorListResize"):
            return None
        out = op.inputs[0]
    return None


def carried_out(loop, converted, k, rows=None, stand_ins=None):
    """The body's output for carried variable ``k`` in its loop layout (``rows``: the
    rows the body converted, where not all; ``stand_ins``: the rows whose values all
    rows of a masked loop computed on)."""
    value = converted.outputs[k]
    if k in loop.ragged_lists:
        return ragged_value(loop, k, value)
    if k in loop.ragged_values:
        return _same_lengths(loop, k, value, rows if rows is not None else stand_ins)
    if loop.stacked[k]:
        out = converted.stacked(k)
        shape = loop.shape_of(k)
        if rows is not None and shape.rank:
            # Some rows only: not the static n (TensorFlow's gradients trust it).
            shape = tf.TensorShape([None]).concatenate(shape[1:])
        if out.dtype != tf.variant and out.shape.is_compatible_with(shape):
            out.set_shape(shape)  # converters may lose a static n (as 1), the loop needs it
        return out
    if value.is_stacked:  # the trial said otherwise: a converter is inconsistent
        raise RuntimeError(f"loop variable {k} became per-iteration in the real conversion")
    return value.tensor


def _same_lengths(loop, k, value, rows) -> tf.Tensor:
    """The padded form of the body's output for carried ragged variable ``k``, checked
    to keep the lengths it came in with and padded as the loop's input is."""
    ctx, start = loop.ctx, loop.inputs[k]
    lengths = loop.ragged_value(k, start.padded, rows).lengths
    if isinstance(value, Invariant):
        value = Stacked(tensor=ctx.stack(value))
    if value.shape.rank not in (None, len(lengths)):
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}': loop variable {k}, whose shape differs "
            "between iterations, changes rank in a step; pfor carries such a value only "
            "where every step keeps its shape.")
    # A dimension may vary in one and not the other (a nested pfor's masked loop marks
    # its row count as varying): compare sizes there, the fixed one's being its size.
    padded = value.padded if isinstance(value, Ragged) else value.tensor
    given = value.lengths if isinstance(value, Ragged) else (None,) * len(lengths)
    same = tf.reduce_all([
        tf.reduce_all(tf.equal(_sizes(a, padded, d), _sizes(b, start.padded, d)))
        for d, (a, b) in enumerate(zip(given, lengths)) if a is not None or b is not None])
    padded = ctx.check(same, f"loop variable {k}, whose shape differs between iterations, "
                       "changes shape in a step; pfor carries such a value only where every "
                       "step keeps its shape", tensor=padded)
    dims = tf.shape(start.padded)[1:]
    padded = padded[(slice(None),) + tuple(slice(0, dims[d]) for d in range(len(lengths)))]
    grow = tf.concat([[0], dims - tf.shape(padded)[1:]], 0)
    padded = tf.pad(padded, tf.stack([tf.zeros_like(grow), grow], 1))
    padded.set_shape(loop.shape_of(k))
    return padded


def _sizes(lengths, padded, d):
    """Per-iteration sizes of dimension ``d``: ``lengths``, or where it is fixed (None)
    the padded tensor's size there."""
    return tf.shape(padded)[d + 1] if lengths is None else lengths


def ragged_value(loop, k, value) -> tuple:
    """A list of ragged items carried through the loop, as the pair it carries (a
    plain list, made ragged)."""
    rank = loop.ragged_lists[k]
    dtype = list_dtypes(loop.body, k, loop.ctx.op.inputs[k])[0]
    return ragged_items.as_ragged_list(loop.ctx, value, rank, dtype).pair()


def list_out(converted, k) -> ListView:
    """The body's output for a tensor list carried through a loop with per-iteration
    trip counts: still the whole loop's list."""
    value = converted.outputs[k]
    if not isinstance(value, ListView):
        raise RuntimeError(f"loop variable {k}: the body replaced a tensor list carried "
                           "through a loop with per-iteration trip counts by a new list")
    return value


def pushed_by(body, k):
    """The element dtype if the body's output ``k`` is a TensorListPushBack, else None."""
    out = body.outputs[k]
    while out.op.type == "Identity":
        out = out.op.inputs[0]
    return out.op.get_attr("element_dtype") if out.op.type == "TensorListPushBack" else None


def pushed_parts(body, k):
    """The parts of the split optionals (a conditional's intermediates) the body
    pushes onto tensor list ``k``, or None."""
    out = body.outputs[k]
    while out.op.type == "Identity":
        out = out.op.inputs[0]
    if out.op.type != "TensorListPushBack" or out.op.inputs[1].dtype != tf.variant:
        return None
    return made_parts(out.op.inputs[1])


def pushes_per_step(body, k):
    """How many items each step of ``body`` pushes onto tensor list ``k``: the length of
    the chain of TensorListPushBack from input ``k`` to output ``k``, None otherwise."""
    out, count = body.outputs[k], 0
    while out is not body.inputs[k]:
        if out.op.type == "TensorListPushBack":
            count += 1
        elif out.op.type != "Identity":
            return None
        out = out.op.inputs[0]
    return count


def length_change(body, k) -> str:
    """How a step of ``body`` changes the length of tensor list ``k``: "same" (writes
    in place only), "pushes" (pushes, and writes in place), "writes" (writes that may
    grow it), "pops" (pops and nothing else reads it) or "other" (resizes, several
    kinds of change, a new list)."""
    if only_popped(body, k):
        return "pops"
    found = set()
    if not _changes(body.outputs[k], body.inputs[k], found):
        return "other"
    return found.pop() if len(found) == 1 else ("same" if not found else "other")


def _changes(out, source, found: set) -> bool:
    """Adds to ``found`` how the ops from list handle ``source`` to ``out`` change its
    length (see ``length_change``); False where one does another thing. Conditionals
    on the way change it as their branches do."""
    while out is not source:
        op = out.op
        if op.type == "TensorListPushBack":
            found.add("pushes")
        elif op.type == "TensorListSetItem":
            if op.get_attr("resize_if_index_out_of_bounds"):
                found.add("writes")
        elif grows_only(op):
            found.add("writes")
        elif op.type in ("If", "StatelessIf", "Case", "StatelessCase"):
            k = _branches_pass(op, out.value_index, found)
            if k is None:
                return False
            out = op.inputs[1 + k]
            continue
        elif op.type == "AddN":
            # Lists add up item by item only where their lengths agree (else the op
            # raises), so the sum is as long as the summand that comes from ``source``.
            for t in op.inputs:
                own = set()
                if _changes(t, source, own):
                    found |= own
                    return True
            return False
        elif op.type != "Identity":
            return False
        out = op.inputs[0]
    return True


def _branches_pass(op, j, found: set):
    """The input of conditional ``op`` whose list every branch passes on as output
    ``j`` (their changes added to ``found``), or None."""
    graphs = branch_functions(op)
    sources = {None} if graphs is None else {handles.list_source(g, g.outputs[j])
                                              for g in graphs}
    if len(sources) != 1 or None in sources:
        return None
    k = sources.pop()
    if not all(_changes(g.outputs[j], g.inputs[k], found) for g in graphs):
        return None
    return k


def only_popped(body, k) -> bool:
    """Whether the body only pops list ``k`` (a gradient loop's accumulator)."""
    pending, popped = [body.inputs[k]], False
    while pending:
        tensor = pending.pop()
        for op in tensor.consumers():
            if op.type not in ("Identity", "TensorListPopBack"):
                return False
            popped = popped or op.type == "TensorListPopBack"
            pending.append(op.outputs[0])
    return popped and _popped_through(body, k)


def _popped_through(body, k) -> bool:
    """Whether body output ``k`` comes from input ``k`` through Identity and PopBack."""
    out = body.outputs[k]
    while out is not body.inputs[k]:
        if out.op.type not in ("Identity", "TensorListPopBack") or out.value_index != 0:
            return False
        out = out.op.inputs[0]
    return True


def starts_empty(value) -> bool:
    """Whether the tensor list ``value`` (a loop input) is a new, empty list."""
    while value.op.type == "Identity":
        value = value.op.inputs[0]
    return value.op.type == "EmptyTensorList"
