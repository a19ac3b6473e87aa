"""The converter API (pfor_core.extend): declining by return or raise, views handed
materialized to converters that do not declare they take them, the context's helpers."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import pfor_core as pf
from pfor_core import extend, testing

X = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))


def _body(i):
    return tf.cos(tf.sinh(tf.gather(X, i) / 10.0))


@pytest.fixture
def registered():
    """Register in-process converters for the test; removed afterwards."""
    added = []

    def add(op_type, fn, **kwargs):
        pf.default_registry().add(op_type, fn, priority=100, **kwargs)
        added.append((op_type, fn))

    yield add
    for op_type, fn in added:
        pf.default_registry().remove(op_type, fn)


@pytest.mark.parametrize("how", ["return", "raise"])
def test_a_converter_declines_by_returning_or_raising_decline(registered, how):
    def decline_today(ctx):
        decline = ctx.decline("not today")
        assert isinstance(decline, extend.Decline) and decline.reason == "not today"
        if how == "raise":
            raise decline
        return decline

    # No first-party pack converts FakeQuantWithMinMaxArgs: the reason reaches the error.
    registered("FakeQuantWithMinMaxArgs", decline_today)
    fake_quant = lambda i: tf.quantization.fake_quant_with_min_max_args(  # noqa: E731
        tf.gather(X, i))
    with pytest.raises(pf.ConversionError, match="not today"):
        pf.pfor(fake_quant, 4, fallback="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # declining is no converter fault
        testing.assert_matches_loop(fake_quant, 4, fallback="loop")
    # The next candidate (the math pack's converter) takes an op that one declines.
    registered("Sinh", decline_today)
    testing.assert_matches_loop(_body, 4)


class Reversed(extend.View):
    """Rows stored in reverse order: a view only its own converters know."""

    __slots__ = ()

    def materialize(self):
        return extend.Stacked(tensor=tf.reverse(self.tensor, [0]))


def test_views_are_materialized_unless_the_converter_takes_them(registered):
    seen = []

    def make_view(ctx):
        return [Reversed(tensor=tf.reverse(t.tensor, [0])) for t in ctx.emit_stacked(
            ctx.inputs[0].tensor)]

    def plain(ctx):
        seen.append(("plain", type(ctx.inputs[0]).__name__))
        return ctx.emit_stacked(ctx.inputs[0].tensor)

    registered("Sinh", make_view)
    registered("Cos", plain)
    testing.assert_matches_loop(_body, 4)
    assert seen[-1] == ("plain", "Stacked")

    def knows_views(ctx):
        seen.append(("knows", type(ctx.inputs[0]).__name__))
        return extend.Decline("only looking")

    registered("Cos", knows_views, views=True)
    testing.assert_matches_loop(_body, 4)
    assert ("knows", "Reversed") in seen and seen[-1] == ("plain", "Stacked")


def test_a_view_without_a_stacked_form_declines_for_the_converter(registered):
    class Opaque(extend.View):
        __slots__ = ()

        def materialize(self):
            return extend.Decline("an opaque view has no stacked form")

    registered("Sinh", lambda ctx: [Opaque(tensor=t.tensor)
                                    for t in ctx.emit_stacked(ctx.inputs[0].tensor)])
    with pytest.raises(pf.ConversionError, match="opaque view has no stacked form"):
        pf.pfor(_body, 4, fallback="error")


def test_n_dim_stacked_shape_and_stack(registered):
    found = []

    def convert_sinh(ctx):
        found.append((ctx.n_dim, ctx.n_static, ctx.stacked_shape([3])))
        tiled = ctx.stack(tf.constant([1.0, 2.0, 3.0]))  # a plain tensor is invariant
        assert tiled.shape.as_list() == [ctx.n_static, 3]
        return ctx.emit_stacked(ctx.inputs[0].tensor)

    registered("Sinh", convert_sinh)
    testing.assert_matches_loop(_body, 4, graph=True)
    static, dynamic = found[0], found[-1]
    assert static[0] == 4 and static[2].as_list() == [4, 3]
    assert isinstance(dynamic[0], tf.Tensor) and dynamic[1] is None
    assert dynamic[2].as_list() == [None, 3]
