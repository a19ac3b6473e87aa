"""``pf.dag_map``: a cell per node of a tree or DAG, one vectorized call per level.

A node's level is 0 without children, else 1 + its children's highest level; every
level is one ``pfor`` over its nodes, so the sequential steps are the depth.
"""

import functools

import tensorflow as tf

from pfor_core import api, custom, unrolled
from pfor_core.layout import Invariant, Stacked, broadcast_invariant
from pfor_core.ragged import Ragged

_TRACES = 4  # fixed-point traces that find the state's structure from the cell itself


def dag_map(cell, inputs, children, *, fallback="warn", state_signature=None):
    """Every node's state of ``cell`` run children before parents (docs/api.rst).

    ``state_signature`` (a ``tf.TensorSpec`` of one node's state, or a structure of
    them) is needed only where tracing ``cell`` cannot find the state.

    >>> import tensorflow as tf
    >>> import pfor_core as pf
    >>> kids = tf.constant([[-1, -1], [-1, -1], [0, 1]])  # node 2 has children 0 and 1
    >>> x = tf.constant([[1.], [2.], [3.]])
    >>> def cell(x, child_states, child_mask):
    ...     return x + tf.reduce_sum(child_states, 0)
    >>> pf.dag_map(cell, x, kids, fallback="error").numpy().ravel().tolist()
    [1.0, 2.0, 6.0]
    """
    if not callable(cell):
        raise TypeError(f"pf.dag_map: `cell` must be callable, got {type(cell).__name__}; "
                        "pass a function cell(x, child_states, child_mask) for one node")
    flat = [tf.convert_to_tensor(t) for t in tf.nest.flatten(inputs)]
    if not flat:
        raise ValueError("pf.dag_map: `inputs` holds no tensor; pass each node's input as "
                         "a tensor [n_nodes, ...] (a structure of them)")
    children = _children(children)
    for t in flat:
        _static_rows(t, children)
    structure = inputs
    spec = _state_spec(cell, tf.nest.pack_sequence_as(structure, flat), children.shape[1],
                       state_signature)
    # A call with its own rule inside pfor: the batch's graphs as one (see _batched).
    rule = custom.CustomVectorization(
        functools.partial(_one_graph, cell, spec, fallback, structure), name="dag_map")
    rule.layout_rule = functools.partial(_batched, cell, spec, fallback, structure)
    rule.layout_rule_text = ("pf.dag_map: a level loop over the iterations' graphs as one, "
                             "one pfor of the cell per level")
    rule.gradient_rule = functools.partial(_gradient, cell, spec, fallback, structure)
    return rule(tuple(flat), children)


def _one_graph(cell, spec, fallback, structure, flat, children):
    n = tf.shape(children)[0]
    checks = [tf.debugging.assert_equal(
        tf.shape(t)[0], n, message="pf.dag_map: `inputs` and `children` must have one row "
        "per node each") for t in flat]
    with tf.control_dependencies(checks + _valid(children, n)):
        children = tf.identity(children)
    states = _run(cell, spec, fallback, tf.nest.pack_sequence_as(structure, list(flat)),
                  children)
    return tf.nest.map_structure(lambda t: t[:n], states)


def _run(cell, spec, fallback, inputs, children, *, locate=None, scatter=False):
    """Every node's state, one pfor of ``cell`` per level: the nodes not yet done whose
    children are; each state with a row of zeros below (row n, what an absent child
    reads). A step with nodes left but none ready means a cycle; ``locate(node)``
    names the node in that error (a batch union's iteration and node). ``scatter``
    writes the level's states in place; else a select (the same copy), which converts
    op by op inside pfor."""
    n = tf.shape(children)[0]
    has = children >= 0
    # Row n of every state buffer stays zero: an absent child reads it.
    kids_or_zero = tf.where(has, children, n)

    # Under XLA (static shapes) every node runs in every level and the level's are kept.
    level = _masked_level if unrolled.compiled() else _run_level
    run_level = functools.partial(level, cell, spec, fallback, inputs, has, kids_or_zero,
                                  scatter)

    ready = functools.partial(_ready, children)

    def body(done, at, states):
        states = run_level(at, states)
        done = done | at
        return done, ready(done), states

    states = tf.nest.map_structure(
        lambda s: tf.zeros(tf.concat([[n + 1], s.shape], 0), s.dtype), spec)
    done = tf.zeros([n], tf.bool)
    flags = tf.TensorShape([None])  # a statically empty graph's too
    done, _, states = tf.while_loop(
        lambda done, at, _: tf.reduce_any(at), body, (done, ready(done), states),
        shape_invariants=(flags, flags, tf.nest.map_structure(
            lambda t: flags.concatenate(t.shape[1:]), states)))
    # Nodes left that never got ready: a cycle.
    left = tf.logical_not(done)
    node = tf.argmax(tf.cast(tf.concat([left, [False]], 0), tf.int32), output_type=tf.int32)
    where = ["pf.dag_map: node", node] if locate is None else locate(node)
    with tf.control_dependencies([_require(tf.logical_not(tf.reduce_any(left)), where + [
            "is on a cycle of `children` or its children lead into one; a node must not "
            "be its own descendant"])]):
        return tf.nest.map_structure(tf.identity, states)


def _run_level(cell, spec, fallback, inputs, has, kids_or_zero, scatter, at, states):
    """One level: a pfor of ``cell`` over the nodes ``at``, their states written."""
    ids = tf.cast(tf.reshape(tf.where(at), [-1]), tf.int32)
    # The level's rows gathered here: inside the pfor, a row by the loop index is a
    # slice (no per-op index arithmetic in every level).
    kid_rows = tf.gather(kids_or_zero, ids)
    rows = (tf.nest.map_structure(lambda t: tf.gather(t, ids), inputs),
            tf.nest.map_structure(lambda s: tf.gather(s, kid_rows), states),
            tf.gather(has, ids))

    def one(i):
        return _checked(cell(*tf.nest.map_structure(lambda t: tf.gather(t, i), rows)), spec)
    out = api.pfor(one, tf.size(ids), fallback=fallback)
    if scatter:
        return tf.nest.map_structure(
            lambda s, o: tf.tensor_scatter_nd_update(s, ids[:, None], o), states, out)
    at = tf.concat([at, [False]], 0)
    slot = tf.maximum(tf.cumsum(tf.cast(at, tf.int32)) - 1, 0)

    def update(s, o):
        keep = tf.reshape(at, [-1] + [1] * (s.shape.rank - 1))
        return tf.where(keep, tf.gather(o, slot), s)
    return tf.nest.map_structure(update, states, out)


def _masked_level(cell, spec, fallback, inputs, has, kids_or_zero, scatter, at, states):
    """One level under XLA: a pfor of ``cell`` over all nodes, kept for those ``at``."""
    del scatter
    rows = (inputs, tf.nest.map_structure(lambda s: tf.gather(s, kids_or_zero), states), has)
    n = kids_or_zero.shape[0] if kids_or_zero.shape[0] is not None else tf.shape(has)[0]
    out = api.pfor(lambda i: _checked(cell(*tf.nest.map_structure(
        lambda t: tf.gather(t, i), rows)), spec), n, fallback=fallback)
    keep = tf.concat([at, [False]], 0)
    return tf.nest.map_structure(lambda s, o: tf.where(
        tf.reshape(keep, [-1] + [1] * (s.shape.rank - 1)), _zero_row(o), s), states, out)


def _batched(cell, spec, fallback, structure, layouts, conversion):
    """dag_map inside pfor: the iterations' graphs as one disjoint union, so each level
    is one pfor of ``cell`` over that level's nodes of every graph. Layouts of the
    call's arguments (flat inputs, then children) to the states' layouts, or None
    where this does not apply (the call is then converted op by op)."""
    *xs, kids = layouts
    b = conversion.n
    union = None if unrolled.compiled() else _union(xs, kids, b)  # (XLA: no union)
    if union is None:
        return None
    counts, ragged, width, padded, kids, valid = union
    checks = [tf.debugging.assert_equal(
        c, counts, message="pf.dag_map: `inputs` and `children` must have one row per node "
        "each") for c, _ in (_rows(x, b) for x in xs) if c is not None]
    bad = valid[:, :, None] & ((kids < -1) | (kids >= counts[:, None, None]))
    where = tf.argmax(tf.cast(tf.concat([tf.reshape(tf.reduce_any(bad, 2), [-1]), [False]], 0),
                              tf.int32), output_type=tf.int32)  # padded: no node formats
    checks.append(_require(tf.logical_not(tf.reduce_any(bad)), [
        "pf.dag_map (iteration", where // tf.maximum(width, 1), "): node",
        where % tf.maximum(width, 1), "has a child outside [-1, n_nodes); use the index of "
        "another node, or -1 for none"]))
    # The real nodes only, graph after graph: buffers and per-level ops scale with the
    # nodes, not with the batch times the largest graph.
    with tf.control_dependencies(checks):
        position = tf.cast(tf.reshape(tf.where(tf.reshape(valid, [-1])), [-1]), tf.int32)
    graph, local = position // tf.maximum(width, 1), position % tf.maximum(width, 1)
    starts = tf.cumsum(counts, exclusive=True)
    kids = tf.gather(tf.reshape(kids, [-1, kids.shape[2]]), position)
    kids = tf.where(kids >= 0, kids + tf.gather(starts, graph)[:, None], -1)
    inputs = tf.nest.pack_sequence_as(structure,
                                      [tf.gather(_flat(x), position) for x in padded])

    def locate(node):  # node <= the node count: padded so that no nodes still formats
        at = tf.gather(tf.concat([graph, [0]], 0), node)
        return ["pf.dag_map (iteration", at, "): node", tf.gather(tf.concat([local, [0]], 0), node)]
    states = _run(cell, spec, fallback, inputs, kids, locate=locate, scatter=True)
    # Back to [b, width, ...]: padding reads the zero row, so it is already zero.
    total = tf.size(position)
    back = tf.where(valid, starts[:, None] + tf.range(width)[None, :], total)
    out = []
    for state in tf.nest.flatten(states):
        state = tf.gather(state, back)
        out.append(Ragged(padded=state, lengths=(counts,) + (None,) * (state.shape.rank - 2))
                   if ragged else Stacked(tensor=state))
    return out


def _gradient(cell, spec, fallback, structure, flat_args, states, dys, variables):
    """dag_map's VJP, itself a call with its own rule: the original's gradient for one
    graph; inside pfor a reverse level loop over the iterations' graphs as one."""
    *xs, children = flat_args
    variables = tuple(variables or ())
    wrt = tuple(k for k, x in enumerate(xs) if x.dtype.is_floating)
    if not wrt and not variables:
        return [None] * len(flat_args)
    dys = [tf.zeros_like(s) if d is None else d for s, d in zip(states, dys)]
    vjp = custom.CustomVectorization(functools.partial(
        _one_graph_vjp, cell, spec, fallback, structure, wrt, variables), name="dag_map_vjp")
    vjp.layout_rule = functools.partial(_batched_vjp, cell, spec, fallback, structure, wrt,
                                        variables)
    vjp.layout_rule_text = ("pf.dag_map's gradient: a reverse level loop over the "
                            "iterations' graphs as one, one pfor per level")
    grads = iter(vjp(tuple(xs), children, tuple(states), tuple(dys)))
    input_grads = [next(grads) if k in wrt else None for k in range(len(xs))] + [None]
    return (input_grads, list(grads)) if variables else input_grads


def _one_graph_vjp(cell, spec, fallback, structure, wrt, variables, xs, children, states,
                   dys):
    n = tf.shape(children)[0]
    dxs, dvs = _reverse(cell, spec, fallback, structure, wrt, variables, 1, n,
                        [x[None] for x in xs], children[None], tf.ones([1, n], tf.bool),
                        [s[None] for s in states], [d[None] for d in dys])
    return tuple([d[:n] for d in dxs] + [d[0] for d in dvs])


def _batched_vjp(cell, spec, fallback, structure, wrt, variables, layouts, conversion):
    """The VJP inside pfor: the reverse level loop over the iterations' graphs as one."""
    n_x = len(tf.nest.flatten(structure))
    b = conversion.n
    union = None if unrolled.compiled() else _union(layouts[:n_x], layouts[n_x], b)
    if union is None:
        return None
    counts, ragged, width, padded, kids, valid = union
    rows = [_rows(v, b)[1] for v in layouts[n_x + 1:]]
    if any(r is None for r in rows):
        return None
    n_s = len(tf.nest.flatten(spec))
    dxs, dvs = _reverse(cell, spec, fallback, structure, wrt, variables, b, width, padded,
                        kids, valid, rows[:n_s], rows[n_s:])
    return ([_per_iteration(d[:b * width], b, width, counts, ragged) for d in dxs]
            + [Stacked(tensor=d) for d in dvs])


def _reverse(cell, spec, fallback, structure, wrt, variables, b, width, padded, kids, valid,
             states, dys):
    """Levels in reverse over the union of ``b`` graphs (each [b, width, ...]): per
    level, a pfor over the graphs of the VJP of a pfor of ``cell`` over that graph's
    nodes of the level (padded to the level's widest), so each graph gets its own
    variable gradients; the children's cotangents are scatter-added. The gradients
    of the inputs ``wrt`` ([b * width + 1, ...]) and of ``variables`` ([b, ...])."""
    single = isinstance(b, int) and b == 1  # one graph: no pfor over graphs
    states = [_zero_row(_flat(_to_width(r, width))) for r in states]
    xs = [_zero_row(_flat(x)) for x in padded]
    kids = _disjoint(kids, valid)
    n = tf.shape(kids)[0]
    level_of, depth = _levels(kids, tf.reshape(valid, [-1]))
    has = tf.concat([kids >= 0, tf.zeros([1, kids.shape[1]], tf.bool)], 0)
    kids = tf.where(has, tf.concat([kids, tf.fill([1, kids.shape[1]], n)], 0), n)
    floats = [k for k, s in enumerate(states) if s.dtype.is_floating]
    acc = [_zero_row(_flat(_to_width(dys[k], width))) for k in floats]
    vjp = functools.partial(_graph_vjp, cell, spec, fallback, structure, wrt, floats,
                            variables)

    def step(level, acc, dxs, dvs):
        at, real = _level_rows(tf.equal(level_of, level), n, b, width, single)
        kid_at = tf.gather(kids, at)
        rows = ([tf.gather(x, at) for x in xs], [tf.gather(s, kid_at) for s in states],
                tf.gather(has, at),
                [tf.where(_expand(real, a.shape.rank + 1), tf.gather(a, at),
                          tf.zeros([], a.dtype)) for a in acc])
        grads = ([g[None] for g in vjp(rows, 0)] if single else
                 api.pfor(functools.partial(vjp, rows), b, fallback=fallback))
        dxs = [_add_at(d, at, _flat(g), single) for d, g in zip(dxs, grads)]
        grads = grads[len(wrt):]
        acc = [_add_at(a, kid_at, _flat(_flat(g)), single) for a, g in zip(acc, grads)]
        dvs = [d + g for d, g in zip(dvs, grads[len(floats):])]
        return level - 1, acc, dxs, dvs

    dxs = [tf.zeros_like(xs[k]) for k in wrt]
    dvs = [tf.zeros(tf.stack([b] + v.shape.as_list()), v.dtype) for v in variables]
    _, _, dxs, dvs = tf.while_loop(lambda level, *_: level >= 0, step,
                                   (depth - 1, acc, dxs, dvs))
    return dxs, dvs


def _level_rows(in_level, n, b, width, single):
    """The union nodes a level's VJP runs on, ``[b, m]`` (graph by graph, short graphs
    padded with a real node of the level), and which of them are the level's."""
    if single and unrolled.compiled():  # static shapes: every node, the level's kept
        return tf.range(n)[None], in_level[None]
    ids = tf.cast(tf.reshape(tf.where(in_level), [-1]), tf.int32)
    if single:
        return ids[None], tf.ones_like(ids, tf.bool)[None]
    graph = ids // width
    per = tf.math.unsorted_segment_sum(tf.ones_like(ids), graph, b)
    slot = tf.stack([graph, tf.range(tf.size(ids)) - tf.gather(tf.cumsum(per, exclusive=True),
                                                              graph)], 1)
    at = tf.tensor_scatter_nd_update(tf.fill([b, tf.reduce_max(per)], ids[0]), slot, ids)
    return at, tf.scatter_nd(slot, tf.ones_like(ids), tf.shape(at)) > 0


def _graph_vjp(cell, spec, fallback, structure, wrt, floats, variables, rows, i):
    """Graph ``i``'s VJP at one level: of a pfor of ``cell`` over its rows of the level
    (inputs, child states, child masks, cotangents), for the inputs ``wrt``, the float
    child states and ``variables``."""
    def row(t):  # by the loop index (tf.gather): a slice inside pfor
        return t[i] if isinstance(i, int) else tf.gather(t, i)
    xs, cs, has, gs = rows
    xi, ci, hi = [row(x) for x in xs], [row(c) for c in cs], row(has)
    sources = [xi[k] for k in wrt] + [ci[k] for k in floats]
    with tf.GradientTape() as tape:
        tape.watch(sources)
        out = api.pfor(lambda j: tf.nest.flatten(_checked(cell(
            tf.nest.pack_sequence_as(structure, [tf.gather(x, j) for x in xi]),
            tf.nest.pack_sequence_as(spec, [tf.gather(c, j) for c in ci]),
            tf.gather(hi, j)), spec)), tf.shape(hi)[0], fallback=fallback)
    return [tf.convert_to_tensor(g) for g in tape.gradient(
        [out[k] for k in floats], sources + list(variables),
        output_gradients=[row(g) for g in gs],
        unconnected_gradients=tf.UnconnectedGradients.ZERO)]


def _add_at(buffer, index, values, single):
    """``values`` added into the rows ``index`` of ``buffer``; for one graph a segment
    sum, which converts inside pfor (the op-by-op path)."""
    index = tf.reshape(index, [-1])
    if single:
        return buffer + tf.math.unsorted_segment_sum(values, index, tf.shape(buffer)[0])
    return tf.tensor_scatter_nd_add(buffer, index[:, None], values)


def _levels(kids, active):
    """Each union node's level (-1 where not active) and the depth."""
    ready = functools.partial(_ready, kids)

    def step(level, done, at, level_of):
        level_of = tf.where(at, level, level_of)
        done = done | at
        return level + 1, done, ready(done), level_of
    done = tf.logical_not(active)
    depth, _, _, level_of = tf.while_loop(
        lambda level, done, at, _: tf.reduce_any(at), step,
        (0, done, ready(done), -tf.ones_like(kids[:, 0])))
    return level_of, depth


def _ready(children, done):
    """The nodes not ``done`` whose children (-1: none) all are."""
    kids_done = tf.reduce_all((children < 0) | tf.gather(done, tf.maximum(children, 0)), axis=1)
    return tf.logical_not(done) & kids_done


def _zero_row(t):
    """``t`` with a row of zeros below: what an absent child reads."""
    return tf.concat([t, tf.zeros_like(t[:1])], 0)


def _expand(mask, rank):
    return tf.reshape(mask, tf.concat([tf.shape(mask), [1] * (rank - 2)], 0))


def _union(xs, kids, b):
    """(row counts, whether they differ, width, each of ``xs`` as [b, width, ...],
    children [b, width, k], which of the [b, width] nodes are real) for the layouts of
    inputs and children, or None for a layout this does not take."""
    counts, kids = _rows(kids, b)
    if kids is None:
        return None
    width = tf.shape(kids)[1]
    padded = []
    for x in xs:
        x_counts, x = _rows(x, b)
        if x is None:
            return None
        if x_counts is not None:
            counts = x_counts if counts is None else counts
        padded.append(_to_width(x, width))
    ragged = counts is not None
    if counts is None:
        counts = tf.fill([b], width)
    return counts, ragged, width, padded, kids, tf.range(width)[None, :] < counts[:, None]


def _to_width(x, width):
    extra = [[0, 0], [0, tf.maximum(0, width - tf.shape(x)[1])]] + [[0, 0]] * (x.shape.rank - 2)
    return tf.pad(x, extra)[:, :width]


def _disjoint(kids, valid):
    """Children [b, width, k] as the union's [b * width, k] (-1 where none)."""
    offsets = tf.range(tf.shape(kids)[0])[:, None, None] * tf.shape(kids)[1]
    return tf.reshape(tf.where(valid[:, :, None] & (kids >= 0), kids + offsets, -1),
                      [-1, kids.shape[2]])


def _flat(x):
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


def _per_iteration(s, b, width, counts, ragged):
    s = tf.reshape(s, tf.concat([[b, width], tf.shape(s)[1:]], 0))
    if not ragged:
        return Stacked(tensor=s)
    return Ragged.from_stacked(s, (counts,) + (None,) * (s.shape.rank - 2))


def _rows(value, b):
    """(each iteration's row count or None where all have the padded count, the value
    stacked [b, rows, ...]), or (None, None) for a layout this does not take."""
    if isinstance(value, Ragged):
        if any(length is not None for length in value.lengths[1:]):
            return None, None
        return value.lengths[0], value.padded
    if isinstance(value, (Stacked, Invariant)) and value.tensor.shape.rank is not None:
        if value.is_stacked:
            return None, value.tensor
        return None, broadcast_invariant(value.tensor, b)
    return None, None


def _children(children):
    try:
        children = tf.convert_to_tensor(children)
    except (TypeError, ValueError) as e:
        raise TypeError(f"pf.dag_map: `children` must be an integer tensor [n_nodes, k], "
                        f"-1 where there is no child ({e})") from None
    if not children.dtype.is_integer:
        raise TypeError(f"pf.dag_map: `children` must be an integer tensor [n_nodes, k], "
                        f"got dtype {children.dtype.name}; cast it with tf.cast(children, "
                        "tf.int32)")
    if children.shape.rank != 2 or children.shape[1] is None:
        raise ValueError(f"pf.dag_map: `children` must be [n_nodes, k] with k known, got "
                         f"shape {children.shape}; give each node a row of k child indices "
                         "padded with -1")
    return tf.cast(children, tf.int32)


def _static_rows(t, children):
    if t.shape.rank == 0:
        raise ValueError("pf.dag_map: every tensor of `inputs` must be [n_nodes, ...], got a "
                         "scalar; give each node a row")
    if t.shape[0] is not None and children.shape[0] is not None \
            and t.shape[0] != children.shape[0]:
        raise ValueError(f"pf.dag_map: `inputs` has {t.shape[0]} rows but `children` has "
                         f"{children.shape[0]}; give every node one row of each")


def _valid(children, n):
    bad = tf.reduce_any((children < -1) | (children >= n), axis=1)
    # Padded by one row so that no node (an empty graph) still formats.
    node = tf.argmax(tf.cast(tf.concat([bad, [False]], 0), tf.int32), output_type=tf.int32)
    row = tf.gather(tf.concat([children, -tf.ones([1, children.shape[1]], tf.int32)], 0), node)
    return [_require(tf.logical_not(tf.reduce_any(bad)), [
        "pf.dag_map: node", node, "has a child outside [-1, n_nodes) with n_nodes =", n,
        "- its row of `children` is", row, "; use the index of another node, or -1 for "
        "none"])]


def _require(ok, parts):
    """An InvalidArgumentError of ``parts`` unless ``ok``: raised at once when eager,
    else an Assert (its data a list, not a StringFormat, so it converts inside pfor)."""
    if isinstance(ok, tf.__internal__.EagerTensor):
        if not bool(ok):
            text = " ".join(p if isinstance(p, str) else
                            str(p.numpy().tolist()) for p in parts)
            raise tf.errors.InvalidArgumentError(None, None, text)
        return tf.no_op()
    return tf.debugging.Assert(ok, parts, summarize=64)


def _state_spec(cell, inputs, k, signature):
    """One node's state spec: ``signature`` checked against the cell, or traced from
    the cell until the child states it is given are what it returns.

    Guesses: one float tensor of unknown shape (then a row of the first input, where
    that leaves shapes unknown), then tuples of 2-4 of them (``h, c = child_states``).
    """
    row = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), inputs)
    if signature is not None:
        return _given_spec(cell, row, k, signature)
    floats = [t.dtype for t in tf.nest.flatten(inputs) if t.dtype.is_floating]
    unknown = tf.TensorSpec(None, floats[0] if floats else tf.float32)
    first_row = tf.TensorSpec(tf.nest.flatten(row)[0].shape, unknown.dtype)
    error = None
    for start in [unknown] + [(unknown,) * m for m in range(2, 5)]:
        guess, tried_row = start, False
        for _ in range(_TRACES):
            try:
                got = _trace(cell, row, guess, k)
            except Exception as e:  # noqa: BLE001 - reported below if no guess works
                error = error or e
                break
            if _same(got, guess):
                return got
            if not _defined(got):
                if tried_row:
                    break
                guess, tried_row = tf.nest.map_structure(
                    lambda s: s if _defined(s) else first_row, got), True
                continue
            guess = got
    why = f" ({type(error).__name__}: {error})" if error is not None else ""
    raise ValueError(
        "pf.dag_map could not find one node's state (its structure and static shape) by "
        f"calling `cell` on child states like its own output{why}; pass "
        "state_signature=tf.TensorSpec(...) (or a structure of them) for one node's state")


def _given_spec(cell, row, k, signature):
    try:
        specs = tf.nest.flatten(signature)
    except (TypeError, ValueError):
        specs = []
    if not specs or not all(isinstance(s, tf.TensorSpec) and s.shape.is_fully_defined()
                            for s in specs):
        raise TypeError(f"pf.dag_map: `state_signature` must be a tf.TensorSpec of one "
                        f"node's state with a fully known shape, or a structure of them; "
                        f"got {signature!r}")
    try:
        got = _trace(cell, row, signature, k)
    except Exception as e:  # noqa: BLE001 - the cell's own error, with the signature
        raise ValueError(f"pf.dag_map: `cell` fails on child states of `state_signature` "
                         f"{signature} ({type(e).__name__}: {e}); make them agree") from e
    if not _same(got, signature):
        raise ValueError(f"pf.dag_map: `cell` returns {got} for child states of "
                         f"`state_signature` {signature}; make them agree")
    return signature


def _defined(specs):
    return all(s.shape.is_fully_defined() for s in tf.nest.flatten(specs))


def _trace(cell, row, guess, k):
    # A scratch tf.function: it captures the cell's variables, and runs nothing.
    cs = tf.nest.map_structure(
        lambda s: tf.TensorSpec(None if s.shape.rank is None else [k] + s.shape, s.dtype),
        guess)
    traced = tf.function(lambda x, c, m: tf.nest.map_structure(
        tf.convert_to_tensor, cell(x, c, m)), autograph=False)
    out = traced.get_concrete_function(row, cs, tf.TensorSpec([k], tf.bool)).structured_outputs
    return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), out)


def _same(a, b):
    try:
        tf.nest.assert_same_structure(a, b)
    except (TypeError, ValueError):
        return False
    return all(x.dtype == y.dtype and x.shape.rank is not None and y.shape.rank is not None
               and x.shape.as_list() == y.shape.as_list()
               for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)))


def _checked(state, spec):
    try:
        tf.nest.assert_same_structure(state, spec)
    except (TypeError, ValueError) as e:
        raise ValueError(f"pf.dag_map: `cell` must return the same structure for every node "
                         f"({e})") from None
    return tf.nest.map_structure(tf.convert_to_tensor, state)
