"""pfor converter pack for control flow: conditionals (If, Case), while loops (also with
per-iteration trip counts), function calls, tensor lists and optionals.

Layout, bottom to top (a subpackage imports only those below it): functions.py (the
function graphs of calls, branches and bodies), total_ops.py (what running ops on rows
that should not run them needs) and split_optional.py (a conditional's optional
output); lists/ (tensor lists, TensorArrays, stacks); conditionals/; loops/; calls.py;
plugin.py, which registers each subpackage's table.py."""

__version__ = "0.7.6"
