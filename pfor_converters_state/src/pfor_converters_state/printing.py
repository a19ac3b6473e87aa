"""Print and assert under SIMD semantics: run once, on the stacked values.

- ``StringFormat`` with stacked inputs formats once over the stacked tensors, so the
  message shows every iteration's value (row j is iteration j). That is a different
  string from any one iteration's, so this only happens when the string goes nowhere
  but ``PrintV2`` (what ``tf.print`` builds); otherwise the op is declined.
  ``summarize`` (entries shown per dimension) is raised to ``n`` where ``n`` is known, so
  no iteration is elided.
- ``PrintV2`` of an invariant string prints once; of a stacked string (per-iteration
  messages) prints them all joined by ``end``, in iteration order: the loop's output.
- ``Print`` (the first version, ``tf.compat.v1.Print``: passes its input through and
  prints a message and its data) prints once, the stacked data showing every
  iteration's values, and passes the input through in its layout.
- ``Assert`` fails if any iteration's would: the condition is reduced with ``all`` over
  the iterations and the data are passed stacked, so the message shows all of them
  (ragged data as their padded tensors).

With no iterations (``n == 0`` known statically) nothing is printed or checked; with a
run-time ``n == 0`` a print still runs once (showing empty values).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core.extend import Invariant, Ragged, Stacked


def _summarize(ctx):
    """The summarize attr widened to show every iteration along the stacked axis."""
    summarize = ctx.attr("summarize")
    if summarize < 0:
        return summarize
    return -1 if ctx.n_static is None else max(summarize, ctx.n_static)


def convert_string_format(ctx):
    consumers = ctx.op.outputs[0].consumers()
    if not consumers or any(c.type != "PrintV2" for c in consumers):
        return ctx.decline("the formatted string is used by more than a print")
    message = ctx.emit(*(v.tensor for v in ctx.inputs), attrs={"summarize": _summarize(ctx)})
    return Invariant(tensor=message[0])


def convert_print(ctx):
    (message,) = ctx.inputs
    if ctx.n_static == 0:
        return []
    text = message.tensor
    if message.is_stacked:
        # PrintV2 appends `end` once; joining with it reproduces the loop's n prints.
        text = tf.strings.reduce_join(text, separator=ctx.attr("end"))
    ctx.emit(text)
    return []


def convert_print_v1(ctx):
    passed, *data = ctx.inputs
    if ctx.n_static == 0:
        return [passed]
    out = ctx.emit(passed.tensor, *(v.tensor for v in data),
                   attrs={"summarize": _summarize(ctx)})[0]
    return [Stacked(tensor=out) if passed.is_stacked else Invariant(tensor=out)]


def convert_assert(ctx):
    if ctx.n_static == 0:
        return []
    condition, *data = ctx.inputs
    cond = condition.tensor
    if condition.is_stacked:
        cond = tf.reduce_all(cond, axis=0)
    shown = [v.padded if isinstance(v, Ragged) else v.tensor for v in data]
    ctx.emit(cond, *shown, attrs={"summarize": _summarize(ctx)})
    return []


def register(registry):
    """Add this family's converters to the pack's registrar."""
    registry.add("StringFormat", convert_string_format, inputs="*...")
    registry.add("PrintV2", convert_print, inputs="*")
    registry.add("Print", convert_print_v1, inputs="*...")
    registry.add("Assert", convert_assert, inputs="??...")  # ragged data too
