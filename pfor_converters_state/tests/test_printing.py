"""Print and assert under pfor: they run once on the stacked values, so a print shows
every iteration's value and an assert fires if any iteration's would."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import pfor_core as pf
from pfor_core import testing


def _stream(tmp_path, name="out.txt"):
    path = tmp_path / name
    return path, f"file://{path}"


def test_detached_print_shows_every_iteration(tmp_path):
    path, stream = _stream(tmp_path)
    values = tf.constant([101, 202, 303, 404, 505, 606], tf.int32)

    def body(i):
        tf.print("value", tf.gather(values, i), output_stream=stream)
        return i * 2

    testing.assert_same_results(pf.pfor(body, 6, fallback="error"),
                                testing.sequential(lambda i: i * 2, 6))
    text = path.read_text()
    assert text.startswith("value")
    for v in values.numpy():
        assert str(v) in text, text


def test_print_of_per_iteration_strings_matches_loop(tmp_path):
    path_p, stream_p = _stream(tmp_path, "pfor.txt")
    path_s, stream_s = _stream(tmp_path, "loop.txt")
    words = tf.constant(["alpha", "beta", "gamma", "delta"])

    def make_body(stream):
        def body(i):
            tf.print(tf.gather(words, i), output_stream=stream, end="|\n")
            return i
        return body

    pf.pfor(make_body(stream_p), 4, fallback="error")
    testing.sequential(make_body(stream_s), 4)
    assert path_p.read_text() == path_s.read_text() == "alpha|\nbeta|\ngamma|\ndelta|\n"


def test_invariant_print_runs_once(tmp_path):
    path, stream = _stream(tmp_path)

    def body(i):
        tf.print("hello", tf.constant(3), output_stream=stream)
        return i

    pf.pfor(body, 5, fallback="error")
    assert path.read_text() == "hello 3\n"


def test_print_with_no_iterations_prints_nothing(tmp_path):
    path, stream = _stream(tmp_path)
    pf.pfor(lambda i: _then(tf.print(i, output_stream=stream), i), 0, fallback="error")
    assert not path.exists() or path.read_text() == ""


def _then(_, value):
    return value


def test_formatted_string_returned_from_the_body_is_not_collapsed():
    """StringFormat feeding anything but a print is declined (no per-row format)."""
    values = tf.constant([1, 2, 3])
    with pytest.raises(pf.ConversionError, match="StringFormat"):
        pf.pfor(lambda i: tf.strings.format("{}", tf.gather(values, i)), 3, fallback="error")


def test_detached_assert_fires_if_one_iteration_fails():
    values = tf.constant([0, 0, 0, 0, 0, 0, 0, 5, 0, 0], tf.int32)

    def body(i):
        tf.debugging.assert_less(tf.gather(values, i), 3)
        return i

    with pytest.raises(tf.errors.InvalidArgumentError):
        pf.pfor(body, 10, fallback="error")
    # Iterations 0..6 alone pass; the sequential loop agrees on both.
    testing.assert_matches_loop(body, 7)
    with pytest.raises(tf.errors.InvalidArgumentError):
        testing.sequential(body, 10)


@given(data=st.data())
def test_assert_property(data):
    """pfor raises exactly when some iteration of the loop would."""
    n = data.draw(st.integers(0, 4))
    shape = data.draw(st.lists(st.integers(0, 3), max_size=2))
    stacked_x, stacked_y = testing.draw_stacked(data, 2)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = tf.constant(rng.integers(0, 4, size=([n] if stacked_x else []) + shape), tf.int32)
    y = tf.constant(rng.integers(2, 6, size=([n] if stacked_y else []) + shape), tf.int32)

    def body(i):
        tf.debugging.assert_less(tf.gather(x, i) if stacked_x else x,
                                 tf.gather(y, i) if stacked_y else y)
        return i

    try:
        testing.sequential(body, n)
        loop_failed = False
    except tf.errors.InvalidArgumentError:
        loop_failed = True
    try:
        pf.pfor(body, n, fallback="error")
        pfor_failed = False
    except tf.errors.InvalidArgumentError:
        pfor_failed = True
    assert pfor_failed == loop_failed


@given(st.integers(0, 4), st.booleans())
def test_print_v1_prints_once_and_passes_its_input_through(n, stacked_input):
    """tf.compat.v1.Print: the loop prints per iteration; pfor once, with every
    iteration's data; both pass the input through."""
    values = tf.constant(np.arange(1000, 1000 + 3 * n).reshape([n, 3]), tf.int32)
    shared = tf.constant([7, 8])

    def body(i):
        row = tf.gather(values, i)
        passed = row if stacked_input else shared
        return tf.compat.v1.Print(passed, [row, i], "v1 print: ", summarize=2) * 2

    testing.assert_matches_loop(body, n, graph=True)
    graph = tf.function(lambda: pf.pfor(body, max(n, 1), fallback="error")).get_concrete_function(
    ).graph
    (op,) = [o for o in graph.get_operations() if o.type == "Print"]
    assert op.get_attr("summarize") >= max(n, 1)  # no iteration elided


def test_print_v1_shows_every_iteration(capfd):
    values = tf.constant([101, 202, 303], tf.int32)
    out = pf.pfor(lambda i: tf.compat.v1.Print(i, [tf.gather(values, i)], "rows: "), 3,
                  fallback="error")
    testing.assert_same_results(out, testing.sequential(lambda i: i, 3))
    printed = capfd.readouterr().err
    assert printed.count("rows: ") == 1 and all(str(v) in printed for v in (101, 202, 303)), \
        printed
