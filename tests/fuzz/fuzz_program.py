"""Loop bodies for the differential fuzzer: values, statements, blocks, programs.

A program is a loop body written as straight-line statements over values whose dtype
and per-iteration shape are known while it is drawn. A statement's right-hand side is
Python text (``tf.exp({0})``) that is both what runs and what a failure prints, so the
reproducer is the code itself. Nested bodies (the branches of ``tf.cond``, a while
loop's body, the body of a nested ``pf.pfor``) are blocks, printed as local ``def``s.

A program runs two ways: ``loop_fn`` (what pfor traces) and ``reference`` (the
sequential loop: each statement run eagerly for every iteration, in lock step so that a
collective sees every iteration's value; a nested ``pf.pfor`` becomes a nested loop; a
random draw made with ``randomness="same"`` is replaced by the one pfor made).

Exactness: a batched kernel may round differently from a one-row kernel (vectorized
and scalar code paths, summation order), so a value from a transcendental function, a
reduction or a contraction can differ in its last bits. A value is *exact* when it is
built from inputs by correctly rounded or integer ops only. Discontinuous ops (floor,
comparisons, argmax, predicates, indices, casts to int) take exact operands only, so a
last-bit difference never turns into a large one. Inputs are multiples of 1/8, so short
sums of them are exact too (but are still not marked exact).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Callable

import numpy as np
import tensorflow as tf
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pfor_core as pf

FLOATS = (tf.float32, tf.float64)
INTS = (tf.int32,)
NUMERIC = FLOATS + INTS
MAX_DIM = 4
MAX_ELEMENTS = 512  # per iteration, for any value
MAX_STMTS = 5  # statements drawn at the top level (blocks add their own)
MAX_DEPTH = 2  # nesting of control-flow constructs

# Grammar features whose bugs are being fixed on other branches: they stay in the
# grammar but are not drawn until the lead empties this set after merging the fixes.
# An entry is a feature (never drawn) or "mode:feature" (not drawn in that mode).
# Each comment is a one-line reproducer.
KNOWN_BROKEN = frozenset({
    # Converters reading graph-only attributes of an eager tensor (args helper):
    # x = tf.zeros([5, 2, 4, 4]); pf.pfor(lambda i: tf.nn.relu(tf.gather(x, i)), 5,
    #     fallback="error")  -> convert_activation raised AttributeError: Tensor.op is
    #     undefined when eager execution is enabled (unfolded.before_unfold; BiasAdd too)
    "eager:activation_of_input_row", "strict:activation_of_input_row",
    # Not yet assigned: a loop carrying a scalar that adds a reduction of itself returns
    # an empty float32 tensor (a silent wrong value; also int32 carries, any trip count):
    # pf.pfor(lambda i: tf.while_loop(lambda t, a: t < 2, lambda t, a: (t + 1,
    #     a + tf.reduce_sum(a)), (0, tf.cast(i, tf.float32)))[1], 3) -> [] (loop: [0, 4, 8])
    "while_stacked_scalar", "while_invariant_scalar", "while_tensor_array_scalar",
    "scan_scalar",
    # Empty batches with a fallback op whose output shape is not static (core-edges,
    # issue 17 item 7): x = tf.zeros([1, 1], tf.int32); pf.pfor(lambda i:
    #     tf.math.bincount(tf.gather(x, i), minlength=1, maxlength=1), 0) -> ValueError
    #     "different shapes in different iterations" (stacking an empty list of [?])
    "iters0:bincount", "iters0:range_stacked", "iters0:segment_stacked_ids",
    # XLA: the fallback loop around an op that needs a compile-time constant (controlflow,
    # issue 17 item 9): x = tf.zeros([1, 1], tf.int32); tf.function(lambda: pf.pfor(
    #     lambda i: tf.math.bincount(tf.gather(x, i), minlength=1, maxlength=1), 1),
    #     jit_compile=True)() -> "Input 1 to node while/DenseBincount ... must be a
    #     compile-time constant" (the body alone compiles)
    "xla:bincount",
    # Not yet assigned (nn pack): per-iteration images and filters of conv2d_transpose in
    # float64 become a grouped Conv2DBackpropInput, which CPU kernels do not support:
    # x = tf.ones([3, 2, 1, 2, 3], tf.float64); f = tf.ones([3, 2, 2, 1, 3], tf.float64)
    # pf.pfor(lambda i: tf.nn.conv2d_transpose(tf.gather(x, i), tf.gather(f, i),
    #     [2, 1, 2, 1], 1, "SAME"), 3) -> InvalidArgumentError "Gradients for grouped
    #     convolutions are not supported on CPU" (float32 works; so does the loop)
    "conv2d_transpose_stacked_float64",
})


def excluded_features(mode: str, include_broken: bool = False) -> frozenset:
    """The features a program for ``mode`` must not contain."""
    if include_broken:
        return frozenset()
    out = set()
    for entry in KNOWN_BROKEN:
        where, _, feature = entry.rpartition(":")
        if not where or where == mode:
            out.add(feature)
    return frozenset(out)


# -- helpers the statements call (printed in a reproducer that uses them) -------------
def spd(a):
    """A well-conditioned symmetric positive definite matrix from any square ``a``."""
    t = tf.tanh(a)
    m = a.shape[-1]
    return tf.matmul(t, t, transpose_b=True) + m * tf.eye(m, dtype=a.dtype)


def wellcond(a):
    """A well-conditioned (diagonally dominant) matrix from any square ``a``."""
    return tf.tanh(a) + (a.shape[-1] + 1) * tf.eye(a.shape[-1], dtype=a.dtype)


def grad(f, x):
    """d sum(f(x)) / dx, taken inside the loop body."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(f(x))
    return tape.gradient(y, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)


def accumulate(trips, body, init):
    """Run ``t, acc = body(t, acc)`` ``trips`` times from (0, init); every step's acc,
    stacked (a tf.TensorArray in a tf.while_loop)."""
    array = tf.TensorArray(init.dtype, size=trips, element_shape=init.shape)

    def step(t, acc, array):
        t1, acc = body(t, acc)
        return t1, acc, array.write(t, acc)

    return tf.while_loop(lambda t, acc, array: t < trips, step,
                         (tf.constant(0), init, array))[2].stack()


HELPERS = {
    "spd": (spd, "def spd(a):  # well-conditioned, symmetric positive definite\n"
                 "    t = tf.tanh(a); m = a.shape[-1]\n"
                 "    return tf.matmul(t, t, transpose_b=True) + m * tf.eye(m, dtype=a.dtype)"),
    "wellcond": (wellcond, "def wellcond(a):  # well-conditioned, diagonally dominant\n"
                           "    return tf.tanh(a) + (a.shape[-1] + 1) * tf.eye(a.shape[-1], "
                           "dtype=a.dtype)"),
    "grad": (grad, "def grad(f, x):  # d sum(f(x)) / dx\n"
                   "    with tf.GradientTape() as tape:\n"
                   "        tape.watch(x)\n"
                   "        y = tf.reduce_sum(f(x))\n"
                   "    return tape.gradient(y, x, unconnected_gradients="
                   "tf.UnconnectedGradients.ZERO)"),
    "accumulate": (accumulate, "def accumulate(trips, body, init):  # every step's acc\n"
                               "    array = tf.TensorArray(init.dtype, size=trips, "
                               "element_shape=init.shape)\n"
                               "    def step(t, acc, array):\n"
                               "        t1, acc = body(t, acc)\n"
                               "        return t1, acc, array.write(t, acc)\n"
                               "    return tf.while_loop(lambda t, acc, array: t < trips, "
                               "step, (tf.constant(0), init, array))[2].stack()"),
}

NAMESPACE = {"tf": tf, "pf": pf, "np": np, **{k: fn for k, (fn, _) in HELPERS.items()}}


# -- the program ----------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class Value:
    name: str
    dtype: tf.DType
    shape: tuple
    sample: tf.Tensor  # its value in iteration 0 (gives shapes while drawing)
    varying: bool = True  # may differ between iterations
    exact: bool = False  # see the module docstring
    n_shaped: bool = False  # its shape depends on the number of iterations (all_gather)
    finite: bool = True  # made from finite inputs (linear algebra raises on others)
    static: bool = True  # its shape is known when the body is traced (not data-dependent)
    origin: str = ""  # the feature of the statement that made it

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def describe(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"


@dataclasses.dataclass(eq=False)
class Input:
    name: str
    data: np.ndarray
    per_iteration: bool  # row i is gathered by the loop index; else captured as is


@dataclasses.dataclass(eq=False)
class Stmt:
    feature: str
    out: Value
    args: tuple
    text: str  # right-hand side; {0}, {1}, ... are the args' names
    run: Callable  # run(ctx, env, *arg tensors) -> tensor
    converted: bool = True  # every op it makes has a converter (fallback="error" holds)
    lockstep: Callable | None = None  # collectives: fn(every iteration's tensor) -> tensor
    random: bool = False  # a stateful draw; the reference uses the one pfor made
    blocks: tuple = ()  # nested bodies, printed before the statement


@dataclasses.dataclass(eq=False)
class Block:
    name: str
    params: tuple  # values bound on entry (loop index, loop variables)
    index: Value  # the innermost pfor loop's index
    rows: int  # iterations of the innermost pfor loop
    stmts: list = dataclasses.field(default_factory=list)
    outputs: list = dataclasses.field(default_factory=list)

    def walk(self):
        for stmt in self.stmts:
            yield stmt
            for block in stmt.blocks:
                yield from block.walk()


@dataclasses.dataclass
class Ctx:
    """How a program runs: under pfor (``reference=False``) or as the loop."""

    tensors: dict  # input name -> tensor
    reference: bool
    fallback: str = "loop"  # for nested pf.pfor
    draws: dict = dataclasses.field(default_factory=dict)  # random stmt -> pfor's draw


def run_block(block: Block, ctx: Ctx, env: dict, args) -> list:
    env = dict(env)
    env.update(zip(block.params, args))
    for stmt in block.stmts:
        env[stmt.out] = stmt.run(ctx, env, *[env[a] for a in stmt.args])
    return [env[v] for v in block.outputs]


def run_lockstep(block: Block, ctx: Ctx, env: dict, rows: int) -> list:
    """The block as a sequential loop over ``rows`` iterations (its first param is the
    index), statement by statement so collectives see all iterations; stacked outputs."""
    envs = []
    for j in range(rows):
        e = dict(env)
        e[block.params[0]] = tf.constant(j, tf.int32)
        envs.append(e)
    for stmt in block.stmts:
        if stmt.lockstep is not None:
            value = stmt.lockstep([e[stmt.args[0]] for e in envs])
            for e in envs:
                e[stmt.out] = value
        else:
            for e in envs:
                e[stmt.out] = stmt.run(ctx, e, *[e[a] for a in stmt.args])
    return [tf.stack([e[v] for e in envs]) for v in block.outputs]


@dataclasses.dataclass(eq=False)
class Program:
    n: int
    inputs: list
    body: Block
    visible: int  # body.outputs[:visible] is what loop_fn returns; the rest are draws
    captured: list  # values of the captured inputs
    extra_features: frozenset = frozenset()

    @property
    def randomness(self) -> str:
        return "same" if self.draws else "different"

    @property
    def draws(self) -> list:
        return [s for s in self.body.stmts if s.random]

    @property
    def features(self) -> frozenset:
        return frozenset(s.feature for s in self.body.walk()) | self.extra_features

    @property
    def live_features(self) -> frozenset:
        """Features of the statements the outputs need (what a failure can be about)."""
        live = live_statements(self.body)
        return frozenset(s.feature for s in self.body.walk() if id(s) in live)

    @property
    def strict(self) -> bool:
        """Every op of the body has a converter: fallback="error" must succeed."""
        return all(s.converted for s in self.body.walk())

    def tensors(self) -> dict:
        return {inp.name: tf.constant(inp.data) for inp in self.inputs}

    def _env(self, ctx):
        return {v: ctx.tensors[v.name] for v in self.captured}

    def loop_fn(self, ctx: Ctx):
        def loop_fn(i):
            return run_block(self.body, ctx, self._env(ctx), [i])
        return loop_fn

    def reference(self, ctx: Ctx) -> list:
        return run_lockstep(self.body, ctx, self._env(ctx), self.n)

    def __repr__(self) -> str:
        return render(self)

    def _repr_pretty_(self, printer, cycle):  # what hypothesis prints
        printer.text("\n" + render(self))


def live_statements(block, needed=None) -> set:
    """Ids of the statements of ``block`` (and nested blocks) that its outputs need;
    random draws always count. pfor converts only these, so a reproducer shows only
    these."""
    needed = set() if needed is None else needed
    needed.update(id(v) for v in block.outputs)
    live = set()
    for stmt in reversed(block.stmts):
        if id(stmt.out) in needed or stmt.random:
            live.add(id(stmt))
            needed.update(id(a) for a in stmt.args)
            for sub in stmt.blocks:
                live |= live_statements(sub, needed)
    return live


def _free_values(block):
    """Values a block's statements read (for finiteness of a construct's result)."""
    for stmt in block.walk():
        yield from stmt.args


# -- printing -------------------------------------------------------------------------
def render(program: Program, mode: str | None = None) -> str:
    lines = []
    texts = [s.text for s in program.body.walk()]
    for name, (_, text) in HELPERS.items():
        if any(f"{name}(" in t for t in texts):
            lines.extend(text.splitlines())
    lines.append(f"n = {program.n}")
    lines.append(f"fallback = {'error' if mode == 'strict' else 'loop'!r}")
    live = live_statements(program.body)
    body = _render_block(program.body, "loop_fn", 0, live, program.visible)
    code = "\n".join(body)
    for inp in program.inputs:
        if re.search(rf"\b{inp.name}\b", code):
            how = "row i is iteration i's" if inp.per_iteration else "captured"
            lines.append(f"{inp.name} = {_array_text(inp.data)}  # {how}")
    lines.extend(body)
    call = f"pf.pfor(loop_fn, n, fallback=fallback, randomness={program.randomness!r})"
    if mode is not None:
        lines.append(f"# mode {mode}: {call} vs the sequential loop "
                     "tf.stack([loop_fn(i) for i in range(n)])")
    if program.draws:
        lines.append("# the loop reuses pfor's draws of the random statements "
                     f"({', '.join(s.out.name for s in program.draws)})")
    return "\n".join(lines)


def _array_text(data: np.ndarray) -> str:
    dtype = f"np.{data.dtype.name}"
    if data.size == 0:
        return f"np.zeros({list(data.shape)}, {dtype})"
    body = np.array2string(data, separator=", ", threshold=10**6, max_line_width=10**6,
                           floatmode="unique")
    body = body.replace("nan", "np.nan").replace("inf", "np.inf")
    return f"np.array({body}, {dtype})"


def _render_block(block, name, depth, live, visible=None):
    pad = "    " * depth
    params = ", ".join(p.name for p in block.params)
    lines = [f"{pad}def {name}({params}):"]
    for stmt in block.stmts:
        if id(stmt) not in live:
            continue
        for sub in stmt.blocks:
            lines.extend(_render_block(sub, sub.name, depth + 1, live))
        rhs = stmt.text.format(*[a.name for a in stmt.args])
        note = f"  # {stmt.out.describe()}" + ("" if stmt.converted else ", no converter")
        lines.append(f"{pad}    {stmt.out.name} = {rhs}{note}")
    outs = block.outputs if visible is None else block.outputs[:visible]
    ret = ", ".join(v.name for v in outs)
    if visible is not None:
        ret = f"[{ret}]"
        if len(block.outputs) > visible:
            ret += "  # + draws " + ", ".join(v.name for v in block.outputs[visible:])
    lines.append(f"{pad}    return {ret}")
    return lines


# -- drawing --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Op:
    """One grammar element: ``make(builder)`` adds statements and returns the new value,
    or None when it does not apply to the values at hand."""

    feature: str
    make: Callable
    converted: bool = True  # every op it emits has a converter for every layout
    where: str = "any"  # "pfor": in a pfor body only (collectives); "top": top level only
    weight: int = 1  # how often it is drawn, relative to the others of its family
    family: str = ""  # a family is drawn first, then one of its elements


def compile_text(text: str, nargs: int) -> Callable:
    names = [f"a{k}" for k in range(nargs)]
    return eval(f"lambda ctx, env, {', '.join(names)}: {text.format(*names)}",  # noqa: S307
                dict(NAMESPACE))


class Builder:
    """Draws one program with hypothesis's ``draw``, statement by statement."""

    def __init__(self, draw, ops, *, n: int, mode: str, strict: bool, excluded: frozenset,
                 family_weights=None):
        self.draw = draw
        self.family_weights = family_weights or {}
        self.ops = [op for op in ops if op.feature not in excluded
                    and (op.converted or not strict) for _ in range(op.weight)]
        self.mode = mode
        self.strict = strict
        self.excluded = excluded
        self.inputs: list[Input] = []
        self.tensors: dict = {}
        self.extra_features: set = set()
        self._values = itertools.count()
        self._inputs = itertools.count()
        index = Value("i", tf.int32, (), tf.constant(0), varying=True, exact=True)
        self.block = Block("loop_fn", (index,), index, n)
        self.scope: list[Value] = [index]
        self.context: list[str] = []  # enclosing constructs, innermost last
        self.hidden: list[Value] = []  # random draws, returned after the outputs
        self.captured: list[Value] = []

    # -- what may be drawn here -----------------------------------------------------
    def allowed(self, feature: str) -> bool:
        return feature not in self.excluded

    @property
    def depth(self) -> int:
        return len(self.context)

    @property
    def at_pfor_level(self) -> bool:
        return not self.context or self.context[-1] == "nested_pfor"

    def usable_ops(self):
        ops = []
        for op in self.ops:
            if op.where == "pfor" and not self.at_pfor_level:
                continue
            if op.where == "top" and self.context:
                continue
            ops.append(op)
        return ops

    def step(self) -> Value | None:
        """Draw and add one grammar element (a family, then one of its elements);
        tries a few when some do not apply."""
        ops = self.usable_ops()
        families = [f for f in dict.fromkeys(op.family for op in ops)
                    for _ in range(self.family_weights.get(f, 1))]
        for _ in range(4):
            family = self.draw(st.sampled_from(families))
            op = self.draw(st.sampled_from([op for op in ops if op.family == family]))
            value = op.make(self)
            if value is not None:
                return value
        return None

    # -- operands -----------------------------------------------------------------------
    def name(self) -> str:
        return f"v{next(self._values)}"

    def pick(self, fits: Callable) -> Value | None:
        """An existing value for which ``fits(value)`` holds, most recent first."""
        candidates = [v for v in reversed(self.scope) if fits(v)]
        if not candidates:
            return None
        return candidates[self.draw(st.integers(0, len(candidates) - 1))]

    def operand(self, dtypes=NUMERIC, *, exact=False, rank=None, min_rank=0, max_rank=4,
                min_dim=1, max_size=MAX_ELEMENTS, where=None, fresh_shape=None,
                fresh=True, finite=False, dynamic=False) -> Value | None:
        """An existing value that fits, or a fresh input (``fresh_shape()`` draws its
        shape; by default any shape of a fitting rank). ``dynamic``: the op also takes
        values whose shape is unknown when the body is traced."""
        def fits(v):
            return (v.dtype in dtypes and (v.exact or not exact)
                    and min_rank <= v.rank <= max_rank and (rank is None or v.rank == rank)
                    and all(d >= min_dim for d in v.shape) and v.size <= max_size
                    and (v.finite or not finite) and (v.static or dynamic)
                    and (where is None or where(v)))
        reuse = self.draw(st.integers(0, 3)) < 3 or not fresh
        value = self.pick(fits) if reuse else None
        if value is not None or not fresh:
            return value
        dtype = self.draw(st.sampled_from(dtypes))
        if fresh_shape is not None:
            shape = fresh_shape()
        else:
            shape = self.shape(rank=rank, min_rank=min_rank, max_rank=min(max_rank, 3),
                               empty=min_dim == 0)
        value = self.fresh(dtype, shape, finite=finite)
        return value if fits(value) else None

    def shape(self, *, rank=None, min_rank=0, max_rank=3, max_dim=MAX_DIM, empty=False):
        r = rank if rank is not None else self.draw(st.integers(min_rank, max_rank))
        shape = [self.draw(st.integers(1, max_dim)) for _ in range(r)]
        # Rarely an empty dimension (drawn high so that shrinking drops it).
        if r and empty and self.allowed("empty_dim") and self.draw(st.integers(0, 15)) == 15:
            shape[self.draw(st.integers(0, r - 1))] = 0
        return tuple(shape)

    def fresh(self, dtype, shape, *, per_iteration=None, low=None, high=None,
              make_data=None, finite=False) -> Value:
        """A new input: captured as it is, or one row per iteration gathered by the
        innermost loop's index. Values are multiples of 1/8 in [-3, 3] (floats),
        integers in [low, high], or ``make_data(shape of the data)``."""
        shape = tuple(int(d) for d in shape)
        if per_iteration is None:
            per_iteration = self.draw(st.booleans())
        data_shape = ((self.block.rows,) if per_iteration else ()) + shape
        if make_data is not None:
            data = np.asarray(make_data(data_shape)).astype(dtype.as_numpy_dtype)
        else:
            data = self._data(dtype, data_shape, low, high, finite)
        k = next(self._inputs)
        name = f"xs{k}" if per_iteration else f"c{k}"
        self.inputs.append(Input(name, data, per_iteration))
        self.tensors[name] = tf.constant(data)
        if 0 in shape:
            self.extra_features.add("empty_dim")
        finite = bool(np.all(np.isfinite(data))) if dtype.is_floating else True
        if not per_iteration:
            value = Value(name, dtype, shape, self.tensors[name], varying=False, exact=True,
                          finite=finite)
            self.scope.append(value)
            self.captured.append(value)
            return value
        return self.emit("row", f"tf.gather({name}, {{0}})", [self.block.index],
                         exact=True, finite=finite,
                         run=lambda ctx, env, i: tf.gather(ctx.tensors[name], i))

    def _data(self, dtype, shape, low, high, finite):
        size = int(np.prod(shape, dtype=np.int64))
        np_dtype = dtype.as_numpy_dtype
        if dtype.is_floating:
            lo, hi, scale = -24, 24, 8.0
        else:
            lo, hi, scale = (-5 if low is None else low), (5 if high is None else high), 1
        if size <= 24:
            ints = self.draw(hnp.arrays(np.int64, shape, elements=st.integers(lo, hi),
                                        fill=st.nothing()))
        else:  # big inputs come from a seed, so examples stay small
            seed = self.draw(st.integers(0, 2**32 - 1))
            ints = np.random.default_rng(seed).integers(lo, hi + 1, size=shape)
        data = (ints / scale).astype(np_dtype) if dtype.is_floating else ints.astype(np_dtype)
        # Rarely non-finite values (drawn high so that shrinking drops them).
        if (dtype.is_floating and size and not finite and self.allowed("nonfinite")
                and self.draw(st.integers(0, 15)) == 15):
            flat = data.reshape(-1)
            flat[self.draw(st.integers(0, size - 1))] = self.draw(
                st.sampled_from([np.nan, np.inf, -np.inf]))
            self.extra_features.add("nonfinite")
        return data

    # -- statements ---------------------------------------------------------------------
    def emit(self, feature, text, args, *, exact=False, converted=True, run=None,
             lockstep=None, random=False, blocks=(), varying=None, n_shaped=False,
             name=None, finite=True, static=True) -> Value:
        """Add ``name = text(args)`` to the current block. ``exact``: the op keeps
        exact operands exact. ``run`` defaults to evaluating ``text``."""
        args = tuple(args)
        # fallback="error" must hold for a strict program; the grammar says which
        # statements have converters (for some layouts only: decided here).
        assume(converted or not self.strict)
        assume(self.allowed(feature))  # KNOWN_BROKEN, also for features chosen late
        if run is None:
            run = compile_text(text, len(args))
        if lockstep is not None:
            sample = lockstep([args[0].sample] * self.block.rows)
        else:
            env = {v: v.sample for v in self.scope + self.captured}
            try:
                sample = run(self._sample_ctx(), env, *[a.sample for a in args])
            except LookupError:  # e.g. grad() of an op without a gradient
                assume(False)
        sample = tf.convert_to_tensor(sample)
        out = Value(name or self.name(), sample.dtype, tuple(sample.shape), sample,
                    varying=any(a.varying for a in args) if varying is None else varying,
                    exact=exact and all(a.exact for a in args),
                    n_shaped=n_shaped or any(a.n_shaped for a in args),
                    finite=finite and all(a.finite for a in args)
                    and all(v.finite for blk in blocks for v in _free_values(blk)),
                    static=static and all(a.static for a in args)
                    and all(v.static for blk in blocks for v in blk.outputs),
                    origin=feature)
        assume(out.size <= MAX_ELEMENTS)
        stmt = Stmt(feature, out, args, text, run, converted=converted, lockstep=lockstep,
                    random=random, blocks=tuple(blocks))
        self.block.stmts.append(stmt)
        self.scope.append(out)
        return out

    def _sample_ctx(self):
        return Ctx(tensors=self.tensors, reference=True)

    # -- nested blocks ------------------------------------------------------------------
    def open_block(self, name, params, construct, *, index=None, rows=None):
        """Start a nested block; returns a token for ``close_block``."""
        saved = (self.block, self.scope, self.context)
        block = Block(name, tuple(params), index or self.block.index,
                      rows or self.block.rows)
        self.block = block
        self.scope = list(self.scope) + list(params)
        self.context = self.context + [construct]
        return saved, block

    def close_block(self, token, outputs):
        saved, block = token
        block.outputs = list(outputs)
        self.block, self.scope, self.context = saved
        return block

    def fill(self, count: int) -> Value | None:
        """Draw up to ``count`` statements into the current block; the last value."""
        last = None
        for _ in range(count):
            value = self.step()
            last = value if value is not None else last
        return last

    def finish(self) -> Program:
        """Return the last value, the other values nothing reads (so that little of
        the body is dead), and maybe one more."""
        last = self.block.stmts[-1].out if self.block.stmts else self.scope[-1]
        read = {id(a) for stmt in self.block.walk() for a in stmt.args}
        read.update(id(v) for stmt in self.block.walk() for blk in stmt.blocks
                    for v in blk.outputs)
        leaves = [s.out for s in self.block.stmts
                  if id(s.out) not in read and s.out is not last and not s.random]
        outs = [last] + leaves[-3:]
        if self.draw(st.booleans()):
            v = self.pick(lambda v: v not in outs)
            if v is not None:
                outs.append(v)
        self.block.outputs = outs + self.hidden
        return Program(n=self.block.rows, inputs=self.inputs, body=self.block,
                       visible=len(outs), captured=self.captured, extra_features=frozenset(self.extra_features))


def programs(ops, *, mode: str = "eager", strict: bool = False, include_broken=False,
             family_weights=None):
    """A hypothesis strategy of programs over the grammar ``ops`` for ``mode``;
    ``family_weights`` says how often each family is drawn (default 1)."""
    excluded = excluded_features(mode, include_broken)

    @st.composite
    def draw_program(draw):
        n = draw(st.integers(1, 5))
        b = Builder(draw, ops, n=n, mode=mode, strict=strict, excluded=excluded,
                    family_weights=family_weights)
        count = draw(st.integers(1, MAX_STMTS))
        for _ in range(count):
            b.step()
        assume(b.block.stmts)
        return b.finish()

    return draw_program()
