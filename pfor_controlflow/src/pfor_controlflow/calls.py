"""Function-call converters: PartitionedCall, StatefulPartitionedCall and legacy calls.

A legacy function call (an op whose type is the name of a ``function.Defun``, as in
the loops ``tf.nn.ctc_loss`` builds) dispatches here as a ``PartitionedCall``.

A call runs the function named by its "f" attr once per iteration, so the converted
call is the called function's body converted inline with the same loop: the call's
inputs (which already include the function's captures, in the order of the function
graph's inputs) become the layouts of the body's placeholders, and the body's outputs
are the call's outputs. Nested calls inside the body dispatch back here. Stateful calls
are always dispatched, even with all-invariant inputs; converting the body inline is
still right there, since its stateless all-invariant ops are re-emitted unchanged.
"""

from __future__ import annotations

from pfor_controlflow.functions import function_and_outputs


def convert_call(ctx):
    # A legacy call (``function.Defun``) is an op whose type names the function.
    name = ctx.attr("f").name if ctx.has_attr("f") else ctx.op_type
    found = function_and_outputs(ctx.op, name)
    if found is None:
        return ctx.decline(f"function {name!r} not found in the graph")
    graph, outputs = found
    if len(graph.inputs) != len(ctx.inputs):
        return ctx.decline(f"function {name!r} takes {len(graph.inputs)} inputs, "
                           f"the call passes {len(ctx.inputs)}")
    if len(outputs) != len(ctx.op.outputs):
        return ctx.decline(f"function {name!r} returns {len(outputs)} values, "
                           f"the call has {len(ctx.op.outputs)} outputs")
    return ctx.convert_graph(graph, ctx.inputs, outputs)


def register(registry):
    registry.add(["PartitionedCall", "StatefulPartitionedCall"], convert_call, views=True,
                 inputs="?...")
