"""Bad input gets an error naming the argument; unconvertible ops are reported as the
Errors section of docs/api.rst promises (``pf.ConversionError``, ``pf.FallbackWarning``).

Tests of ops without a converter use an empty registry, so they do not depend on what
the installed packs cover.
"""

import os
import re
import warnings

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import plugins, testing
from pfor_core.errors import FALLBACK_PREFIX
from pfor_core.registry import Registry


def ident(i):
    return i


@pytest.mark.parametrize("iters, error, match", [
    (-1, ValueError, r"iters=-1 must be >= 0"),
    (np.int64(-3), ValueError, r"iters=-3"),
    (tf.constant(-2), ValueError, r"iters=-2"),
    (tf.constant([2, 3]), ValueError, r"iters must be a scalar.*shape \(2,\)"),
    (np.array([2, 3]), ValueError, r"iters must be a scalar"),
    (2.0, TypeError, r"iters must be .*int.*float"),
    (tf.constant(2.0), TypeError, r"iters must be an integer tensor.*float32"),
    (True, TypeError, r"iters must be .*int.*bool"),
    (None, TypeError, r"iters must be"),
    ("3", TypeError, r"iters must be"),
])
def test_bad_iters(iters, error, match):
    with pytest.raises(error, match=match):
        pf.pfor(ident, iters)


def test_negative_iters_at_run_time_is_named():
    f = tf.function(lambda n: pf.pfor(ident, n), autograph=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="pfor: iters must be >= 0"):
        f(tf.constant(-2))


@pytest.mark.parametrize("loop_fn", [3, None, "ident", [ident]])
def test_loop_fn_not_callable(loop_fn):
    with pytest.raises(TypeError, match=r"loop_fn must be callable.*got"):
        pf.pfor(loop_fn, 2)


@pytest.mark.parametrize("result, what", [
    ("abc", "str"), (object(), "object"), (ident, "function"),
    ((tf.constant(1), object()), "object at output/1"),
    ({"a": b"x"}, "bytes at output/a"),
])
def test_loop_fn_returning_non_tensors(result, what):
    """(None comes back as None, as from tf.vectorized_map: tests/test_edge_values.py.)"""
    with pytest.raises(TypeError, match=rf"loop_fn returned {what}.*tensor"):
        pf.pfor(lambda i: result, 2)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"fallback": "nope"}, ValueError, r"fallback='nope' is not one of"),
    ({"fallback": None}, ValueError, r"fallback=None"),
    ({"randomness": "nope"}, ValueError, r"randomness='nope' is not one of"),
    ({"parallel_iterations": 0}, ValueError, r"parallel_iterations=0 must be at least 1"),
    ({"parallel_iterations": -1}, ValueError, r"parallel_iterations=-1 must be at least 1"),
    ({"parallel_iterations": 1.5}, TypeError, r"parallel_iterations must be .*int.*float"),
    ({"parallel_iterations": True}, TypeError, r"parallel_iterations must be .*bool"),
])
def test_unknown_option_values(kwargs, error, match):
    with pytest.raises(error, match=match):
        pf.pfor(ident, 2, **kwargs)


def test_options_are_checked_by_every_entry_point():
    x = tf.zeros([2, 3])
    with pytest.raises(ValueError, match="fallback="):
        pf.vectorized_map(tf.reduce_sum, x, fallback="nope")
    with pytest.raises(ValueError, match="fallback="):
        pf.vmap(tf.reduce_sum, fallback="nope")
    with pytest.raises(ValueError, match="fallback="):
        pf.map_fn(tf.reduce_sum, x, fallback="nope")
    with pytest.raises(ValueError, match="randomness="):
        pf.explain(ident, 2, randomness="nope")
    with pytest.raises(ValueError, match="iters=-1"):
        pf.explain(ident, -1)
    with pytest.raises(TypeError, match="fn must be callable"):
        pf.vectorized_map(3, x)
    with pytest.raises(TypeError, match="fn must be callable"):
        pf.vmap(3)


def test_iterations_with_different_shapes():
    with pytest.raises(ValueError, match=r"loop_fn returned values of different shapes"):
        pf.pfor(lambda i: tf.range(i), 3, fallback="loop")


@pytest.mark.parametrize("elems, match", [
    ((tf.zeros([2]), tf.zeros([3])), r"elems have different leading sizes \[2, 3\]"),
    ({"a": tf.zeros([4, 1]), "b": tf.zeros([2])}, r"different leading sizes \[2, 4\]: "
     r"elems\['a'\] has 4, elems\['b'\] has 2"),
    (tf.constant(1.0), r"elems is a scalar"),
    ((tf.zeros([2]), tf.constant(3)), r"elems\[1\] is a scalar"),
    ((), r"elems must hold at least one tensor"),
])
def test_vectorized_map_bad_elems(elems, match):
    with pytest.raises(ValueError, match=match):
        pf.vectorized_map(lambda e: tf.nest.flatten(e)[0], elems)


def test_map_fn_bad_elems():
    with pytest.raises(ValueError, match=r"elems is a scalar"):
        pf.map_fn(lambda e: e, tf.constant(1.0))


def test_vmap_in_axes_mismatch():
    add = pf.vmap(lambda a, b: a + b, in_axes=(0, 0, 0))
    with pytest.raises(ValueError, match=r"in_axes=\(0, 0, 0\) does not match"):
        add(tf.zeros([2]), tf.zeros([2]))
    with pytest.raises(ValueError, match=r"different leading sizes \[2, 3\]: args\[0\] "
                                         r"\(axis 0\) has 2, args\[1\] \(axis 0\) has 3"):
        pf.vmap(lambda a, b: a + b)(tf.zeros([2]), tf.zeros([3]))
    with pytest.raises(ValueError, match=r"in_axes maps no argument"):
        pf.vmap(lambda a: a, in_axes=None)(tf.zeros([2]))


# -- ops without a converter ---------------------------------------------------------
@pytest.fixture
def no_converters(monkeypatch):
    """Run pfor with an empty registry: every op with a stacked input has no converter."""
    monkeypatch.setattr(plugins, "_DEFAULT", [Registry()])


def square_body(i):
    return tf.math.square(i, name="my_square")  # the op the messages must point at


SQUARE_LINE = square_body.__code__.co_firstlineno + 1


def test_conversion_error_names_op_layouts_source_and_remedies(no_converters):
    with pytest.raises(pf.ConversionError) as info:
        pf.pfor(square_body, 3, fallback="error")
    assert isinstance(info.value, ValueError)
    text = str(info.value)
    assert "Square 'my_square'" in text
    assert "#0 stacked int32" in text
    where = re.search(r"created at (.+):(\d+)\)", text)
    assert where, text
    assert os.path.samefile(where.group(1), __file__)
    assert int(where.group(2)) == SQUARE_LINE
    assert "pf.register_converter('Square')" in text
    assert "fallback='loop'" in text


def test_conversion_error_keeps_its_type_inside_an_autograph_tf_function(no_converters):
    """Autograph re-raises unknown exception types as StagingError; ours passes."""
    f = tf.function(lambda: pf.pfor(square_body, 3, fallback="error"))
    with pytest.raises(pf.ConversionError, match="Square 'my_square'"):
        f()


def test_conversion_error_names_invariant_inputs_too(no_converters):
    x = tf.constant([1.0, 2.0])

    def body(i):
        return tf.math.pow(tf.cast(i, tf.float32), x)

    with pytest.raises(ValueError, match=r"Cast") as info:
        pf.pfor(body, 3, fallback="error")
    assert "stacked int32" in str(info.value)
    pf.default_registry().add("Cast", lambda ctx: pf.Stacked(
        tensor=tf.cast(ctx.inputs[0].tensor, ctx.attr("DstT"))))
    with pytest.raises(pf.ConversionError, match=r"Pow .*#0 stacked float32\(\), "
                                                 r"#1 invariant float32\(2,\)"):
        pf.pfor(body, 3, fallback="error")


def test_declined_converter_reason_is_in_the_error(no_converters):
    pf.default_registry().add("Square", lambda ctx: ctx.decline("odd day"))
    with pytest.raises(pf.ConversionError, match=r"Converters declined: .*odd day"):
        pf.pfor(square_body, 3, fallback="error")


def three_fallbacks(i):
    a = tf.math.square(i)
    b = tf.math.square(a + 0 * a)  # a second Square, and an AddV2 and a Mul
    return tf.math.negative(b)


def fallback_warnings(caught):
    return [w for w in caught if issubclass(w.category, pf.FallbackWarning)]


def test_fallback_warn_once_per_op_type_per_conversion(no_converters):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = pf.pfor(three_fallbacks, 4, fallback="warn")
    testing.assert_allclose(out, testing.sequential(three_fallbacks, 4))
    found = fallback_warnings(caught)
    assert all(str(w.message).startswith(FALLBACK_PREFIX) for w in found)
    named = sorted(str(w.message)[len(FALLBACK_PREFIX):].split()[0] for w in found)
    assert named == ["AddV2", "Mul", "Neg", "Square"]
    assert all(os.path.basename(w.filename) == os.path.basename(__file__) for w in found)
    with warnings.catch_warnings(record=True) as caught:  # a new conversion warns again
        warnings.simplefilter("always")
        pf.pfor(three_fallbacks, 4)  # "warn" is the default
    assert len(fallback_warnings(caught)) == 4


def test_fallback_loop_is_silent(no_converters):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = pf.pfor(three_fallbacks, 4, fallback="loop")
    testing.assert_allclose(out, testing.sequential(three_fallbacks, 4))
    assert not fallback_warnings(caught)
    assert not [w for w in caught if FALLBACK_PREFIX in str(w.message)]


def test_fallback_warning_is_a_user_warning():
    assert issubclass(pf.FallbackWarning, UserWarning)
    assert issubclass(pf.ConversionError, ValueError)


def test_user_code_in_a_folder_named_like_a_pack_is_still_the_users(tmp_path):
    from pfor_core import messages, walk

    assert messages.is_library_file(walk.__file__)
    assert messages.is_library_file(tf.__file__)
    assert not messages.is_library_file(__file__)
    for pack in ("pfor_core", "pfor_converters_math", "pfor_controlflow"):
        assert not messages.is_library_file(str(tmp_path / pack / "tests" / "test_x.py"))


@pytest.mark.parametrize("call, error, match", [
    (lambda: pf.vmap(lambda a: a, in_axes=2)(tf.zeros([3])), ValueError,
     r"in_axes entry 2 is out of range for an argument of rank 1"),
    (lambda: pf.vmap(lambda a: a, out_axes=-3)(tf.zeros([3, 2])), ValueError,
     r"out_axes entry -3 is out of range .* rank 2"),
    (lambda: pf.jacobian(lambda v: v * 2, tf.constant([1, 2])), TypeError,
     r"x must be floating point to differentiate, got int32: cast it"),
    (lambda: pf.per_example_gradients(lambda r: tf.reduce_sum(r), [tf.Variable([1, 2])],
                                      tf.ones([3, 2])), TypeError,
     r"variables must be floating point"),
    (lambda: pf.hessian(lambda v: None, tf.ones([2])), TypeError,
     r"f must return a tensor or a nested structure of tensors, got NoneType"),
    (lambda: pf.batch_jacobian(lambda v: tf.reduce_sum(v)[None], tf.ones([3, 2])), ValueError,
     r"batch_jacobian: the output has 1 rows but the input has 3"),
    (lambda: pf.per_example_gradients(lambda a, b: tf.reduce_sum(a) * b, [tf.Variable(1.0)],
                                      tf.ones([3, 2]), tf.ones([4])), ValueError,
     r"the tensors in batch have different leading sizes \[3, 4\]"),
])
def test_bad_arguments_of_vmap_and_derivatives(call, error, match):
    with pytest.raises(error, match=match):
        call()
