"""Random ops: one draw for all iterations, shaped by the user's ``randomness`` option.

A stateful random op (``RandomUniform``, ``Multinomial``, ...) draws from its kernel's
own stream. With ``randomness="different"`` the converted op draws once with the
iteration axis prepended to its shape (``[n] + shape``): rows are independent draws, as
iterations of a sequential loop would be (not the same numbers: a sequential loop would
consume the stream in another order). Per-iteration parameters fold into the draw
(multinomial logits into the batch, gamma/poisson rates into the parameter shape).
``"same"`` draws the per-iteration shape once and returns it invariant (it has no meaning
for per-iteration parameters); across the chunks of ``parallel_iterations``, which each
run the converted body, the draw is the op's stateless twin seeded from one seed drawn
before the chunks (draws inside a while loop of the body, and generator state reads,
raise then); ``"error"`` raises ``ConversionError``. Seed attrs are kept.
Per-iteration shapes decline (the fallback loop draws them). Per-iteration integer
bounds (``RandomUniformInt``) draw a Philox key and counter per row from the op's own
stream, then each row's integers within its bounds (``philox``). ``RandomShuffle``
sorts each row by its own random keys (one permutation shared under ``"same"``).

Stateless random ops are deterministic functions of their seed, so an invariant seed
means the same draw in every iteration (the walk re-emits those). Two exceptions:
- the seed comes from state the body advances (``tf.random.Generator``: ``RngReadAndSkip``;
  Keras ``SeedGenerator``: a variable read that the body also assigns). A sequential loop
  would then draw anew per iteration, so these ops follow ``randomness`` like stateful
  ones. The walk shows us all-invariant stateless random ops (``dispatch_invariant``) so
  we can tell; ``RngReadAndSkip`` skips ``n`` times as far under ``"different"`` so later
  draws of the generator do not overlap ours.
- per-iteration (stacked) seeds, key or counter: each iteration's draw must be exactly
  the one it would make alone, but TensorFlow's kernels take one key/counter per op.
  For the Philox algorithm (what CPU and GPU kernels use) ``philox`` rebuilds the
  kernel's bit stream with integer ops batched over keys: exact and loop-free for
  uniform floats (float32/64), uniform integers (int32/64, bounds stacked or not) and
  full-range integers; ``StatelessRandomGetKeyCounter`` on stacked seeds likewise.
  ``normal`` builds normal and truncated normal draws (half, bfloat16, float32/64) on
  that stream, within a few ulps of the kernel (its libm ``logf``/``sincosf`` are not
  TensorFlow's ops; see ``normal`` for the tolerance: relative 2e-6 for float32, 1e-13
  for float64). Half-precision uniform floats decline: the fallback loop draws them
  exactly (``fallback="error"`` raises for them), as do gamma, poisson, binomial and
  parametrized truncated normal draws. ``multinomial`` rebuilds StatelessMultinomial
  (per-iteration logits or seeds) where the kernel runs its rows in one shard. The rebuilt stream is the CPU/GPU kernels';
  under XLA (``jit_compile``) TensorFlow's own Philox lowering may differ from it.
"""

from __future__ import annotations

import zlib

import tensorflow as tf

from pfor_core.extend import ConversionError, Decline, Invariant, Stacked, shapes

from pfor_converters_state import multinomial, normal, philox

# Stateful ops whose only random-shape input is input 0 and whose other inputs (if any)
# are scalar parameters that must be invariant.
_SHAPED = ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt")
# Stateful ops whose output shape is ``shape + param.shape`` (param is input 1).
_PARAMETRIZED = ("RandomGamma", "RandomPoisson", "RandomPoissonV2")
# Stateless ops: input 0 is the shape; the seed inputs follow (key, counter, alg or seed).
_STATELESS_V2 = ("StatelessRandomUniformV2", "StatelessRandomNormalV2",
                 "StatelessTruncatedNormalV2", "StatelessRandomUniformIntV2",
                 "StatelessRandomUniformFullIntV2")
_STATELESS_V1 = ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal",
                 "StatelessRandomUniformInt", "StatelessRandomUniformFullInt")
# Stateless ops with parameters broadcast to ``shape`` (no exact batched draw).
_STATELESS_PARAMETRIZED = ("StatelessRandomGammaV3", "StatelessRandomGammaV2",
                           "StatelessRandomPoisson", "StatelessRandomBinomial",
                           "StatelessParameterizedTruncatedNormal")
_SEED_INPUTS = {**{t: (1, 2, 3) for t in _STATELESS_V2}, **{t: (1,) for t in _STATELESS_V1},
                **{t: (1,) for t in _STATELESS_PARAMETRIZED}, "StatelessRandomGammaV3": (1, 2, 3),
                "StatelessMultinomial": (2,)}
# Stateful random ops that draw once for all iterations under randomness="same", also
# across chunks (``_same_draw``, ``_shared_permutation``).
_SHARED_DRAWS = frozenset(_SHAPED + _PARAMETRIZED + ("RandomUniformInt", "Multinomial",
                                                     "RandomShuffle"))
_PHILOX = (1, 3)  # RNG_ALG_PHILOX, RNG_ALG_AUTO_SELECT (Philox on CPU and GPU)
_WRITES = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")
# Normal draws rebuilt by ``normal`` (not the parametrized truncated normal), and types.
_NORMALS = {"StatelessRandomNormalV2": "normal", "StatelessRandomNormal": "normal",
            "StatelessTruncatedNormalV2": "truncated", "StatelessTruncatedNormal": "truncated"}
_NORMAL_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _mode(ctx, *, from_state: bool = False) -> str:
    """The randomness option; raises for ``"error"``, and for ``"same"`` in chunks where
    no one draw can be shared: a draw in a loop of the body, or one seeded from state
    the body advances (``from_state``: a generator, a Keras seed generator), which
    every chunk would advance anew."""
    mode = ctx.options.randomness
    if mode == "error":
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' draws random values and "
            "randomness='error' forbids random ops in the loop body; pass "
            "randomness='different' (independent draws per iteration) or 'same' "
            "(one draw shared by all iterations).")
    if mode == "same" and ctx.chunked and (ctx.in_body_loop or from_state):
        # The converted body runs once per chunk. A draw made once per iteration is
        # seeded from the chunks' shared seed (``_same_draw``); these have no one draw.
        where = ("draws random values inside a tf.while_loop of the body"
                 if ctx.in_body_loop else "draws from random state the body advances "
                 "(a tf.random.Generator or a Keras SeedGenerator)")
        raise ConversionError(
            f"pfor: {ctx.op_type} '{ctx.op.name}' {where}, and randomness='same' cannot "
            "share such draws across the chunks of parallel_iterations; drop "
            "parallel_iterations or use randomness='different'.")
    return mode


def _salted(ctx, seed):
    """The chunks' shared seed salted with the op's name, as int32: XLA's stateless
    random kernels take no int64 seed that is only known at run time."""
    return tf.cast(seed + tf.constant([0, zlib.crc32(ctx.op.name.encode())], tf.int64),
                   tf.int32)


def _same_draw(ctx, *tensors) -> Invariant:
    """The one draw all iterations share (``randomness="same"``). In chunks the body
    runs once per chunk, so the draw is the op's stateless twin, seeded from the seed
    drawn once before the chunks (salted per op): the same in every chunk."""
    seed = ctx.chunk_seed
    if seed is None:
        return Invariant(tensor=ctx.emit(*tensors)[0])
    seed = _salted(ctx, seed)
    kind = ctx.op_type
    if kind in _TWINS:
        out = _TWINS[kind](shape=tensors[0], seed=seed, dtype=ctx.attr("dtype"))
    elif kind == "RandomUniformInt":
        shape, lo, hi = tensors
        out = tf.raw_ops.StatelessRandomUniformInt(shape=shape, seed=seed, minval=lo, maxval=hi)
    elif kind == "Multinomial":
        logits, num = tensors[:2]
        out = tf.raw_ops.StatelessMultinomial(logits=logits, num_samples=num, seed=seed,
                                              output_dtype=ctx.attr("output_dtype"))
    else:  # RandomGamma, RandomPoisson(V2): output shape is shape + param.shape
        shape, param = tensors
        full = tf.concat([shape, tf.shape(param, out_type=shape.dtype)], 0)
        if kind == "RandomGamma":
            out = tf.raw_ops.StatelessRandomGammaV2(shape=full, seed=seed, alpha=param)
        else:
            out = tf.raw_ops.StatelessRandomPoisson(shape=full, seed=seed, lam=param,
                                                    dtype=ctx.attr("dtype"))
    out.set_shape(ctx.output_shapes[0])
    return Invariant(tensor=out)


# Stateful ops drawing ``shape`` values of ``dtype``, and their stateless twins.
_TWINS = {"RandomUniform": tf.raw_ops.StatelessRandomUniform,
          "RandomStandardNormal": tf.raw_ops.StatelessRandomNormal,
          "TruncatedNormal": tf.raw_ops.StatelessTruncatedNormal}


def _prefixed_shape(ctx, shape: tf.Tensor) -> tf.Tensor:
    """``[n] + shape`` in the shape's dtype."""
    n = ctx.n_dim
    return tf.concat([tf.reshape(tf.cast(n, shape.dtype), [1]), shape], 0)


def _draw_stacked(ctx, shape: tf.Tensor, *rest) -> Stacked:
    out = ctx.emit(_prefixed_shape(ctx, shape), *rest)[0]
    out.set_shape(ctx.stacked_shape(ctx.output_shapes[0]))
    return Stacked(tensor=out)


def check_randomness(ctx):
    """Tried first for every stateful random op, whatever its inputs: raises for
    ``randomness="error"`` (and ``"same"`` across chunks), then declines, so that the op
    goes to the converter for its input pattern or, without one, to the fallback loop."""
    return ctx.decline(f"randomness={_mode(ctx)!r} allows this draw")


def convert_shaped(ctx):
    """RandomUniform & co: shape invariant, scalar parameters invariant."""
    mode = _mode(ctx)
    tensors = [v.tensor for v in ctx.inputs]
    if mode == "same":
        return _same_draw(ctx, *tensors)
    return _draw_stacked(ctx, *tensors)


def convert_parametrized(ctx):
    """RandomGamma / RandomPoisson with an invariant parameter: one draw of
    ``[n] + shape`` (or one shared draw under ``"same"``)."""
    shape, param = ctx.inputs
    if _mode(ctx) == "same":
        return _same_draw(ctx, shape.tensor, param.tensor)
    return _draw_stacked(ctx, shape.tensor, param.tensor)


def convert_parametrized_stacked_param(ctx):
    """A stacked param ``[n] + p`` gives ``shape + [n] + p``, moved to
    ``[n] + shape + p``."""
    shape, param = ctx.inputs
    if _mode(ctx) == "same":
        raise Decline("randomness='same' with per-iteration parameters has no shared draw")
    s = shape.tensor.shape[0]
    p = param.shape.rank
    if s is None or p is None:
        raise Decline("shape length or parameter rank unknown")
    out = ctx.emit(shape.tensor, param.tensor)[0]
    perm = [s] + list(range(s)) + list(range(s + 1, s + 1 + p))
    return Stacked(tensor=tf.transpose(out, perm))


def _seeded(ctx, op, **kwargs):
    """A stateful draw seeded like the body op (its seed attrs kept)."""
    return op(seed=ctx.attr("seed"), seed2=ctx.attr("seed2"), **kwargs)


def convert_uniform_int_stacked_bounds(ctx):
    """RandomUniformInt with per-iteration minval/maxval: every row draws a Philox key
    and counter from the op's own stream (seed attrs kept), then its integers from that
    row's stream (``philox.uniform_int``, the kernel's ``lo + bits % range``) within its
    own bounds."""
    shape, low, high = ctx.inputs
    if _mode(ctx) == "same":
        raise Decline("randomness='same' with per-iteration bounds has no shared draw")
    dtype = ctx.attr("Tout")
    lo = low.tensor[:, None] if low.is_stacked else low.tensor
    hi = high.tensor[:, None] if high.is_stacked else high.tensor
    ok = tf.reduce_all(tf.less(lo, hi))
    lo = ctx.check(ok, "Need minval < maxval", tensor=lo)
    bits = _seeded(ctx, tf.raw_ops.RandomUniformInt, shape=tf.stack([ctx.n, 3]),
                   minval=tf.constant(tf.int64.min, tf.int64),
                   maxval=tf.constant(tf.int64.max, tf.int64))
    bits = tf.bitcast(bits, tf.uint64)
    size = tf.reduce_prod(tf.cast(shape.tensor, tf.int64))
    words = philox.words(bits[:, :1], bits[:, 1:], size * philox.words_per_element(dtype))
    return _reshaped(ctx, philox.uniform_int(words, dtype, lo, hi), shape.tensor)


def convert_shuffle(ctx):
    """RandomShuffle along the first per-iteration axis: under ``"different"`` each row
    sorts by its own random keys (an independent permutation per iteration, an invariant
    value tiled first); under ``"same"`` one permutation for all."""
    x = ctx.inputs[0]
    mode = _mode(ctx)
    if x.shape.rank == 0:  # a scalar shuffles to itself
        return x
    if x.shape.rank is None:
        raise Decline("the input's rank is unknown")
    if mode == "same":
        size = ctx.dims(x)[1] if x.is_stacked else shapes.dims(x.tensor)[0]
        perm = _shared_permutation(ctx, size)
        if not x.is_stacked:
            return Invariant(tensor=tf.gather(x.tensor, perm))
        return Stacked(tensor=tf.gather(x.tensor, perm, axis=1))
    rows = ctx.stack(x)
    d = ctx.dims(rows)
    keys = _seeded(ctx, tf.raw_ops.RandomUniform, shape=shapes.shape_tensor(d[:2]),
                   dtype=tf.float64)
    perm = tf.argsort(keys, axis=1, stable=True)
    return Stacked(tensor=tf.gather(rows, perm, axis=1, batch_dims=1))


def _shared_permutation(ctx, size):
    """One random permutation of ``size`` for all iterations; in chunks drawn from the
    chunks' shared seed (salted per op), as ``_same_draw`` does."""
    shape = tf.reshape(tf.cast(size, tf.int32), [1])
    seed = ctx.chunk_seed
    if seed is None:
        keys = _seeded(ctx, tf.raw_ops.RandomUniform, shape=shape, dtype=tf.float64)
    else:
        seed = _salted(ctx, seed)
        keys = tf.raw_ops.StatelessRandomUniform(shape=shape, seed=seed, dtype=tf.float64)
    return tf.argsort(keys, stable=True)


def convert_multinomial(ctx):
    """Multinomial(logits [B, C], num_samples) of invariant logits: ``n * num_samples``
    samples per row, split into iterations (one shared draw under ``"same"``)."""
    logits, num = ctx.inputs
    if _mode(ctx) == "same":
        return _same_draw(ctx, logits.tensor, num.tensor)
    return _multinomial_rows(ctx)


def convert_multinomial_stacked_logits(ctx):
    """Stacked logits fold n into the batch: one draw of ``[n*B, num_samples]``."""
    logits, num = ctx.inputs
    if _mode(ctx) == "same":
        raise Decline("randomness='same' with per-iteration logits has no shared draw")
    d = ctx.dims(logits)
    out = ctx.emit(shapes.reshape(logits.tensor, [d[0] * d[1], d[2]]), num.tensor)[0]
    return Stacked(tensor=shapes.reshape(out, [d[0], d[1], _static_or_tensor(num.tensor)]))


def _static_or_tensor(scalar):
    value = tf.get_static_value(scalar)
    return int(value) if value is not None else tf.cast(scalar, tf.int32)


def _multinomial_rows(ctx):
    """Invariant logits [B, C]: ``n * num_samples`` samples per row (further inputs, a
    seed, as they are), split into ``[n, B, num_samples]``."""
    logits, num, *rest = (v.tensor for v in ctx.inputs)
    n = ctx.n_dim
    out = ctx.emit(logits, num * tf.cast(n, num.dtype), *rest)[0]
    b = logits.shape[0] if logits.shape[0] is not None else tf.shape(logits)[0]
    rows = shapes.reshape(out, [b, n, _static_or_tensor(num)])
    return Stacked(tensor=tf.transpose(rows, [1, 0, 2]))


def convert_rng_read_and_skip(ctx):
    """tf.random.Generator's state read: under ``"different"`` skip n times as far; the
    stateless draws seeded from it then draw ``[n] + shape`` (see ``convert_stateless``)."""
    resource, alg, delta = ctx.inputs
    mode = _mode(ctx, from_state=True)
    skip = delta.tensor
    if mode == "different":
        skip = skip * tf.cast(ctx.n, skip.dtype)
    return Invariant(tensor=ctx.emit(resource.tensor, alg.tensor, skip)[0])


def convert_stateless(ctx):
    """Stateless random ops with invariant inputs: invariant and deterministic unless
    seeded from state the body advances (then they follow ``randomness``)."""
    tensors = [v.tensor for v in ctx.inputs]
    seeds = [ctx.op.inputs[k] for k in _SEED_INPUTS[ctx.op_type]]
    if not _seeded_from_state(ctx, seeds) or _mode(
            ctx, from_state=_seeded_from_state(ctx, seeds, chunked_same=True)) == "same":
        return Invariant(tensor=ctx.emit(*tensors)[0])
    return _draw_stacked(ctx, *tensors)


def convert_stateless_stacked(ctx):
    """Per-iteration seeds (or bounds): each iteration's own draw through ``philox``
    (bit-exact) or ``normal`` (within its tolerance), else decline."""
    seeds = _SEED_INPUTS[ctx.op_type]
    if not any(v.is_stacked for v in ctx.inputs):
        raise Decline("no per-iteration input")  # the invariant converter's case
    if not any(ctx.inputs[k].is_stacked for k in seeds) and _seeded_from_state(
            ctx, [ctx.op.inputs[k] for k in seeds]):
        raise Decline("per-iteration minval/maxval with a generator's seed")
    return _exact_draw(ctx)


def convert_stateless_multinomial(ctx):
    """StatelessMultinomial: like ``convert_stateless``, with no exact batched draw
    (per-iteration logits, num_samples or seed fall back to a loop)."""
    seeds = [ctx.op.inputs[2]]
    if not _seeded_from_state(ctx, seeds) or _mode(
            ctx, from_state=_seeded_from_state(ctx, seeds, chunked_same=True)) == "same":
        return Invariant(tensor=ctx.emit(*(v.tensor for v in ctx.inputs))[0])
    return _multinomial_rows(ctx)


def convert_stateless_multinomial_stacked(ctx):
    """StatelessMultinomial with per-iteration logits or seeds: each iteration's own
    draw, rebuilt from its Philox stream (``multinomial``; exact where the kernel runs
    one shard, else decline)."""
    logits, samples, seed = ctx.inputs
    if not (logits.is_stacked or seed.is_stacked):
        raise Decline("no per-iteration logits or seed")
    count = tf.get_static_value(samples.tensor)
    dims = (ctx.dims(logits)[1:] if logits.is_stacked else shapes.dims(logits.tensor))
    if count is None or logits.shape.rank != 2:
        raise Decline("num_samples must be known statically and logits of rank 2")
    batch, classes = dims
    if not isinstance(classes, int) or classes < 1 or not multinomial.one_shard(
            batch, classes, int(count)):
        return ctx.decline("the kernel may split these rows into shards, which draw from "
                           "elsewhere in the stream (falls back to a loop)")
    key, counter = philox.key_counter_from_seed(
        seed.tensor if seed.is_stacked else seed.tensor[None])
    rows = logits.tensor if logits.is_stacked else logits.tensor[None]
    out = multinomial.draw(key, counter, rows, int(count), ctx.attr("output_dtype"))
    out.set_shape(ctx.stacked_shape(ctx.output_shapes[0]))
    return Stacked(tensor=out)


def convert_get_key_counter(ctx):
    """Per-iteration seeds scrambled into keys and counters, exactly as the kernel does."""
    key, counter = philox.key_counter_from_seed(ctx.inputs[0].tensor)
    return [Stacked(tensor=key), Stacked(tensor=counter)]


def _exact_draw(ctx):
    """Each iteration's own Philox stream (key/counter, or scrambled seed, per row),
    turned into the op's distribution."""
    op_type, dtype = ctx.op_type, ctx.attr("dtype")
    if "FullInt" in op_type and dtype in (tf.int32, tf.int64, tf.uint32, tf.uint64):
        kind = "full_int"
    elif "UniformInt" in op_type and dtype in (tf.int32, tf.int64):
        kind = "uniform_int"
    elif "Uniform" in op_type and "Int" not in op_type and dtype in (tf.float32, tf.float64):
        kind = "uniform"
    elif op_type in _NORMALS and dtype in _NORMAL_DTYPES:
        kind = _NORMALS[op_type]
    else:
        return ctx.decline(f"per-iteration seeds: no bit-exact batched {op_type} of "
                           f"{dtype.name} (falls back to a loop)")
    if op_type.endswith("V2"):
        alg = tf.get_static_value(ctx.inputs[3].tensor)
        if ctx.inputs[3].is_stacked or alg is None or int(alg) not in _PHILOX:
            return ctx.decline("a per-iteration or non-Philox algorithm")
        key, counter = ctx.inputs[1].tensor, ctx.inputs[2].tensor
        if not ctx.inputs[1].is_stacked:
            key = key[None]
        if not ctx.inputs[2].is_stacked:
            counter = counter[None]
        bounds = ctx.inputs[4:]
    else:
        seed = ctx.inputs[1]
        key, counter = philox.key_counter_from_seed(
            seed.tensor if seed.is_stacked else seed.tensor[None])
        bounds = ctx.inputs[2:]
    shape = ctx.inputs[0].tensor
    size = tf.reduce_prod(tf.cast(shape, tf.int64))
    if kind in ("normal", "truncated"):
        draw = normal.normal if kind == "normal" else normal.truncated_normal
        return _reshaped(ctx, draw(key, counter, size, dtype), shape)
    words = philox.words(key, counter, size * philox.words_per_element(dtype))
    if kind == "full_int":
        flat = philox.full_int(words, dtype)
    elif kind == "uniform_int":
        lo, hi = (v.tensor[:, None] if v.is_stacked else v.tensor for v in bounds)
        flat = philox.uniform_int(words, dtype, lo, hi)
    else:
        flat = philox.uniform(words, dtype)
    return _reshaped(ctx, flat, shape)


def _reshaped(ctx, flat: tf.Tensor, shape: tf.Tensor) -> Stacked:
    """Rows of ``flat`` [n, size] as the stacked draw ``[n] + shape``."""
    n = ctx.n_dim
    out = tf.reshape(flat, tf.concat([tf.reshape(tf.cast(n, shape.dtype), [1]), shape], 0))
    out.set_shape(ctx.stacked_shape(ctx.output_shapes[0]))
    return Stacked(tensor=out)


def _seeded_from_state(ctx, tensors, *, chunked_same: bool = False) -> bool:
    """Whether the body computes these tensors from state it advances: a generator
    skip, a stateful random op, or a read of a variable the body also writes. With
    ``chunked_same``, whether that state differs between chunks under
    ``randomness="same"``: not a stateful random op, whose one draw every chunk shares
    (``_same_draw``)."""
    memo = ctx.scratch.setdefault(f"random_ops.seeded_from_state.{chunked_same}", {})
    stack, seen = [t.op for t in tensors], set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if id(op) in memo:
            if memo[id(op)]:
                return True
            continue
        if (op._is_stateful and _advances(op)  # pylint: disable=protected-access
                and not (chunked_same and op.type in _SHARED_DRAWS)):
            memo[id(op)] = True
            return True
        stack.extend(t.op for t in op.inputs)
    for key in seen:
        memo.setdefault(key, False)
    return False


def _advances(op) -> bool:
    if op.type == "Placeholder":
        return False
    if op.type == "ReadVariableOp":
        return any(c.type in _WRITES for c in op.inputs[0].consumers())
    return True


def register(registry):
    """Add this family's converters to the pack's registrar."""
    # A per-iteration shape (or integer bound) gives no one draw: the fallback loop
    # draws those.
    stateful = _SHAPED + _PARAMETRIZED + ("Multinomial", "RngReadAndSkip", "RandomShuffle")
    registry.add(stateful, check_randomness, priority=1, narrow=True)
    registry.add(_SHAPED, convert_shaped, inputs="U...")
    registry.add("RandomUniformInt", convert_uniform_int_stacked_bounds, inputs="USU")
    registry.add("RandomUniformInt", convert_uniform_int_stacked_bounds, inputs="UUS")
    registry.add("RandomUniformInt", convert_uniform_int_stacked_bounds, inputs="USS")
    registry.add("RandomShuffle", convert_shuffle, inputs="*")
    registry.add(_PARAMETRIZED, convert_parametrized, inputs="UU")
    registry.add(_PARAMETRIZED, convert_parametrized_stacked_param, inputs="US")
    registry.add("Multinomial", convert_multinomial, inputs="UU")
    registry.add("Multinomial", convert_multinomial_stacked_logits, inputs="SU")
    registry.add("RngReadAndSkip", convert_rng_read_and_skip, inputs="UUU")
    stateless = _STATELESS_V2 + _STATELESS_V1 + _STATELESS_PARAMETRIZED
    # The all-invariant one is registered last, so it goes first where both match.
    registry.add(stateless, convert_stateless_stacked, inputs="U*...")
    registry.add(stateless, convert_stateless, inputs="U...")
    registry.add("StatelessMultinomial", convert_stateless_multinomial_stacked, inputs="*U*")
    registry.add("StatelessMultinomial", convert_stateless_multinomial, inputs="UUU")
    registry.add("StatelessRandomGetKeyCounter", convert_get_key_counter, inputs="S")
    registry.dispatch_invariant(stateless + ("StatelessMultinomial",))
