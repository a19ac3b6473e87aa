"""Equivalence checks with what hypothesis draws: the mode pfor runs in, and (with
``check_inputs``) the loop length, the layout of every input and the values.

Hypothesis is imported only when these run: ``pfor_core.testing`` itself needs only
TensorFlow and numpy."""

from __future__ import annotations

from pfor_core.testing.loop import DRAWN_MODES, RUN_MODES, check_op


def check(data, fn, args, *, stacked, n: int, modes=DRAWN_MODES, **tolerance):
    """``check_op(fn, args, stacked=..., n=...)`` in a mode drawn from ``modes`` with
    ``data`` (hypothesis' ``st.data()``): eagerly, inside a ``tf.function`` with a
    run-time loop length, or with inputs of unknown dimensions. Runs with
    ``fallback="error"``: passing means nothing fell back. Returns pfor's result."""
    from hypothesis import strategies as st  # pylint: disable=import-outside-toplevel

    mode = data.draw(st.sampled_from(modes), label="mode")
    return check_op(fn, args, stacked=stacked, n=n, mode=mode, **tolerance)


def check_inputs(data, fn, shapes, dtypes, *, n=None, layouts=None, modes=DRAWN_MODES,
                 low: float = -3.0, high: float = 3.0, **tolerance):
    """Draw the loop length, each input's layout and values (``strategies.inputs``) and
    a mode, then ``check``: one line for a property test of an op over every layout.

    >>> import tensorflow as tf
    >>> from hypothesis import given, settings, strategies as st
    >>> from pfor_core import testing
    >>> @settings(max_examples=3, deadline=None)
    ... @given(st.data())
    ... def test_add(data):
    ...     testing.check_inputs(data, tf.add, [[2], [2]], "float32")
    >>> test_add()
    """
    from pfor_core.testing import strategies  # pylint: disable=import-outside-toplevel

    drawn = data.draw(strategies.inputs(shapes, dtypes, n=n, layouts_=layouts, low=low,
                                        high=high), label="inputs")
    return check(data, fn, list(drawn.values), stacked=drawn.stacked, n=drawn.n,
                 modes=modes, **tolerance)


def draw_modes(data, choices=RUN_MODES) -> tuple[str]:
    """One mode of ``choices`` drawn per example (the examples cover all of them), as
    ``assert_matches_loop(..., modes=...)`` takes it."""
    from hypothesis import strategies as st  # pylint: disable=import-outside-toplevel

    return (data.draw(st.sampled_from(choices), label="mode"),)


def case_modes(node, choices=RUN_MODES) -> tuple[str, ...]:
    """What ``draw_modes`` is to a drawn example, for a parametrized pytest case
    (``request.node``): one mode of ``choices``, taken in turn over the function's
    cases, so they cover the modes between them instead of each running all of them (a
    case that is not parametrized runs all ``choices``), as
    ``assert_matches_loop(..., modes=...)`` takes it.

    >>> import types
    >>> from pfor_core import testing
    >>> case = types.SimpleNamespace(originalname="test_x",
    ...                              callspec=types.SimpleNamespace(indices={"n": 0}))
    >>> [testing.case_modes(case)[0] != testing.case_modes(
    ...     types.SimpleNamespace(originalname="test_x",
    ...                           callspec=types.SimpleNamespace(indices={"n": k})))[0]
    ...  for k in (1, 2)]
    [True, True]
    """
    import zlib  # pylint: disable=import-outside-toplevel

    callspec = getattr(node, "callspec", None)
    if callspec is None:
        return tuple(choices)
    turn = zlib.crc32(node.originalname.encode()) + sum(callspec.indices.values())
    return (choices[turn % len(choices)],)


def lengths_strategy(n: int, max_len: int):
    """Hypothesis: ``n`` per-iteration lengths in 0..max_len (0 included), for
    ``testing.rows``."""
    from hypothesis import strategies as st  # pylint: disable=import-outside-toplevel

    return st.lists(st.integers(0, max_len), min_size=n, max_size=n)


def draw_rows(data, *, width: int = 5, inner=(3,), max_n: int = 4):
    """A loop length ``n``, per-iteration lengths (0 to ``width``) and padded float32
    values ``[n, width, *inner]`` in [-2, 2]: the arguments of ``rows(x, lengths, i)``
    for a body over values whose shape differs per iteration."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from hypothesis import strategies as st  # pylint: disable=import-outside-toplevel

    n = data.draw(st.integers(0, max_n), label="n")
    lengths = data.draw(lengths_strategy(n, width), label="lengths")
    shape = [n, width, *inner]
    size = int(np.prod(shape))
    values = data.draw(st.lists(st.floats(-2, 2, width=32), min_size=size, max_size=size),
                       label="values")
    return (n, tf.constant(lengths, tf.int32),
            tf.constant(np.asarray(values, np.float32).reshape(shape)))

