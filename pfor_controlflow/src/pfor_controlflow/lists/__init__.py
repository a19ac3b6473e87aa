"""Tensor lists, TensorArrays and stacks: plain lists, lists with lengths, their loop
views, lists of ragged items (also per row and as loop views); table.py registers
every converter."""
