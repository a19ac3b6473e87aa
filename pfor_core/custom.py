"""User-supplied vectorization rules: ``@pf.custom_vectorization``.

A decorated function runs as a call of a ``tf.function`` of the original, named
``pfor_custom_<name>``. Tracing the original marks its function graph with a ``Site``
(the rule, the argument structure, the output structure); the walk finds the mark
through the call op's ``f`` attr and, inside ``pfor``, runs the user's batched
implementation on the converted inputs instead of converting the body. Elsewhere the
call is an ordinary function call: the original runs. The mark lives on the traced
graph, so there is no registry of decorated functions and nothing global to clean up.

Gradients: the call is wrapped in ``tf.custom_gradient`` whose gradient is itself a
custom-vectorized function, the VJP of the arguments: outside ``pfor`` it
differentiates the original, inside it differentiates the batched implementation
(invariant arguments broadcast first, so each iteration gets its own gradient).
Higher orders repeat the construction. Gradients for variables the function reads are
the original's (inside ``pfor`` converted op by op), since the batched implementation
reads the variable for all iterations at once.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import tensorflow as tf
from tensorflow.python.autograph.core import ag_ctx
from tensorflow.python.autograph.impl import api as autograph_api
from tensorflow.python.eager import record
from tensorflow.python.framework import ops
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.util import nest

from pfor_core.emit import checked
from pfor_core.errors import ConversionError
from pfor_core.layout import Stacked, broadcast_invariant

_MARK = "_pfor_custom_vectorization"
_PREFIX = "pfor_custom_"
_CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Site:
    """What one trace of a decorated function records on its function graph."""

    rule: "CustomVectorization"
    args: tuple  # the positional arguments as traced (nested, tensor leaves)
    outputs: object  # what the original returned (nested; None only in a VJP's grads)

    @property
    def n_args(self) -> int:
        return len(tf.nest.flatten(self.args))


class CustomVectorization:
    """A function with its own vectorization rule; see ``custom_vectorization``."""

    def __init__(self, fn, *, name: str | None = None):
        if not callable(fn):
            raise TypeError(f"pf.custom_vectorization needs a callable, got {type(fn).__name__}.")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__qualname__", None) or type(fn).__name__
        self.batched = None
        self._vjp_rule = None
        enabled = ag_ctx.ControlStatusCtx(status=ag_ctx.Status.ENABLED)
        original = autograph_api.tf_convert(fn, enabled)  # as tf.function would

        def traced(*args):
            outputs = original(*args)
            outputs = tf.nest.map_structure(
                lambda leaf: leaf if leaf is None and self._allows_none else
                _to_tensor(leaf, self.name, "returned"), outputs)
            setattr(ops.get_default_graph(), _MARK, Site(rule=self, args=args, outputs=outputs))
            return outputs

        traced.__name__ = _PREFIX + re.sub(r"\W", "_", self.name.rsplit(".", 1)[-1])
        self._function = tf.function(traced, autograph=False)
        self._allows_none = False  # only the VJP rule may return None (no gradient)
        # Core-only: ``layout_rule(layouts, conversion)`` maps the arguments' layouts
        # (ragged ones too) to the outputs', or None to convert the call op by op; its
        # gradients are the original's (pf.dag_map).
        self.layout_rule = None
        self.layout_rule_text = ""  # what pf.explain says the rule did
        # Core-only: ``gradient_rule(flat_args, outputs, dys, variables)`` replaces the
        # gradient below; returns what ``_gradient`` returns.
        self.gradient_rule = None

    def def_vectorized(self, batched_fn):
        """Set the batched implementation: ``batched_fn(stacked, *args)``; returns it.

        ``stacked`` holds one entry per argument, nested like it, with ``True`` where
        the argument differs per iteration (it then has a leading axis of the loop's
        size) and ``False`` where it is the same in every iteration (as in one
        iteration). ``batched_fn`` returns what the original returns, each tensor with
        the leading iteration axis.
        """
        if not callable(batched_fn):
            raise TypeError(f"{self.name}.def_vectorized needs a callable, got "
                            f"{type(batched_fn).__name__}.")
        enabled = ag_ctx.ControlStatusCtx(status=ag_ctx.Status.ENABLED)
        self.batched = autograph_api.tf_convert(batched_fn, enabled)
        return batched_fn

    def __repr__(self):
        return f"<pf.custom_vectorization {self.name}>"

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"{self.name} is a pf.custom_vectorization function: pass its "
                            f"arguments positionally (got keywords {sorted(kwargs)}).")
        args = tf.nest.map_structure(lambda a: _to_tensor(a, self.name, "was passed"), args)
        flat_args = tf.nest.flatten(args)
        holder = {}

        # Traced first: a trace under stop_recording would hide a VJP's inner tape.
        function = self._function.get_concrete_function(*args)

        @tf.custom_gradient
        def call(*flat):
            with record.stop_recording():  # the gradient is ours: no inner forward pass
                outputs = function(*tf.nest.pack_sequence_as(args, list(flat)))
            for v in function.graph.variables:  # as the call does when tapes record
                resource_variable_ops.variable_accessed(v)
            holder["outputs"] = outputs
            tensors = [t for t in tf.nest.flatten(outputs) if t is not None]

            def grad(*dys, variables=None):
                return self._gradient(args, flat, tensors, dys, variables)

            return tensors, grad

        tensors = iter(call(*flat_args))
        outputs = holder["outputs"]
        return tf.nest.pack_sequence_as(
            outputs, [None if t is None else next(tensors) for t in tf.nest.flatten(outputs)])

    # -- gradients ----------------------------------------------------------------
    def _gradient(self, args, flat_args, outputs, dys, variables):
        if self.gradient_rule is not None:
            return self.gradient_rule(list(flat_args), outputs, dys, variables)
        flat_args = list(flat_args)
        wanted = [k for k, t in enumerate(outputs) if _differentiable(t.dtype)]
        dys = [tf.zeros_like(outputs[k]) if dys[k] is None else dys[k] for k in wanted]
        if variables or self.layout_rule is not None:
            # The original's gradient (converted op by op inside pfor): the batched
            # implementation reads the variable once for all iterations.
            variables = list(variables or [])
            with tf.GradientTape() as tape:
                sources = [a for a in flat_args if _differentiable(a.dtype)]
                tape.watch(sources)
                again = [t for t in tf.nest.flatten(self.fn(*tf.nest.pack_sequence_as(
                    args, flat_args))) if t is not None]
            grads = tape.gradient([again[k] for k in wanted], sources + list(variables),
                                  output_gradients=dys)
            it = iter(grads[:len(sources)])
            input_grads = [next(it) if _differentiable(a.dtype) else None for a in flat_args]
            return (input_grads, list(grads[len(sources):])) if variables else input_grads
        if not wanted:
            return [None] * len(flat_args)
        grads = iter(self.vjp_rule()(tf.nest.pack_sequence_as(args, flat_args), tuple(dys)))
        return [next(grads) if _differentiable(a.dtype) else None for a in flat_args]

    def vjp_rule(self) -> "CustomVectorization":
        """``vjp(args, dys)``: the gradients of the differentiable flat arguments (None
        where there is none), as a custom-vectorized function itself."""
        if self._vjp_rule is None:
            def vjp(args, dys):
                flat = tf.nest.flatten(args)
                sources = [a for a in flat if _differentiable(a.dtype)]
                outputs = _differentiable_outputs(self.fn(*args))
                return _gradients(outputs, sources, dys)

            rule = CustomVectorization(vjp, name=f"vjp_of_{self.name}")
            rule._allows_none = True  # pylint: disable=protected-access
            rule.batched = functools.partial(_batched_vjp, self)
            self._vjp_rule = rule
        return self._vjp_rule


def _batched_vjp(rule, stacked, args, dys):
    """The VJP of ``rule``'s batched implementation, per iteration: every
    differentiable argument enters stacked, so its gradient has one row per iteration."""
    stacked_args, stacked_dys = stacked
    flat = tf.nest.flatten(args)
    flags = tf.nest.flatten(stacked_args)
    n = _loop_size([t for t, s in zip(flat + list(dys), flags + list(stacked_dys)) if s])
    sources, inputs, in_flags = [], [], []
    for t, s in zip(flat, flags):
        if _differentiable(t.dtype) and not s:
            t, s = broadcast_invariant(t, n), True
        inputs.append(t)
        in_flags.append(s)
        if _differentiable(t.dtype):
            sources.append(t)
    outputs = run_batched(rule, tuple(tf.nest.pack_sequence_as(stacked_args, in_flags)),
                          tf.nest.pack_sequence_as(args, inputs), n=n)
    dys = [d if s else broadcast_invariant(d, n) for d, s in zip(dys, stacked_dys)]
    return _gradients(_differentiable_outputs(outputs), sources, dys)


def _gradients(outputs, sources, dys) -> tuple:
    """Symbolic gradients (None where unconnected). Not a tape: these run while a
    graph is traced or converted, where the tapes may be paused (as TensorFlow's
    forward mode does while it transposes a backward function)."""
    return tuple(tf.gradients(outputs, sources, grad_ys=list(dys)))


# -- inside pfor ------------------------------------------------------------------
def site_of(op) -> Site | None:
    """The decorated function an op calls, or None (for any other op)."""
    if op.type not in _CALLS:
        return None
    name = op.get_attr("f").name
    if _PREFIX not in name:
        return None
    graph = op.graph
    while graph is not None:
        fn = graph._get_function(name)  # pylint: disable=protected-access
        if fn is not None:
            return getattr(getattr(fn, "graph", None), _MARK, None)
        graph = getattr(graph, "outer_graph", None)
    return None


def convert(site: Site, op, layouts, conversion) -> list[Stacked]:
    """The call ``op`` of ``site``'s function, at least one argument stacked, as the
    stacked outputs of the batched implementation."""
    rule, n_args = site.rule, site.n_args
    captured = [k for k, v in enumerate(layouts[n_args:]) if v.is_stacked]
    if captured:
        raise ConversionError(
            f"pfor: the custom-vectorized function {rule.name} closes over a value that "
            "differs per iteration (a tensor of the loop body it captured); its batched "
            "implementation cannot see it. Pass that value as an argument instead.")
    if rule.batched is None:
        raise ConversionError(
            f"pfor: the custom-vectorized function {rule.name} was called inside pfor, but "
            f"has no batched implementation: define one with @{rule.name}.def_vectorized.")
    args = tf.nest.pack_sequence_as(site.args, [v.tensor for v in layouts[:n_args]])
    stacked = tf.nest.pack_sequence_as(site.args, [v.is_stacked for v in layouts[:n_args]])
    outputs = run_batched(rule, tuple(stacked), args, n=conversion.n,
                          n_static=conversion.n_static, expected=site.outputs)
    return [Stacked(tensor=t) for t in outputs]


def run_batched(rule, stacked, args, *, n, n_static=None, expected=None) -> list:
    """The batched implementation's outputs, flat and checked: the structure of
    ``expected`` (the original's outputs; entries where it has None are dropped),
    dtypes, per-iteration shapes and the leading size ``n``."""
    result = rule.batched(stacked, *args)
    if expected is None:  # an inner call (a VJP's forward pass): None kept
        return [None if t is None else _to_tensor(t, rule.name, "batched implementation "
                                                  "returned") for t in tf.nest.flatten(result)]
    try:
        tf.nest.assert_same_structure(expected, result)
    except (TypeError, ValueError) as err:
        raise ConversionError(
            f"pfor: the batched implementation of {rule.name} returned a structure unlike "
            f"the original's: {err}") from None
    out = []
    paths = nest.flatten_with_joined_string_paths(expected)
    for (path, want), got in zip(paths, tf.nest.flatten(result)):
        if want is None:
            continue
        if got is None and rule._allows_none:  # pylint: disable=protected-access
            got = tf.zeros(tf.concat([[n], tf.shape(want)], 0), want.dtype)
        out.append(_check_output(rule, path, want, got, n, n_static))
    return out


def _check_output(rule, path, want, got, n, n_static):
    where = (f"output {path + ' ' if path else ''}of the batched implementation of "
             f"{rule.name}")
    try:
        got = tf.convert_to_tensor(got)
    except (TypeError, ValueError) as err:
        raise ConversionError(f"pfor: {where} is a {type(got).__name__}, not a tensor: "
                              f"{err}") from None
    if got.dtype != want.dtype:
        raise ConversionError(f"pfor: {where} has dtype {got.dtype.name}, the original "
                              f"returns {want.dtype.name}.")
    shape = got.shape
    if shape.rank is not None and want.shape.rank is not None and (
            shape.rank != want.shape.rank + 1
            or not shape[1:].is_compatible_with(want.shape)):
        raise ConversionError(
            f"pfor: {where} has shape {shape}; it must be [iterations] + the original's "
            f"per-iteration shape {want.shape}.")
    lead = tf.compat.dimension_value(shape[0]) if shape.rank else None
    if lead is not None and n_static is not None and lead != n_static:
        raise ConversionError(f"pfor: {where} has {lead} rows; the loop has "
                              f"{n_static} iterations (one row per iteration).")
    if lead is None or n_static is None:
        size = tf.shape(got, out_type=tf.int32)[0] if shape.rank != 0 else 0
        ok = tf.equal(size, tf.cast(n, tf.int32))
        got = checked(got, ok, [f"pfor: {where} must have one row per iteration; rows, "
                                "iterations:", size, n])
    if shape.rank is not None and want.shape.rank is not None:
        got.set_shape(tf.TensorShape([n_static]).concatenate(want.shape))
    return got


def _loop_size(stacked_tensors) -> tf.Tensor:
    return tf.shape(stacked_tensors[0], out_type=tf.int32)[0]


def _differentiable(dtype) -> bool:
    dtype = tf.as_dtype(dtype)
    return dtype.is_floating or dtype.is_complex


def _differentiable_outputs(outputs) -> list:
    return [t for t in tf.nest.flatten(outputs) if t is not None and _differentiable(t.dtype)]


def _to_tensor(value, name, what):
    if isinstance(value, tf.Tensor):
        return value
    try:
        return tf.convert_to_tensor(value)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} (a pf.custom_vectorization function) {what} a "
            f"{type(value).__name__}, which is not a tensor: arguments and results must "
            "be tensors or nested structures (tuple, list, dict) of tensors.") from err


def custom_vectorization(fn):
    """Give ``fn`` its own vectorization rule, like JAX's ``custom_vmap``.

    Inside ``pf.pfor`` (and everything built on it) a call of ``fn`` runs the batched
    implementation set with ``@fn.def_vectorized``, called as
    ``batched(stacked, *args)``: ``stacked`` has one entry per argument (nested like
    it), ``True`` where the argument differs per iteration and carries a leading axis
    of the loop's size, ``False`` where it is the same in every iteration. It returns
    what ``fn`` returns, every tensor with the leading axis. Everywhere else (eagerly,
    in ``tf.function``, in ``tf.while_loop`` or ``tf.map_fn``) the original runs.
    Arguments and results are tensors or nested structures of them; gradients flow.

    >>> import numpy as np
    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> @pf.custom_vectorization
    ... def norm(x):
    ...     return tf.numpy_function(lambda a: np.linalg.norm(a), [x], tf.float32)
    >>> @norm.def_vectorized
    ... def norm_batched(stacked, x):
    ...     return tf.numpy_function(lambda a: np.linalg.norm(a, axis=-1), [x], tf.float32)
    >>> x = tf.constant([[3., 4.], [6., 8.]])
    >>> pf.pfor(lambda i: norm(tf.gather(x, i)), 2, fallback="error").numpy()
    array([ 5., 10.], dtype=float32)
    """
    return CustomVectorization(fn)
