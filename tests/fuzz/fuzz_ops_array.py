"""Grammar elements for array ops: gather, scatter, segment ops, one_hot, reshaping,
transposing, joining, slicing (also at per-iteration offsets), and random draws.

Indices are drawn in range (or reduced into it with ``floormod``), so every body is
valid; which inputs are per-iteration is drawn like any other input.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st

from fuzz_grammar import INTS, NUMERIC, Op
from fuzz_program import compile_text
from fuzz_ops_math import dt


def _index_like(b, fits=lambda v: True):
    """An existing exact int32 value (used modulo a size), or None."""
    return b.pick(lambda v: v.dtype == tf.int32 and v.exact and v.size <= 16 and fits(v))


def gather(b):
    x = b.operand(NUMERIC, min_rank=1)
    if x is None:
        return None
    axis = b.draw(st.integers(0, x.rank - 1))
    d = x.shape[axis]
    shown = axis - x.rank if b.draw(st.booleans()) else axis
    idx = _index_like(b, lambda v: v.rank <= 2) if b.draw(st.booleans()) else None
    if idx is not None:
        return b.emit("gather", f"tf.gather({{0}}, tf.math.floormod({{1}}, {d}), "
                      f"axis={shown})", [x, idx], exact=True)
    idx = b.fresh(tf.int32, b.shape(max_rank=2), low=0, high=d - 1)
    return b.emit("gather", f"tf.gather({{0}}, {{1}}, axis={shown})", [x, idx], exact=True)


def gather_batch(b):
    x = b.operand(NUMERIC, min_rank=2)
    if x is None:
        return None
    shape = (x.shape[0], b.draw(st.integers(1, 3)))
    idx = b.fresh(tf.int32, shape, low=0, high=x.shape[1] - 1)
    return b.emit("gather_batch", "tf.gather({0}, {1}, axis=1, batch_dims=1)", [x, idx],
                  exact=True)


def gather_nd(b):
    x = b.operand(NUMERIC, min_rank=1)
    if x is None:
        return None
    k = b.draw(st.integers(1, x.rank))
    idx = b.fresh(tf.int32, b.shape(max_rank=1) + (k,), low=0, high=min(x.shape[:k]) - 1)
    return b.emit("gather_nd", "tf.gather_nd({0}, {1})", [x, idx], exact=True)


def _unique_rows(b, d0, u):
    """Index data [..., u, 1] whose rows hold u distinct values in [0, d0)."""
    def make(shape):
        rows = int(np.prod(shape[:-2], dtype=np.int64))
        picks = [b.draw(st.permutations(range(d0)))[:u] for _ in range(rows)]
        return np.array(picks, np.int64).reshape(shape)
    return make


def scatter(feature, fn, *, unique=False, exact_kinds=NUMERIC):
    def make(b):
        x = b.operand(NUMERIC, min_rank=1)
        if x is None:
            return None
        d0 = x.shape[0]
        u = b.draw(st.integers(1, d0 if unique else 4))
        idx = b.fresh(tf.int32, (u, 1), low=0, high=d0 - 1,
                      make_data=_unique_rows(b, d0, u) if unique else None)
        shape = (u,) + x.shape[1:]
        upd = b.operand((x.dtype,), where=lambda v: v.shape == shape, fresh_shape=lambda: shape)
        if upd is None:
            return None
        return b.emit(feature, f"tf.tensor_scatter_nd_{fn}({{0}}, {{1}}, {{2}})", [x, idx, upd],
                      exact=x.dtype in exact_kinds)
    return Op(feature, make)


def scatter_nd(b):
    upd = b.operand(NUMERIC, min_rank=1)
    if upd is None:
        return None
    d0 = b.draw(st.integers(1, 4))
    idx = b.fresh(tf.int32, (upd.shape[0], 1), low=0, high=d0 - 1)
    shape = [d0] + list(upd.shape[1:])
    return b.emit("scatter_nd", f"tf.scatter_nd({{0}}, {{1}}, {shape})", [idx, upd],
                  exact=upd.dtype in INTS)


def unsorted_segment(feature, fn, exact_kinds=INTS):
    def make(b):
        x = b.operand(NUMERIC, min_rank=1)
        if x is None:
            return None
        d0, segments = x.shape[0], b.draw(st.integers(1, 4))
        ids = _index_like(b, lambda v: v.shape == (d0,)) if b.draw(st.booleans()) else None
        if ids is not None:
            text = (f"tf.math.unsorted_segment_{fn}({{0}}, tf.math.floormod({{1}}, "
                    f"{segments}), num_segments={segments})")
        else:  # -1 drops the element, as in the loop
            ids = b.fresh(tf.int32, (d0,), low=-1, high=segments - 1)
            text = f"tf.math.unsorted_segment_{fn}({{0}}, {{1}}, num_segments={segments})"
        return b.emit(feature, text, [x, ids], exact=x.dtype in exact_kinds)
    return Op(feature, make)


def segment(feature, fn, exact_kinds=INTS):
    """Sorted segment ids whose last id is the same in every row (a static shape)."""
    def make(b):
        x = b.operand(NUMERIC, min_rank=1)
        if x is None:
            return None
        d0 = x.shape[0]
        last = b.draw(st.integers(0, d0 - 1))

        def make_data(shape):
            rows = int(np.prod(shape[:-1], dtype=np.int64))
            out = [sorted(b.draw(st.lists(st.integers(0, last), min_size=d0 - 1,
                                          max_size=d0 - 1))) + [last] for _ in range(rows)]
            return np.array(out, np.int64).reshape(shape)

        ids = b.fresh(tf.int32, (d0,), make_data=make_data,
                      per_iteration=False if b.strict else None)
        # The output size is max(id) + 1: unknown while tracing; with stacked ids it may
        # differ between iterations (a ragged value, segments.py).
        return b.emit(feature if not ids.varying else "segment_stacked_ids",
                      f"tf.math.segment_{fn}({{0}}, {{1}})", [x, ids],
                      exact=x.dtype in exact_kinds, static=False)
    return Op(feature, make)


def one_hot(b):
    idx = b.operand(INTS, exact=True, max_rank=2, max_size=16)
    if idx is None:
        return None
    depth = b.draw(st.integers(1, 4))
    dtype = b.draw(st.sampled_from(NUMERIC))
    return b.emit("one_hot", f"tf.one_hot({{0}}, {depth}, dtype={dt(dtype)})", [idx], exact=True)


def bincount(b):
    x = b.operand(INTS, exact=True, rank=1)
    if x is None:
        return None
    d = b.draw(st.integers(1, 4))
    return b.emit("bincount", f"tf.math.bincount(tf.math.floormod({{0}}, {d}), minlength={d}, "
                  f"maxlength={d})", [x], exact=True, static=False)


INDEXING = [
    Op("gather", gather), Op("gather_batch", gather_batch), Op("gather_nd", gather_nd),
    scatter("scatter_add", "add", exact_kinds=INTS),
    scatter("scatter_update", "update", unique=True),
    scatter("scatter_max", "max"), scatter("scatter_min", "min"),
    Op("scatter_nd", scatter_nd),
    unsorted_segment("unsorted_segment_sum", "sum"),
    unsorted_segment("unsorted_segment_max", "max", NUMERIC),
    unsorted_segment("unsorted_segment_min", "min", NUMERIC),
    unsorted_segment("unsorted_segment_prod", "prod"),
    unsorted_segment("unsorted_segment_mean", "mean"),
    segment("segment_sum", "sum"), segment("segment_mean", "mean"),
    segment("segment_max", "max", NUMERIC), segment("segment_min", "min", NUMERIC),
    Op("one_hot", one_hot),
    Op("bincount", bincount),
]


# -- shapes ---------------------------------------------------------------------------
def _factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def reshape(b):
    a = b.operand(NUMERIC, min_dim=0)
    if a is None:
        return None
    rank = b.draw(st.integers(0 if a.size == 1 else 1, 4))
    if a.size == 0:
        shape = [b.draw(st.integers(0, 3)) for _ in range(rank)]
        shape[b.draw(st.integers(0, rank - 1))] = 0
    else:
        shape = [1] * rank
        for p in _factors(a.size):
            shape[b.draw(st.integers(0, rank - 1))] *= p
        if rank and b.draw(st.booleans()):
            shape[b.draw(st.integers(0, rank - 1))] = -1
    return b.emit("reshape", f"tf.reshape({{0}}, {shape})", [a], exact=True)


def reshape_like(b):
    a = b.operand(NUMERIC, min_dim=0)
    if a is None:
        return None
    other = b.pick(lambda v: v.size == a.size and v is not a)
    if other is None:
        return None
    return b.emit("reshape_like", "tf.reshape({0}, tf.shape({1}))", [a, other], exact=True)


def transpose(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0, dynamic=True)
    if a is None:
        return None
    perm = b.draw(st.permutations(range(a.rank)))
    return b.emit("transpose", f"tf.transpose({{0}}, perm={list(perm)})", [a], exact=True)


def concat(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0)
    if a is None:
        return None
    axis = b.draw(st.integers(0, a.rank - 1))

    def fits(v):
        return v.rank == a.rank and all(x == y for k, (x, y) in enumerate(zip(v.shape, a.shape))
                                        if k != axis)

    def shape():
        s = list(a.shape)
        s[axis] = b.draw(st.integers(0, 3))
        return tuple(s)

    other = b.operand((a.dtype,), min_dim=0, where=fits, fresh_shape=shape)
    if other is None:
        return None
    shown = axis - a.rank if b.draw(st.booleans()) else axis
    return b.emit("concat", f"tf.concat([{{0}}, {{1}}], axis={shown})", [a, other], exact=True)


def stack(b):
    a = b.operand(NUMERIC, min_dim=0, max_rank=3)
    if a is None:
        return None
    other = b.operand((a.dtype,), min_dim=0, where=lambda v: v.shape == a.shape,
                      fresh_shape=lambda: a.shape)
    if other is None:
        return None
    axis = b.draw(st.integers(-a.rank - 1, a.rank))
    return b.emit("stack", f"tf.stack([{{0}}, {{1}}], axis={axis})", [a, other], exact=True)


def unstack(b):
    a = b.operand(NUMERIC, min_rank=1)
    if a is None:
        return None
    axis = b.draw(st.integers(0, a.rank - 1))
    j = b.draw(st.integers(0, a.shape[axis] - 1))
    return b.emit("unstack", f"tf.unstack({{0}}, axis={axis})[{j}]", [a], exact=True)


def _slice_item(b, d):
    kind = b.draw(st.integers(0, 4))
    if kind == 0:
        return ":"
    if kind == 1 and d > 0:
        return str(b.draw(st.integers(-d, d - 1)))
    if kind == 2:
        return "tf.newaxis"
    start = b.draw(st.one_of(st.none(), st.integers(-d - 1, d)))
    stop = b.draw(st.one_of(st.none(), st.integers(-d - 1, d)))
    step = b.draw(st.sampled_from([None, 1, 2, -1, -2]))
    text = f"{'' if start is None else start}:{'' if stop is None else stop}"
    return text if step is None else f"{text}:{step}"


def strided_slice(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0)
    if a is None:
        return None
    count = b.draw(st.integers(1, a.rank))
    items = [_slice_item(b, d) for d in a.shape[:count]]
    if count < a.rank and b.draw(st.booleans()):
        items = ["..."] + [_slice_item(b, d) for d in a.shape[a.rank - count + 1:]]
    return b.emit("strided_slice", f"{{0}}[{', '.join(items)}]", [a], exact=True)


def slice_op(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0)
    if a is None:
        return None
    begin = [b.draw(st.integers(0, d)) for d in a.shape]
    size = [b.draw(st.sampled_from([-1, b.draw(st.integers(0, d - s))]))
            for d, s in zip(a.shape, begin)]
    return b.emit("slice", f"tf.slice({{0}}, {begin}, {size})", [a], exact=True)


def dynamic_slice(b):
    """A slice or an item at a per-iteration offset (e.g. the loop index)."""
    a = b.operand(NUMERIC, min_rank=1)
    if a is None:
        return None
    at = _index_like(b, lambda v: v.rank == 0)
    if at is None:
        return None
    d0 = a.shape[0]
    if b.draw(st.booleans()):
        return b.emit("index_dynamic", f"{{0}}[tf.math.floormod({{1}}, {d0})]", [a, at],
                      exact=True)
    s0 = b.draw(st.integers(1, d0))
    rest = [0] * (a.rank - 1)
    begin = f"tf.stack([tf.math.floormod({{1}}, {d0 - s0 + 1})" + "".join(
        f", {r}" for r in rest) + "])"
    return b.emit("slice_dynamic", f"tf.slice({{0}}, {begin}, {[s0] + [-1] * len(rest)})",
                  [a, at], exact=True)


def expand_squeeze(b):
    a = b.operand(NUMERIC, min_dim=0)
    if a is None:
        return None
    ones = [k for k, d in enumerate(a.shape) if d == 1]
    if ones and b.draw(st.booleans()):
        axes = b.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True))
        return b.emit("squeeze", f"tf.squeeze({{0}}, axis={sorted(axes)})", [a], exact=True)
    axis = b.draw(st.integers(-a.rank - 1, a.rank))
    return b.emit("expand_dims", f"tf.expand_dims({{0}}, {axis})", [a], exact=True)


def tile(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0, max_size=64)
    if a is None:
        return None
    multiples = [b.draw(st.integers(1, 2)) for _ in a.shape]
    return b.emit("tile", f"tf.tile({{0}}, {multiples})", [a], exact=True)


def pad(b):
    a = b.operand(NUMERIC, min_rank=1, max_rank=3)
    if a is None:
        return None
    mode = b.draw(st.sampled_from(["CONSTANT", "REFLECT", "SYMMETRIC"]))
    limit = {"CONSTANT": lambda d: 2, "REFLECT": lambda d: min(2, d - 1),
             "SYMMETRIC": lambda d: min(2, d)}[mode]
    pads = [[b.draw(st.integers(0, limit(d))), b.draw(st.integers(0, limit(d)))]
            for d in a.shape]
    extra = ", constant_values=1" if mode == "CONSTANT" and b.draw(st.booleans()) else ""
    return b.emit("pad", f"tf.pad({{0}}, {pads}, mode={mode!r}{extra})", [a], exact=True)


def reverse(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0, dynamic=True)
    if a is None:
        return None
    axes = b.draw(st.lists(st.integers(0, a.rank - 1), min_size=1, unique=True))
    return b.emit("reverse", f"tf.reverse({{0}}, axis={axes})", [a], exact=True)


def roll(b):
    a = b.operand(NUMERIC, min_rank=1, min_dim=0)
    if a is None:
        return None
    axis = b.draw(st.integers(0, a.rank - 1))
    shift = _index_like(b, lambda v: v.rank == 0) if b.draw(st.booleans()) else None
    if shift is None:
        return b.emit("roll", f"tf.roll({{0}}, shift={b.draw(st.integers(-3, 3))}, "
                      f"axis={axis})", [a], exact=True)
    # A per-iteration shift is a batched gather per rolled axis.
    return b.emit("roll", f"tf.roll({{0}}, shift={{1}}, axis={axis})", [a, shift], exact=True)


def split(b):
    a = b.operand(NUMERIC, min_rank=1)
    if a is None:
        return None
    axis = b.draw(st.integers(0, a.rank - 1))
    d = a.shape[axis]
    parts = [k for k in range(1, d + 1) if d % k == 0]
    if b.draw(st.booleans()):
        k = b.draw(st.sampled_from(parts))
        j = b.draw(st.integers(0, k - 1))
        return b.emit("split", f"tf.split({{0}}, {k}, axis={axis})[{j}]",
                      [a], exact=True)
    first = b.draw(st.integers(0, d))
    j = b.draw(st.integers(0, 1))
    return b.emit("split", f"tf.split({{0}}, [{first}, {d - first}], axis={axis})[{j}]", [a],
                  exact=True)


def broadcast_to(b):
    a = b.operand(NUMERIC, max_rank=3, min_dim=0, max_size=64)
    if a is None:
        return None
    shape = [b.draw(st.integers(1, 3)) if d == 1 else d for d in a.shape]
    if b.draw(st.booleans()):
        shape.insert(0, b.draw(st.integers(1, 3)))
    return b.emit("broadcast_to", f"tf.broadcast_to({{0}}, {shape})", [a], exact=True)


def fill(b):
    a = b.operand(NUMERIC, rank=0)
    if a is None:
        return None
    return b.emit("fill", f"tf.fill({list(b.shape(max_rank=2))}, {{0}})", [a], exact=True)


def zeros_like(b):
    a = b.operand(NUMERIC, min_dim=0, dynamic=True)
    if a is None:
        return None
    like = b.draw(st.sampled_from(["zeros_like", "ones_like"]))
    return b.emit("zeros_like", f"tf.{like}({{0}})", [a], exact=True)


def range_op(b):
    start = _index_like(b, lambda v: v.rank == 0)
    if start is None:
        return None
    d = b.draw(st.integers(0, 4))
    return b.emit("range_stacked", f"tf.range({{0}}, {{0}} + {d})", [start], exact=True,
                  converted=False, static=False)


SHAPES = [
    Op("reshape", reshape), Op("reshape_like", reshape_like), Op("transpose", transpose),
    Op("concat", concat), Op("stack", stack), Op("unstack", unstack),
    Op("strided_slice", strided_slice), Op("slice", slice_op),
    Op("index_dynamic", dynamic_slice), Op("expand_dims", expand_squeeze), Op("tile", tile),
    Op("pad", pad), Op("reverse", reverse), Op("roll", roll), Op("split", split),
    Op("broadcast_to", broadcast_to), Op("fill", fill), Op("zeros_like", zeros_like),
    Op("range_stacked", range_op, converted=False),  # declined: per-iteration lengths
]


# -- random ---------------------------------------------------------------------------
def random_same(b):
    """A stateful draw under ``randomness="same"``: one draw for all iterations."""
    dtype = b.draw(st.sampled_from(NUMERIC))
    shape = list(b.shape(max_rank=2))
    if dtype.is_integer:
        text = f"tf.random.uniform({shape}, minval=-5, maxval=5, dtype={dt(dtype)})"
    else:
        fn = b.draw(st.sampled_from(["uniform", "normal"]))
        text = f"tf.random.{fn}({shape}, dtype={dt(dtype)})"
    name = b.name()
    draw = compile_text(text, 0)

    def run(ctx, env):
        if ctx.reference and name in ctx.draws:
            return ctx.draws[name]
        return draw(ctx, env)

    out = b.emit("random_same", text, [], run=run, random=True, varying=False, exact=True,
                 name=name)
    b.hidden.append(out)
    return out


def stateless_random(b):
    """A stateless draw seeded per iteration: exactly the loop's numbers."""
    seed = _index_like(b, lambda v: v.rank == 0)
    if seed is None:
        return None
    dtype = b.draw(st.sampled_from(NUMERIC))
    shape = list(b.shape(max_rank=2))
    seed_text = f"tf.stack([{{0}}, {b.draw(st.integers(0, 9))}])"
    if dtype.is_integer:
        text = (f"tf.random.stateless_uniform({shape}, seed={seed_text}, minval=-5, maxval=5, "
                f"dtype={dt(dtype)})")
    else:
        fn = b.draw(st.sampled_from(["uniform", "normal", "truncated_normal"]))
        text = f"tf.random.stateless_{fn}({shape}, seed={seed_text}, dtype={dt(dtype)})"
    return b.emit("stateless_random", text, [seed], exact=dtype.is_integer)


RANDOM = [Op("random_same", random_same, where="top"),
          Op("stateless_random", stateless_random)]

ARRAY = INDEXING + SHAPES + RANDOM
