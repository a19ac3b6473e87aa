"""Every converter of the tensor-list, TensorArray and stack ops, one op after the other.

Each list layout has its own converters: plain lists (plain.py) and lists with
lengths (with_lengths.py, through the plain converters); the loop views of plain
lists (loop_views.py, ``ListView``); lists of ragged items (ragged_items.py and
per_row_items.py, ``RaggedList``); and their loop views (ragged_item_views.py,
``RaggedListView``). A converter registered for a view type (``view=``) is tried only
when an input is of that type, and ahead of the converters that are not (the plain
ones, and those that take a ragged item into any list), the more specific pattern
first among those: so the view types and patterns order each op's converters, and a
priority (FIRST) only two converters of one layout that must go in a given order.

The TensorArray and stack ops are stateful: the walk asks their converters also when
all inputs are invariant.
"""

from pfor_controlflow.lists import (fallback_rows, loop_views, per_row_items, plain,
                                    ragged_item_views, ragged_items, stacks, tensor_arrays)
from pfor_controlflow.lists.loop_views import ListView
from pfor_controlflow.lists.ragged_item_views import RaggedListView
from pfor_controlflow.lists.ragged_items import RaggedList

# (flags) PLAIN: sees views materialized; VIEWS: sees views as they are; the others:
# tried only for inputs of these view types (and listings name the next converter as
# the op's owner). RAGGED_ROWS: per-row converters, which take a RaggedList as a view
# of all its rows.
PLAIN, VIEWS = {}, {"views": True}
LIST_VIEW, RAGGED_LIST = {"view": ListView}, {"view": RaggedList}
RAGGED_VIEW, RAGGED_ROWS = {"view": RaggedListView}, {"view": (RaggedListView, RaggedList)}
FIRST = {"priority": 1}  # ahead of the other converters of its layout (see the row)

# (op types, converter, input pattern, flags), per op.
TABLE = (
    # -- making lists
    (["TensorListReserve", "EmptyTensorList"], plain.convert_new_list, "**", PLAIN),
    # (these two decline each other's lists: in a loop of the body or not)
    ("TensorListReserve", ragged_items.convert_reserve_rows, "*S", PLAIN),
    ("TensorListReserve", per_row_items.convert_reserve, "*S", PLAIN),
    # (ahead of convert_reserve: a per-iteration element shape decides unset items)
    (["TensorListReserve", "EmptyTensorList"], per_row_items.convert_new_shaped, "S*",
     FIRST),
    ("TensorListFromTensor", plain.convert_from_tensor, "**", PLAIN),
    ("TensorListFromTensor", ragged_items.convert_ragged_from_tensor, "RU", PLAIN),
    ("TensorListScatterV2", plain.convert_scatter_new_list, "****", PLAIN),
    ("TensorListScatter", plain.convert_scatter_new_list, "***", PLAIN),
    ("TensorListSplit", plain.convert_split, "***", PLAIN),
    ("TensorListSplit", ragged_items.convert_ragged_split, "R??", PLAIN),

    # -- one item
    ("TensorListSetItem", plain.convert_set_item, "***", PLAIN),
    ("TensorListSetItem", ragged_items.convert_ragged_set_item, "*UR", VIEWS),
    ("TensorListSetItem", loop_views.convert_set_item, "SU*", LIST_VIEW),
    ("TensorListSetItem", loop_views.convert_set_item_at_rows, "SS*", LIST_VIEW),
    ("TensorListSetItem", ragged_items.convert_ragged_set_item, "SU*", RAGGED_LIST),
    ("TensorListSetItem", ragged_item_views.convert_ragged_view_set_item, "SU?", RAGGED_VIEW),
    ("TensorListSetItem", ragged_item_views.convert_ragged_view_set_item_at_rows, "SS?",
     RAGGED_ROWS),

    ("TensorListGetItem", plain.convert_get_item, "***", PLAIN),
    ("TensorListGetItem", loop_views.convert_get_item, "SUU", LIST_VIEW),
    ("TensorListGetItem", loop_views.convert_get_item_at_rows, "SSU", LIST_VIEW),
    ("TensorListGetItem", ragged_items.convert_ragged_get_item, "SU*", RAGGED_LIST),
    ("TensorListGetItem", ragged_item_views.convert_ragged_view_get_item, "SU?", RAGGED_VIEW),
    ("TensorListGetItem", ragged_item_views.convert_ragged_view_get_item_at_rows, "SS?",
     RAGGED_ROWS),

    ("TensorListPushBack", plain.convert_push_back, "**", PLAIN),
    ("TensorListPushBack", ragged_items.convert_ragged_push_back, "*R", VIEWS),
    ("TensorListPushBack", loop_views.convert_push_back, "S*", LIST_VIEW),
    ("TensorListPushBack", loop_views.convert_push_back, "SR", LIST_VIEW),
    ("TensorListPushBack", ragged_items.convert_ragged_push_back, "S*", RAGGED_LIST),
    ("TensorListPushBack", ragged_item_views.convert_ragged_view_push_back, "S?", RAGGED_VIEW),

    ("TensorListPopBack", plain.convert_pop_back, "**", PLAIN),
    ("TensorListPopBack", loop_views.convert_pop_back, "SU", LIST_VIEW),
    ("TensorListPopBack", ragged_items.convert_ragged_pop_back, "S*", RAGGED_LIST),
    ("TensorListPopBack", ragged_item_views.convert_ragged_view_pop_back, "S*", RAGGED_VIEW),

    # -- the whole list
    ("TensorListStack", plain.convert_stack, "**", PLAIN),
    ("TensorListStack", ragged_items.convert_ragged_stack, "S*", RAGGED_LIST),
    # (ahead of convert_ragged_stack, which refuses lists whose rows hold their own
    # numbers of items: this one stacks those and declines the others)
    ("TensorListStack", per_row_items.convert_stack_rows, "S*", RAGGED_LIST | FIRST),
    ("TensorListGather", plain.convert_gather, "***", PLAIN),
    ("TensorListScatterIntoExistingList", plain.convert_scatter_into_list, "***", PLAIN),
    ("TensorListConcatV2", plain.convert_concat, "***", PLAIN),
    ("TensorListConcatV2", ragged_items.convert_ragged_concat, "S*U", RAGGED_LIST),

    ("TensorListLength", plain.convert_length, "S", PLAIN),
    ("TensorListLength", loop_views.convert_length, "S", LIST_VIEW),
    ("TensorListLength", ragged_items.convert_ragged_length, "S", RAGGED_LIST),
    ("TensorListLength", ragged_item_views.convert_ragged_view_length, "S", RAGGED_VIEW),

    ("TensorListElementShape", plain.convert_element_shape, "S", PLAIN),
    ("TensorListElementShape", loop_views.convert_element_shape, "S", LIST_VIEW),
    ("TensorListElementShape", ragged_items.convert_ragged_element_shape, "S", RAGGED_LIST),
    ("TensorListElementShape", ragged_item_views.convert_ragged_view_element_shape, "S",
     RAGGED_VIEW),

    ("TensorListResize", plain.convert_resize, "**", PLAIN),
    ("TensorListResize", loop_views.convert_resize, "S*", LIST_VIEW),
    ("TensorListResize", ragged_items.convert_ragged_resize, "SU", RAGGED_LIST),
    ("TensorListResize", ragged_item_views.convert_ragged_view_resize_rows, "SS", RAGGED_ROWS),

    # -- generic ops on list handles (a gradient sums lists and makes zero lists)
    ("AddN", plain.convert_add_lists, None, PLAIN),
    ("AddN", loop_views.convert_add_lists, "*...", LIST_VIEW),
    ("AddN", ragged_items.convert_ragged_add_lists, "*...", RAGGED_LIST),
    # (ahead of convert_ragged_add_lists for a sum of both kinds, which only it takes)
    ("AddN", ragged_item_views.convert_ragged_view_add_lists, "*...", RAGGED_VIEW | FIRST),
    ("ZerosLike", loop_views.convert_zeros_like, "S", LIST_VIEW),
    ("ZerosLike", ragged_items.convert_ragged_zeros_like, "S", RAGGED_LIST),

    # -- TensorArrays (tf.TensorArray outside a loop body) and stacks
    ("TensorArrayV3", tensor_arrays.convert_tensor_array, "U", PLAIN),
    ("TensorArrayV3", tensor_arrays.refuse_per_iteration_size, "S", PLAIN),
    ("TensorArrayGradV3", tensor_arrays.convert_tensor_array_grad, "UU", PLAIN),
    ("TensorArrayWriteV3", tensor_arrays.convert_write, "U**U", PLAIN),
    ("TensorArrayScatterV3", tensor_arrays.convert_scatter, "U**U", PLAIN),
    ("TensorArrayReadV3", tensor_arrays.convert_read, "U*U", PLAIN),
    ("TensorArrayGatherV3", tensor_arrays.convert_gather, "U*U", PLAIN),
    ("TensorArraySizeV3", tensor_arrays.convert_size, "UU", PLAIN),
    ("StackV2", stacks.convert_stack, "*", PLAIN),
    ("StackPushV2", stacks.convert_push, "U*", PLAIN),
    ("StackPopV2", stacks.convert_pop, "U", PLAIN),
    (["StackCloseV2", "TensorArrayCloseV3"], stacks.convert_close, "U", PLAIN),
)

def register(registry):
    for op_types, fn, inputs, flags in TABLE:
        registry.add(op_types, fn, inputs=inputs, **flags)
    registry.variant_form(fallback_rows.FORM)
