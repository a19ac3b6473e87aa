"""Running a conversion eagerly: as a graph function, whatever the debugging switches.

A conversion emits graph ops, so eagerly it is wrapped in a ``tf.function``. Under
``tf.config.run_functions_eagerly(True)`` (the usual debugging switch) calling that
function would run its Python eagerly; like ``tf.vectorized_map`` we ignore the switch
and run the traced graph itself (a concrete function always executes as a graph).
"""

from __future__ import annotations

import tensorflow as tf

from pfor_core import checks


def graph_function(fn, jit_compile=None):
    """``fn`` as a ``tf.function`` for our own code (no AutoGraph, no retracing noise:
    each eager call converts anew by design; ``pf.vmap`` is the caching entry point)."""
    function = tf.function(fn, autograph=False, jit_compile=jit_compile)
    function._omit_frequent_tracing_warning = True  # pylint: disable=protected-access
    return function


def call(function, *args):
    """Call a ``tf.function`` as a graph, with TensorFlow's shape errors at run time
    turned into a message about the loop body."""
    if tf.config.functions_run_eagerly():
        run = lambda: function.get_concrete_function(*args)(*args)  # noqa: E731
    else:
        run = lambda: function(*args)  # noqa: E731
    return checks.run_eagerly(run)
