"""Slicing ops in every layout, one module per op family: gathers (``gather``), Slice
(``slice``), StridedSlice (``strided_slice``), its gradient StridedSliceGrad
(``slice_grads``), pads (``pad``), reverses and rolls (``reverse_roll``); ``common`` holds
what several of them use (windows at per-iteration offsets, plans of ragged slices)."""
