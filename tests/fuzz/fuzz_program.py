"""Loop bodies for the differential fuzzer: values, statements, blocks, programs, how
they run and how they print (fuzz_grammar draws them).

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
import re
from typing import Callable

import numpy as np
import tensorflow as tf

import pfor_core as pf

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


def free_values(block):
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


def compile_text(text: str, nargs: int) -> Callable:
    names = [f"a{k}" for k in range(nargs)]
    return eval(f"lambda ctx, env, {', '.join(names)}: {text.format(*names)}",  # noqa: S307
                dict(NAMESPACE))

