"""Eager values met while a ``tf.compat.v1`` graph is being built.

TF2 creates tensors and variables eagerly, e.g. a Keras model built before legacy code
enters ``with graph.as_default():``. The body is a function graph, so it may capture
such a value; the caller's v1 graph cannot hold one, and TensorFlow's own ops,
``tf.vectorized_map`` and ``GradientTape.jacobian`` refuse it there ("Attempting to
capture an EagerTensor without building a function"). pfor gives the graph what keeps
the value's meaning, or says why nothing can:

- An eager tensor is immutable: it becomes a constant of the graph holding its value
  (as ``tf.constant`` of it does, and as function graphs capture small eager tensors).
  The session computes what the eager code would.
- An eager variable's handle cannot be given to the graph. The variable lives in the
  eager runtime; a Session runs the graph on its own devices, whose resources are
  not the eager runtime's, and a handle can be neither written into a graph nor fed to
  a Session. A constant of its value would silently stop following its assignments
  (an optimizer step, ``set_weights``), so this is an error that says what to do.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf
from tensorflow.python.framework import ops

# TensorFlow's text when an eager value reaches a graph that is not a function's.
TF_REFUSAL = "Attempting to capture an EagerTensor without building a function"

_REMEDY = (
    "Create the variables inside the graph (e.g. build the model under "
    "`with graph.as_default():`, then run tf.compat.v1.global_variables_initializer() in "
    "the session), or run without a Session: eagerly or inside a tf.function, where "
    "eager variables are read as they are.")


def building_v1_graph() -> bool:
    """Whether a ``tf.compat.v1`` graph (not a function's) is being built."""
    return not tf.executing_eagerly() and not ops.get_default_graph().building_function


def graph_value(value, what: str, variable=None):
    """``value`` as a tensor the default graph can hold: an eager tensor as a constant
    of its value while a v1 graph is being built; anything else as it is. ``what``
    names the value for messages ("loop_fn uses", "x[0] is"); ``variable`` is the
    variable whose handle ``value`` is, where known. An eager variable, or its handle,
    is a ``ValueError`` (see the module docstring)."""
    if not building_v1_graph():
        return value
    if isinstance(value, tf.Variable) and isinstance(value.handle, ops.EagerTensor):
        raise ValueError(variable_refused(what, value))
    if not isinstance(value, ops.EagerTensor):
        return value
    if value.dtype == tf.resource:
        raise ValueError(variable_refused(what, variable))
    if value.dtype == tf.variant:
        raise ValueError(
            f"pfor: {what} an eager variant tensor (e.g. a tensor list or a dataset) "
            "while a tf.compat.v1 graph is being built; a graph cannot hold an eager value "
            "and a variant has no value to copy into it. Create it inside the graph.")
    with ops.control_dependencies(None):  # a constant, not ordered after anything
        return tf.constant(value.numpy(), value.dtype, name="eager_value")


def variable_refused(what: str, variable=None) -> str:
    """Why an eager variable cannot be used in a v1 graph, and what to do instead."""
    if variable is not None:
        kind = (f"the variable '{variable.name}' ({variable.dtype.name}, shape "
                f"{variable.shape.as_list()})")
    else:
        kind = "the handle of a variable (or of another resource)"
    return (
        f"pfor: {what} {kind}, created eagerly (e.g. a Keras model built before "
        "`with graph.as_default():`), while a tf.compat.v1 graph is being built. A "
        "Session cannot reach an eager variable: it runs the graph on its own devices, "
        "whose resources are not the eager runtime's, and a variable's handle can be "
        "neither written into a graph nor fed to a Session; a copy of its value would not "
        "follow its assignments. TensorFlow's own ops, tf.vectorized_map and "
        f"GradientTape.jacobian fail the same way ('{TF_REFUSAL}'). {_REMEDY}")


@contextlib.contextmanager
def refused_as(what: str):
    """Runs user code in a v1 graph: TensorFlow's refusal of an eager value there
    becomes the ``ValueError`` above, naming ``what`` ran ("f's forward pass")."""
    try:
        yield
    except RuntimeError as err:
        if TF_REFUSAL not in str(err) or not building_v1_graph():
            raise
        raise ValueError(
            f"pfor: {what} uses an eager value (a variable or tensor created eagerly, "
            "e.g. a Keras model's weights built before `with graph.as_default():`) while "
            "a tf.compat.v1 graph is being built, and TensorFlow refused it: "
            f"'{TF_REFUSAL}'. A graph cannot hold an eager value, and a Session cannot "
            f"reach an eager variable. {_REMEDY} An eager tensor can be given to the "
            "graph as tf.constant(t).") from err
