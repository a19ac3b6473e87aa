"""While loops: the converter (while_loop.py), its loop variables (loop_vars.py), the
active-subset and masked runners of per-iteration trip counts and the choice between
them (trip_counts.py, masking.py), what such a loop records for its gradient once for
all rows (records.py), sums deferred past the loop (deferred_sums.py) and the row
views of a loop's reads (row_views.py); table.py registers every converter."""
