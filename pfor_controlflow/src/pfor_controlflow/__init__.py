"""pfor converter pack for control flow: conditionals (If, Case), while loops (also with
per-iteration trip counts), function calls, tensor lists and optionals."""

__version__ = "0.6.6"
