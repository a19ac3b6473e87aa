"""Argument checks: bad input gets an error that names the argument and the fix."""

from __future__ import annotations

import numbers

import numpy as np
import tensorflow as tf

from pfor_core import mapped
from pfor_core.options import Options

FALLBACK_MODES = ("loop", "warn", "error")
RANDOMNESS_MODES = ("different", "same", "error")
MAX_ITERS = 2**31 - 1  # iterations are counted in int32 (the loop index is int32)


def is_int(value) -> bool:
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)


def options(*, fallback, randomness, parallel_iterations, memory_budget=None,
            chunk_name="parallel_iterations", ragged_outputs=False) -> Options:
    if fallback not in FALLBACK_MODES:
        raise ValueError(f"fallback={fallback!r} is not one of {FALLBACK_MODES}: 'loop' runs "
                         "unconvertible ops in a loop silently, 'warn' also warns, 'error' raises.")
    if randomness not in RANDOMNESS_MODES:
        raise ValueError(f"randomness={randomness!r} is not one of {RANDOMNESS_MODES}.")
    if memory_budget is not None:
        if not is_int(memory_budget) or memory_budget < 1:
            raise ValueError(f"memory_budget={memory_budget!r} must be a positive number of "
                             "bytes (e.g. 2**30 for 1 GiB), or None.")
        if parallel_iterations not in (None, "auto"):
            raise ValueError(f"memory_budget chooses {chunk_name} itself: pass "
                             f"{chunk_name}='auto' or None with it, not {parallel_iterations!r}.")
        parallel_iterations, memory_budget = "auto", int(memory_budget)
    if parallel_iterations is not None and parallel_iterations != "auto":
        if not is_int(parallel_iterations):
            raise TypeError(f"{chunk_name} must be a positive Python int, 'auto' or None, got "
                            f"{type(parallel_iterations).__name__}.")
        if parallel_iterations < 1:
            raise ValueError(f"{chunk_name}={parallel_iterations} must be at least 1 "
                             "(or None for no chunking, 'auto' to fit memory_budget).")
        parallel_iterations = int(parallel_iterations)
    if not isinstance(ragged_outputs, bool):
        raise TypeError(f"ragged_outputs must be True or False, got {ragged_outputs!r}.")
    return Options(fallback=fallback, randomness=randomness,
                   parallel_iterations=parallel_iterations, memory_budget=memory_budget,
                   ragged_outputs=ragged_outputs)


def callable_arg(fn, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable (a function, functools.partial, callable "
                        f"object or tf.function), got {type(fn).__name__}.")


def loop_fn(fn) -> None:
    callable_arg(fn, "loop_fn")


def iters(value, *, eager: bool) -> int | None:
    """The static number of iterations, or None when known only at run time."""
    if is_int(value):
        if value < 0:
            raise ValueError(f"iters={value} must be >= 0.")
        if value > MAX_ITERS:
            raise ValueError(f"iters={value} is more than pfor supports: at most "
                             f"{MAX_ITERS} (2**31 - 1) iterations, the int32 range.")
        return int(value)
    if isinstance(value, (bool, float, str)) or value is None:
        raise TypeError(f"iters must be a Python int >= 0 or a scalar integer tensor, got "
                        f"{type(value).__name__} {value!r}.")
    if isinstance(value, np.ndarray) or isinstance(value, (tf.Tensor, tf.Variable)):
        tensor = tf.convert_to_tensor(value)
    else:
        raise TypeError(f"iters must be a Python int >= 0 or a scalar integer tensor, got "
                        f"{type(value).__name__}.")
    if not tensor.dtype.is_integer:
        raise TypeError(f"iters must be an integer tensor, got dtype {tensor.dtype.name}.")
    if tensor.shape.rank not in (None, 0):
        raise ValueError(f"iters must be a scalar, got a tensor of shape {tensor.shape}.")
    static = tf.get_static_value(tensor)
    if static is not None:
        return iters(int(static), eager=eager)
    if eager:  # pragma: no cover - eager tensors always have a value
        raise ValueError("iters has no value")
    return None


def iters_tensor(value) -> tf.Tensor:
    """A run-time ``iters`` as an int32 scalar, checked to be in ``[0, 2**31 - 1]`` when
    it runs (before the cast, which would wrap a larger int64 count)."""
    tensor = tf.reshape(tf.convert_to_tensor(value), [])
    # Plain Asserts: tf.debugging.assert_non_negative emits some 30 ops per call.
    checks = [tf.debugging.Assert(tensor >= 0, ["pfor: iters must be >= 0, got", tensor])]
    if tensor.dtype.max > MAX_ITERS:
        checks.append(tf.debugging.Assert(
            tensor <= tf.constant(MAX_ITERS, tensor.dtype),
            [f"pfor: iters is more than pfor supports: at most {MAX_ITERS} (2**31 - 1) "
             "iterations, the int32 range; got", tensor]))
    with tf.control_dependencies(checks):
        return tf.identity(tf.cast(tensor, tf.int32))  # a new op, which carries the checks


def elems(value, name="elems"):
    """Flat tensors of ``value`` (the argument ``name``) and their common leading size
    (checked at run time where it is not static)."""
    flat = mapped.flatten(value, name)
    return flat.tensors, mapped.leading_size(flat.tensors, flat.names,
                                             f"the tensors in {name}")


def signature(value) -> None:
    """Check ``fn_output_signature`` itself: dtypes and type specs, nested."""
    for leaf in tf.nest.flatten(value):
        if isinstance(leaf, tf.TypeSpec):
            continue
        try:
            tf.as_dtype(leaf)
        except TypeError as err:
            raise TypeError(f"fn_output_signature entries must be dtypes or tf.TypeSpecs "
                            f"(e.g. tf.TensorSpec), got {leaf!r}.") from err


def output_signature(out, signature) -> None:
    """Check what ``fn`` returned against ``fn_output_signature``: structure, dtypes and
    per-element shapes."""
    from tensorflow.python.util import nest

    def paths(value):
        return [p for p, _ in nest.flatten_with_joined_string_paths(value)]

    try:
        tf.nest.assert_same_structure(signature, out, check_types=False)
        same = paths(signature) == paths(out)  # also the keys of dicts
    except (ValueError, TypeError):
        same = False
    if not same:
        raise TypeError(f"fn returned a structure that does not match fn_output_signature: "
                        f"{tf.nest.map_structure(lambda _: '.', out)!r} against "
                        f"{tf.nest.map_structure(lambda _: '.', signature)!r}.")
    specs = tf.nest.flatten(signature)
    for (path, leaf), spec in zip(nest.flatten_with_joined_string_paths(out), specs):
        where = "output" + ("/" + path if path else "")
        if isinstance(spec, tf.RaggedTensorSpec) and not isinstance(leaf, tf.RaggedTensor):
            spec = tf.TensorSpec(spec.shape, spec.dtype)  # a dense value of varying shape
        if isinstance(spec, tf.TypeSpec) and not isinstance(spec, tf.TensorSpec):
            if not spec.is_compatible_with(leaf):
                raise TypeError(f"fn returned {leaf!r} at {where}, which does not match "
                                f"fn_output_signature's {spec}.")
            continue
        if isinstance(leaf, tf.__internal__.CompositeTensor) and not isinstance(
                leaf, tf.IndexedSlices):
            raise TypeError(f"fn returned a {type(leaf).__name__} at {where} but "
                            f"fn_output_signature says {spec}.")
        got = tf.convert_to_tensor(leaf)
        dtype = spec.dtype if isinstance(spec, tf.TensorSpec) else tf.as_dtype(spec)
        if got.dtype != dtype:
            raise TypeError(f"fn returned {got.dtype.name} at {where} but "
                            f"fn_output_signature says {dtype.name}.")
        if isinstance(spec, tf.TensorSpec) and not spec.shape.is_compatible_with(got.shape):
            raise ValueError(f"fn returned shape {got.shape} at {where} but "
                             f"fn_output_signature says {spec.shape} (the shape of one "
                             "element).")


def run_eagerly(fn):
    """Run a wrapped conversion eagerly, turning TensorFlow's shape errors at run time
    into a message about the loop body."""
    try:
        return fn()
    except tf.errors.InvalidArgumentError as err:
        raise_clear_error(err)
        raise


# Run-time messages of pfor's own checks that are about the loop body, each from its
# start to its end: raised as a ValueError of that text.
_BODY_MESSAGES = (
    ("pfor: loop_fn returned", "(pad to a fixed size)."),
    ("pfor: loop_fn returned", "(e.g. y.set_shape([None, None]))."),
    ("pfor: ", "make every iteration's value the same rank."),
    ("pfor: ", "and pfor keeps them ragged."),
)


def raise_clear_error(err) -> None:
    """Raise a ValueError about the loop body if ``err`` is a ragged-shape error."""
    text = str(err)
    if "have different leading sizes" in text and "pfor: " in text:
        start = text.index("pfor: ")
        end = text.find("\n", start)
        line = text[start:end if end >= 0 else len(text)].rstrip("]")
        raise ValueError(line.replace("] [", " ").replace("\\'", "'")) from err
    text = text.replace("\\'", "'")
    for begin, finish in _BODY_MESSAGES:
        end = text.find(finish)
        start = text.rfind(begin, 0, end)
        if end >= 0 and start >= 0:
            raise ValueError(text[start:end + len(finish)]) from err
