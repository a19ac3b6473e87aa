"""Every converter of the loop ops, and of the reads of a loop's row views, in dispatch
order."""

from pfor_controlflow.loops import row_views, while_loop


def register(registry):
    add = registry.add
    # (any layout: ragged values the body reads from outside go in as they are)
    add(["While", "StatelessWhile"], while_loop.convert_while, inputs="?...", views=True)
    # For row views only, ahead of the math pack's slicing converters (view converters
    # go first), which see a view materialized.
    add("StridedSlice", row_views.convert_item_slice, inputs="S**U", view=row_views.RowView)
    add("GatherV2", row_views.convert_item_gather, inputs="S*U", view=row_views.RowView)
