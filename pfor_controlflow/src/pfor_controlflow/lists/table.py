"""Every converter of the tensor-list, TensorArray and stack ops, one op after the other
in dispatch order.

Per op, the layouts from the most general to the most special: plain lists
(plain.py, no priority) and lists with lengths (with_lengths.py, through the plain
converters); the loop views of plain lists (loop_views.py, priority 10), which leave
plain lists to the plain converters; lists of ragged items (ragged_items.py, 20),
ahead of both for their own lists; per-row lists of ragged items (per_row_items.py,
25 and 26); and the loop views of lists of ragged items (ragged_item_views.py, 30),
ahead of the ragged lists' converters, which decline views. Of two converters of one
op with equal priority and pattern, the later one is asked first.

The TensorArray and stack ops are stateful: the walk asks their converters also when
all inputs are invariant.
"""

from pfor_controlflow.lists import (loop_views, per_row_items, plain, ragged_item_views,
                                    ragged_items, stacks, tensor_arrays)

# (flags) PLAIN: sees views materialized; VIEWS: sees views as they are; NARROW: takes
# only its own layout types (views) and declines the rest, so it goes first but listings
# name the next converter as the op's owner.
PLAIN, VIEWS, NARROW = {}, {"views": True}, {"narrow": True}

# (op types, converter, input pattern, priority, flags), per op in dispatch order.
TABLE = (
    # -- making lists
    (["TensorListReserve", "EmptyTensorList"], plain.convert_new_list, "**", 0, PLAIN),
    ("TensorListReserve", ragged_items.convert_reserve_rows, "*S", 20, PLAIN),
    ("TensorListReserve", per_row_items.convert_reserve, "*S", 25, PLAIN),
    # (ahead of convert_reserve: a per-iteration element shape decides unset items)
    (["TensorListReserve", "EmptyTensorList"], per_row_items.convert_new_shaped, "S*", 26, PLAIN),
    ("TensorListFromTensor", plain.convert_from_tensor, "**", 0, PLAIN),
    ("TensorListFromTensor", ragged_items.convert_ragged_from_tensor, "RU", 20, PLAIN),
    ("TensorListScatterV2", plain.convert_scatter_new_list, "****", 0, PLAIN),
    ("TensorListScatter", plain.convert_scatter_new_list, "***", 0, PLAIN),
    ("TensorListSplit", plain.convert_split, "***", 0, PLAIN),
    ("TensorListSplit", ragged_items.convert_ragged_split, "R??", 20, PLAIN),

    # -- one item
    ("TensorListSetItem", plain.convert_set_item, "***", 0, PLAIN),
    ("TensorListSetItem", loop_views.convert_set_item, "SU*", 10, NARROW),
    ("TensorListSetItem", loop_views.convert_set_item_at_rows, "SS*", 10, NARROW),
    ("TensorListSetItem", ragged_items.convert_ragged_set_item, "*UR", 20, VIEWS),
    ("TensorListSetItem", ragged_items.convert_ragged_set_item, "SU*", 20, NARROW),
    ("TensorListSetItem", ragged_item_views.convert_ragged_view_set_item, "SU?", 30, NARROW),
    ("TensorListSetItem", ragged_item_views.convert_ragged_view_set_item_at_rows,
     "SS?", 30, NARROW),

    ("TensorListGetItem", plain.convert_get_item, "***", 0, PLAIN),
    ("TensorListGetItem", loop_views.convert_get_item, "SUU", 10, NARROW),
    ("TensorListGetItem", loop_views.convert_get_item_at_rows, "SSU", 10, NARROW),
    ("TensorListGetItem", ragged_items.convert_ragged_get_item, "SU*", 20, NARROW),
    ("TensorListGetItem", ragged_item_views.convert_ragged_view_get_item, "SU?", 30, NARROW),
    ("TensorListGetItem", ragged_item_views.convert_ragged_view_get_item_at_rows,
     "SS?", 30, NARROW),

    ("TensorListPushBack", plain.convert_push_back, "**", 0, PLAIN),
    ("TensorListPushBack", loop_views.convert_push_back, "S*", 10, NARROW),
    ("TensorListPushBack", loop_views.convert_push_back, "SR", 30, NARROW),
    ("TensorListPushBack", ragged_items.convert_ragged_push_back, "*R", 20, VIEWS),
    ("TensorListPushBack", ragged_items.convert_ragged_push_back, "S*", 20, NARROW),
    ("TensorListPushBack", ragged_item_views.convert_ragged_view_push_back, "S?", 30, NARROW),

    ("TensorListPopBack", plain.convert_pop_back, "**", 0, PLAIN),
    ("TensorListPopBack", loop_views.convert_pop_back, "SU", 10, NARROW),
    ("TensorListPopBack", ragged_items.convert_ragged_pop_back, "S*", 20, NARROW),
    ("TensorListPopBack", ragged_item_views.convert_ragged_view_pop_back, "S*", 30, NARROW),

    # -- the whole list
    ("TensorListStack", plain.convert_stack, "**", 0, PLAIN),
    ("TensorListStack", ragged_items.convert_ragged_stack, "S*", 20, NARROW),
    ("TensorListStack", per_row_items.convert_stack_rows, "S*", 25, NARROW),
    ("TensorListGather", plain.convert_gather, "***", 0, PLAIN),
    ("TensorListScatterIntoExistingList", plain.convert_scatter_into_list, "***", 0, PLAIN),
    ("TensorListConcatV2", plain.convert_concat, "***", 0, PLAIN),
    ("TensorListConcatV2", ragged_items.convert_ragged_concat, "S*U", 20, NARROW),

    ("TensorListLength", plain.convert_length, "S", 0, PLAIN),
    ("TensorListLength", loop_views.convert_length, "S", 10, NARROW),
    ("TensorListLength", ragged_items.convert_ragged_length, "S", 20, NARROW),
    ("TensorListLength", ragged_item_views.convert_ragged_view_length, "S", 30, NARROW),

    ("TensorListElementShape", plain.convert_element_shape, "S", 0, PLAIN),
    ("TensorListElementShape", loop_views.convert_element_shape, "S", 10, NARROW),
    ("TensorListElementShape", ragged_items.convert_ragged_element_shape, "S", 20, NARROW),
    ("TensorListElementShape", ragged_item_views.convert_ragged_view_element_shape,
     "S", 30, NARROW),

    ("TensorListResize", plain.convert_resize, "**", 0, PLAIN),
    ("TensorListResize", loop_views.convert_resize, "S*", 10, NARROW),
    ("TensorListResize", ragged_items.convert_ragged_resize, "SU", 20, NARROW),
    ("TensorListResize", ragged_item_views.convert_ragged_view_resize_rows, "SS", 30, NARROW),

    # -- generic ops on list handles (a gradient sums lists and makes zero lists)
    ("AddN", plain.convert_add_lists, None, 0, PLAIN),
    ("AddN", ragged_items.convert_ragged_add_lists, "*...", 20, NARROW),
    ("AddN", ragged_item_views.convert_ragged_view_add_lists, "*...", 30, NARROW),
    ("ZerosLike", ragged_items.convert_ragged_zeros_like, "S", 20, NARROW),

    # -- TensorArrays (tf.TensorArray outside a loop body) and stacks
    ("TensorArrayV3", tensor_arrays.convert_tensor_array, "U", 0, PLAIN),
    ("TensorArrayV3", tensor_arrays.refuse_per_iteration_size, "S", 0, PLAIN),
    ("TensorArrayGradV3", tensor_arrays.convert_tensor_array_grad, "UU", 0, PLAIN),
    ("TensorArrayWriteV3", tensor_arrays.convert_write, "U**U", 0, PLAIN),
    ("TensorArrayScatterV3", tensor_arrays.convert_scatter, "U**U", 0, PLAIN),
    ("TensorArrayReadV3", tensor_arrays.convert_read, "U*U", 0, PLAIN),
    ("TensorArrayGatherV3", tensor_arrays.convert_gather, "U*U", 0, PLAIN),
    ("TensorArraySizeV3", tensor_arrays.convert_size, "UU", 0, PLAIN),
    ("StackV2", stacks.convert_stack, "*", 0, PLAIN),
    ("StackPushV2", stacks.convert_push, "U*", 0, PLAIN),
    ("StackPopV2", stacks.convert_pop, "U", 0, PLAIN),
    (["StackCloseV2", "TensorArrayCloseV3"], stacks.convert_close, "U", 0, PLAIN),
)


def register(registry):
    for op_types, fn, inputs, priority, flags in TABLE:
        registry.add(op_types, fn, inputs=inputs, priority=priority, **flags)
