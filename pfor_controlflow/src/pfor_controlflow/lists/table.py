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


def register(registry):
    add = registry.add
    # -- making lists
    add(["TensorListReserve", "EmptyTensorList"], plain.convert_new_list, inputs="**")
    add("TensorListReserve", ragged_items.convert_reserve_rows, inputs="*S", priority=20)
    add("TensorListReserve", per_row_items.convert_reserve, inputs="*S", priority=25)
    # (ahead of convert_reserve: a per-iteration element shape decides unset items)
    add(["TensorListReserve", "EmptyTensorList"], per_row_items.convert_new_shaped,
        inputs="S*", priority=26)
    add("TensorListFromTensor", plain.convert_from_tensor, inputs="**")
    add("TensorListFromTensor", ragged_items.convert_ragged_from_tensor, inputs="RU",
        priority=20)
    add("TensorListScatterV2", plain.convert_scatter_new_list, inputs="****")
    add("TensorListScatter", plain.convert_scatter_new_list, inputs="***")
    add("TensorListSplit", plain.convert_split, inputs="***")
    add("TensorListSplit", ragged_items.convert_ragged_split, inputs="R??", priority=20)

    # -- one item
    add("TensorListSetItem", plain.convert_set_item, inputs="***")
    add("TensorListSetItem", loop_views.convert_set_item, inputs="SU*", priority=10,
        narrow=True)
    add("TensorListSetItem", loop_views.convert_set_item_at_rows, inputs="SS*", priority=10,
        narrow=True)
    add("TensorListSetItem", ragged_items.convert_ragged_set_item, inputs="*UR", priority=20,
        views=True)
    add("TensorListSetItem", ragged_items.convert_ragged_set_item, inputs="SU*", priority=20,
        narrow=True)
    add("TensorListSetItem", ragged_item_views.convert_ragged_view_set_item, inputs="SU?",
        priority=30, narrow=True)
    add("TensorListSetItem", ragged_item_views.convert_ragged_view_set_item_at_rows,
        inputs="SS?", priority=30, narrow=True)

    add("TensorListGetItem", plain.convert_get_item, inputs="***")
    add("TensorListGetItem", loop_views.convert_get_item, inputs="SUU", priority=10,
        narrow=True)
    add("TensorListGetItem", loop_views.convert_get_item_at_rows, inputs="SSU", priority=10,
        narrow=True)
    add("TensorListGetItem", ragged_items.convert_ragged_get_item, inputs="SU*", priority=20,
        narrow=True)
    add("TensorListGetItem", ragged_item_views.convert_ragged_view_get_item, inputs="SU?",
        priority=30, narrow=True)
    add("TensorListGetItem", ragged_item_views.convert_ragged_view_get_item_at_rows,
        inputs="SS?", priority=30, narrow=True)

    add("TensorListPushBack", plain.convert_push_back, inputs="**")
    add("TensorListPushBack", loop_views.convert_push_back, inputs="S*", priority=10,
        narrow=True)
    add("TensorListPushBack", loop_views.convert_push_back, inputs="SR", priority=30,
        narrow=True)
    add("TensorListPushBack", ragged_items.convert_ragged_push_back, inputs="*R", priority=20,
        views=True)
    add("TensorListPushBack", ragged_items.convert_ragged_push_back, inputs="S*", priority=20,
        narrow=True)
    add("TensorListPushBack", ragged_item_views.convert_ragged_view_push_back, inputs="S?",
        priority=30, narrow=True)

    add("TensorListPopBack", plain.convert_pop_back, inputs="**")
    add("TensorListPopBack", loop_views.convert_pop_back, inputs="SU", priority=10,
        narrow=True)
    add("TensorListPopBack", ragged_items.convert_ragged_pop_back, inputs="S*", priority=20,
        narrow=True)
    add("TensorListPopBack", ragged_item_views.convert_ragged_view_pop_back, inputs="S*",
        priority=30, narrow=True)

    # -- the whole list
    add("TensorListStack", plain.convert_stack, inputs="**")
    add("TensorListStack", ragged_items.convert_ragged_stack, inputs="S*", priority=20,
        narrow=True)
    add("TensorListStack", per_row_items.convert_stack_rows, inputs="S*", priority=25,
        narrow=True)
    add("TensorListGather", plain.convert_gather, inputs="***")
    add("TensorListScatterIntoExistingList", plain.convert_scatter_into_list, inputs="***")
    add("TensorListConcatV2", plain.convert_concat, inputs="***")
    add("TensorListConcatV2", ragged_items.convert_ragged_concat, inputs="S*U", priority=20,
        narrow=True)

    add("TensorListLength", plain.convert_length, inputs="S")
    add("TensorListLength", loop_views.convert_length, inputs="S", priority=10, narrow=True)
    add("TensorListLength", ragged_items.convert_ragged_length, inputs="S", priority=20,
        narrow=True)
    add("TensorListLength", ragged_item_views.convert_ragged_view_length, inputs="S",
        priority=30, narrow=True)

    add("TensorListElementShape", plain.convert_element_shape, inputs="S")
    add("TensorListElementShape", loop_views.convert_element_shape, inputs="S", priority=10,
        narrow=True)
    add("TensorListElementShape", ragged_items.convert_ragged_element_shape, inputs="S",
        priority=20, narrow=True)
    add("TensorListElementShape", ragged_item_views.convert_ragged_view_element_shape,
        inputs="S", priority=30, narrow=True)

    add("TensorListResize", plain.convert_resize, inputs="**")
    add("TensorListResize", loop_views.convert_resize, inputs="S*", priority=10, narrow=True)
    add("TensorListResize", ragged_items.convert_ragged_resize, inputs="SU", priority=20,
        narrow=True)
    add("TensorListResize", ragged_item_views.convert_ragged_view_resize_rows, inputs="SS",
        priority=30, narrow=True)

    # -- generic ops on list handles (a gradient sums lists and makes zero lists)
    add("AddN", plain.convert_add_lists)
    add("AddN", ragged_items.convert_ragged_add_lists, inputs="*...", priority=20,
        narrow=True)
    add("AddN", ragged_item_views.convert_ragged_view_add_lists, inputs="*...", priority=30,
        narrow=True)
    add("ZerosLike", ragged_items.convert_ragged_zeros_like, inputs="S", priority=20,
        narrow=True)

    # -- TensorArrays (tf.TensorArray outside a loop body) and stacks
    add("TensorArrayV3", tensor_arrays.convert_tensor_array, inputs="U")
    add("TensorArrayV3", tensor_arrays.refuse_per_iteration_size, inputs="S")
    add("TensorArrayGradV3", tensor_arrays.convert_tensor_array_grad, inputs="UU")
    add("TensorArrayWriteV3", tensor_arrays.convert_write, inputs="U**U")
    add("TensorArrayScatterV3", tensor_arrays.convert_scatter, inputs="U**U")
    add("TensorArrayReadV3", tensor_arrays.convert_read, inputs="U*U")
    add("TensorArrayGatherV3", tensor_arrays.convert_gather, inputs="U*U")
    add("TensorArraySizeV3", tensor_arrays.convert_size, inputs="UU")
    add("StackV2", stacks.convert_stack, inputs="*")
    add("StackPushV2", stacks.convert_push, inputs="U*")
    add("StackPopV2", stacks.convert_pop, inputs="U")
    add(["StackCloseV2", "TensorArrayCloseV3"], stacks.convert_close, inputs="U")
