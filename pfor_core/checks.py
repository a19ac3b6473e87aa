"""Argument checks: bad input gets an error that names the argument and the fix."""

from __future__ import annotations

import numbers

import numpy as np
import tensorflow as tf

from pfor_core.walk import Options

FALLBACK_MODES = ("loop", "warn", "error")
RANDOMNESS_MODES = ("different", "same", "error")


def is_int(value) -> bool:
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)


def options(*, fallback, randomness, parallel_iterations, memory_budget=None,
            chunk_name="parallel_iterations") -> Options:
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
    return Options(fallback=fallback, randomness=randomness,
                   parallel_iterations=parallel_iterations, memory_budget=memory_budget)


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
    """A run-time ``iters`` as an int32 scalar, checked to be >= 0 when it runs."""
    tensor = tf.cast(tf.convert_to_tensor(value), tf.int32)
    tensor = tf.reshape(tensor, [])
    check = tf.debugging.assert_non_negative(tensor, message="pfor: iters must be >= 0")
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


def elems(value, name="elems"):
    """Flat tensors of ``value`` (the argument ``name``) and their common leading size."""
    flat = [tf.convert_to_tensor(e) for e in tf.nest.flatten(value)]
    if not flat:
        raise ValueError(f"{name} must hold at least one tensor to map over.")
    for k, e in enumerate(flat):
        if e.shape.rank == 0:
            raise ValueError(f"{name}[{k}] is a scalar; every tensor in {name} needs a "
                             "leading dimension to map over.")
    sizes = {e.shape[0] for e in flat if e.shape.rank is not None and e.shape[0] is not None}
    if len(sizes) > 1:
        raise ValueError(f"the tensors in {name} have different leading sizes "
                         f"{sorted(sizes)}; they must all have the same number of rows.")
    n = sizes.pop() if sizes else tf.shape(flat[0])[0]
    return flat, n


def output_signature(out, signature) -> None:
    specs = tf.nest.flatten(signature)
    leaves = tf.nest.flatten(out)
    if len(specs) != len(leaves):
        raise TypeError(f"fn returned {len(leaves)} tensors but fn_output_signature describes "
                        f"{len(specs)}.")
    for k, (leaf, spec) in enumerate(zip(leaves, specs)):
        dtype = spec.dtype if hasattr(spec, "dtype") else tf.as_dtype(spec)
        got = tf.convert_to_tensor(leaf).dtype
        if got != dtype:
            raise TypeError(f"fn returned {got.name} for output {k} but fn_output_signature "
                            f"says {dtype.name}.")


def run_eagerly(fn):
    """Run a wrapped conversion eagerly, turning TensorFlow's shape errors at run time
    into a message about the loop body."""
    try:
        return fn()
    except tf.errors.InvalidArgumentError as err:
        raise_clear_error(err)
        raise


def raise_clear_error(err) -> None:
    """Raise a ValueError about the loop body if ``err`` is a ragged-shape error."""
    text = str(err)
    if "pfor: loop_fn returned values of different shapes" in text:
        start = text.index("pfor: loop_fn returned")
        end = text.find("(pad to a fixed size).", start)
        end = len(text) if end < 0 else end + len("(pad to a fixed size).")
        raise ValueError(text[start:end].replace("\\'", "'")) from err
    if "TensorArray" in text and "shape" in text:
        raise ValueError(
            "loop_fn returned values of different shapes in different iterations; pfor "
            "stacks outputs, so every iteration must return the same shape (pad or "
            f"use a fixed size).\nTensorFlow said: {text.splitlines()[0]}") from err
