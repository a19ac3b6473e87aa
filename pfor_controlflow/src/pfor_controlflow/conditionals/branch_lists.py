"""Per-iteration tensor lists (TensorArrays) in the branches of a conditional whose
predicate differs per iteration.

Each branch sees such a list as a view (loop_views.py) of the rows that take it:
reads gather those rows, writes scatter into them, and a branch that grows the list
is refused (rows would then differ in length). The branches run one after another,
each given the list the one before passed on (``current``), so the list that comes
out holds every row's own writes, and no list is copied. With a partition (the rows
of each branch gathered) a branch's view names its rows; run masked (under XLA, in
an outer pfor) it names the rows whose writes count, and the rows it computes for
others read the items of the row they stand in for. A list every branch makes anew
(a gradient branch's gradient of a list: a read's, or zeros) leaves each branch as its
items and rows' lengths, stitched into one list of all rows (``made_lists``).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from pfor_core.extend import Decline, Stacked
from pfor_controlflow.lists import handles, plain
from pfor_controlflow.lists.loop_views import ListView, items_of, swap01
from pfor_controlflow.lists.with_lengths import ListWithLengths
from pfor_controlflow.split_optional import output_spec


class BranchLists:
    """The tensor lists a conditional's branches use or pass on, by input, with the
    latest version of each (``current``), and the outputs that pass them on."""

    def __init__(self, ctx, graphs, inputs, masked: bool):
        # Per variant output that every branch passes on from one list input: it.
        self.passes = passed_lists(graphs)
        self.masked, self.n = masked, ctx.n
        self.lists, self.current = {}, {}
        for k, value in enumerate(inputs):
            if value.dtype != tf.variant:
                continue
            passed = k in self.passes.values()
            if not (passed or value.is_stacked and _lists_used(graphs, k)):
                continue
            dtype = handles.dtype_of(value.tensor, *(g.inputs[k] for g in graphs))
            if not value.is_stacked:  # written in some rows: every row gets its own
                value = Stacked(tensor=plain.stack_list(ctx, value, element_dtype=dtype))
            _check(value, masked)
            self.lists[k], self.current[k] = (value, dtype), value.tensor

    def given(self, inputs, rows=None, takes=None, reads=None):
        """``inputs`` with each list as the branch sees it: converting the rows at
        ``rows``, or (masked) all rows, of which those where ``takes`` holds write and
        each reads the items of its row in ``reads``."""
        inputs = list(inputs)
        for k, (value, dtype) in self.lists.items():
            inputs[k] = self._view(value, dtype, self.current[k], rows, takes, reads)
        return inputs

    def _view(self, value, dtype, handle, rows, takes, reads):
        if isinstance(value, ListView):
            if takes is None:  # the loop's rows are some rows of the list
                rows = rows if value.rows is None else tf.gather(value.rows, rows)
                return dataclasses.replace(value, tensor=handle, rows=rows, partial=True,
                                           element_dtype=dtype)
            mask = takes if value.mask is None else tf.logical_and(value.mask, takes)
            if reads is not None and value.reads is not None:
                reads = tf.gather(value.reads, reads)
            return dataclasses.replace(value, tensor=handle, mask=mask, partial=True,
                                       element_dtype=dtype,
                                       reads=value.reads if reads is None else reads)
        lengths = value.lengths if isinstance(value, ListWithLengths) else None
        return ListView(tensor=handle, width=self.n, rows=rows, mask=takes, reads=reads,
                        aligned=True, lengths=lengths, partial=True, element_dtype=dtype)

    def handles_out(self, converted) -> list[tf.Tensor]:
        """The handles of the lists a converted branch passes on (in ``passes``'
        order)."""
        out = []
        for j in self.passes:
            value = converted.outputs[j]
            if not isinstance(value, ListView):
                raise Decline("a branch replaces a per-iteration tensor list it was given "
                              "under a per-iteration predicate (it grows the list, or an op "
                              "in it copies it); give the TensorArray a fixed size that "
                              "covers every write (size=..., dynamic_size=False)")
            out.append(value.tensor)
        return out

    def unchanged(self) -> list[tf.Tensor]:
        """What a branch no row takes passes on: the lists as it was given them."""
        return [self.current[k] for k in self.passes.values()]

    def advance(self, flat):
        """A branch's flat outputs without the list handles at their end, which become
        the lists the next branch is given."""
        if not self.passes:
            return flat
        cut = len(flat) - len(self.passes)
        for k, handle in zip(self.passes.values(), flat[cut:]):
            self.current[k] = handle
        return flat[:cut]

    def result(self, j):
        """The conditional's output ``j`` (one in ``passes``), after every branch."""
        k = self.passes[j]
        return dataclasses.replace(self.lists[k][0], tensor=self.current[k])


def made_lists(graphs, outputs, passes) -> set:
    """The variant outputs that every branch makes a new tensor list for (a gradient
    branch's gradient of a list it was given: a read's, or zeros), not passed on."""
    def made(g, j):
        try:
            output_spec(g, j)
            return False  # an optional
        except ValueError:
            return handles.list_dtype_near(g.outputs[j]) not in (None, tf.variant)
    return {j for j, t in enumerate(outputs) if t.dtype == tf.variant and j not in passes
            and all(made(g, j) for g in graphs)}


def flat_list(value, dtype) -> list[tf.Tensor]:
    """A list a branch made for its rows as ``[rows, items, ...]`` (unset items as
    zeros) and each row's length."""
    if not value.is_stacked or isinstance(value, ListView) or (
            isinstance(value, ListWithLengths) and value.right_aligned):
        raise Decline("a branch makes the same list for all its rows, or a list of a "
                      "special layout, under a per-iteration predicate")
    items = items_of(value.tensor, dtype)  # [L, m, ...]
    lengths = value.lengths if isinstance(value, ListWithLengths) and \
        value.lengths is not None else tf.fill(tf.shape(items)[1:2], tf.shape(items)[0])
    return [swap01(items), tf.cast(lengths, tf.int32)]


def stitched_list(positions, pieces) -> ListWithLengths:
    """The list of all rows from each branch's ``flat_list`` of its rows."""
    longest = tf.reduce_max(tf.stack([tf.shape(items)[1] for items, _ in pieces]))
    padded = []
    for items, _ in pieces:
        grow = tf.one_hot(1, tf.rank(items), on_value=longest - tf.shape(items)[1],
                          dtype=tf.int32)
        padded.append(tf.pad(items, tf.stack([tf.zeros_like(grow), grow], 1)))
    items = swap01(tf.dynamic_stitch(positions, padded))  # [L, n, ...]
    return ListWithLengths(tensor=tf.raw_ops.TensorListFromTensor(
        tensor=items, element_shape=tf.shape(items)[1:]),
        lengths=tf.dynamic_stitch(positions, [lengths for _, lengths in pieces]))


def _check(value, masked):
    """Refuses (ValueError) a list whose form the views cannot take."""
    if isinstance(value, ListWithLengths) and value.right_aligned:
        raise ValueError("a tensor list whose rows' items are right-aligned (pushed in a "
                         "loop) enters the branches")
    if isinstance(value, ListView) and (
            value.rows is not None if masked else value.mask is not None):
        raise ValueError("a tensor list of a loop run the other way (masked or on its "
                         "running rows) enters the branches")


def passed_lists(graphs) -> dict:
    """Per variant output that every branch derives from the same tensor list input
    (writes to it, or passes it on): that input. Other variant outputs (optionals,
    lists a branch makes) are left out."""
    sources = {}
    for j in range(len(graphs[0].outputs)):
        found = {handles.list_source(g, g.outputs[j]) for g in graphs}
        if len(found) == 1 and None not in found:
            sources[j] = found.pop()
    if len(set(sources.values())) < len(sources):
        raise ValueError("two outputs of the branches pass on the same tensor list")
    return sources


def _lists_used(graphs, k) -> bool:
    """Whether a branch uses input ``k`` with a tensor list op."""
    return any(c.type.startswith("TensorList") for g in graphs for c in g.inputs[k].consumers())
