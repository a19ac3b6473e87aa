"""``pf.dag_map``: a cell per node of a tree or DAG, one vectorized call per level.

A node's level is 0 without children, else 1 + its children's highest level; every
level is one ``pfor`` over its nodes, so the sequential steps are the depth.
"""

import tensorflow as tf

from pfor_core import api

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
    inputs = tf.nest.pack_sequence_as(inputs, flat)
    children = _children(children)
    k = children.shape[1]
    n = tf.shape(children)[0]
    checks = [_same_rows(t, n, children) for t in flat]
    with tf.control_dependencies(checks + _valid(children, n)):
        levels = tf.identity(_levels(children, n))
    spec = _state_spec(cell, inputs, k, state_signature)

    def gather_children(states, kids):
        mask = kids >= 0
        safe = tf.maximum(kids, 0)

        def one(s):
            m = tf.reshape(mask, [k] + [1] * (s.shape.rank - 1))
            return tf.where(m, tf.gather(s, safe), tf.zeros_like(tf.gather(s, safe)))
        return tf.nest.map_structure(one, states), mask

    def run_level(level, states):
        at = tf.equal(levels, level)
        ids = tf.cast(tf.reshape(tf.where(at), [-1]), tf.int32)

        def one(i):
            v = ids[i]
            cs, mask = gather_children(states, children[v])
            x = tf.nest.map_structure(lambda t: t[v], inputs)
            return _checked(cell(x, cs, mask), spec)
        out = api.pfor(one, tf.size(ids), fallback=fallback)
        # A select rather than a scatter: the same work (both copy the buffer), and
        # it converts when dag_map itself runs inside pfor over trees of other sizes.
        slot = tf.maximum(tf.cumsum(tf.cast(at, tf.int32)) - 1, 0)

        def update(s, o):
            keep = tf.reshape(at, [-1] + [1] * (s.shape.rank - 1))
            return tf.where(keep, tf.gather(o, slot), s)
        return tf.nest.map_structure(update, states, out)

    states = tf.nest.map_structure(
        lambda s: tf.zeros(tf.concat([[n], s.shape], 0), s.dtype), spec)
    depth = tf.reduce_max(tf.concat([levels, [-1]], 0)) + 1

    def body(level, states):
        return level + 1, run_level(level, states)

    _, states = tf.while_loop(lambda level, _: level < depth, body, (tf.constant(0), states))
    return states


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


def _same_rows(t, n, children):
    if t.shape.rank == 0:
        raise ValueError("pf.dag_map: every tensor of `inputs` must be [n_nodes, ...], got a "
                         "scalar; give each node a row")
    if t.shape[0] is not None and children.shape[0] is not None \
            and t.shape[0] != children.shape[0]:
        raise ValueError(f"pf.dag_map: `inputs` has {t.shape[0]} rows but `children` has "
                         f"{children.shape[0]}; give every node one row of each")
    return tf.debugging.assert_equal(
        tf.shape(t)[0], n, message="pf.dag_map: `inputs` and `children` must have one row "
        "per node each")


def _valid(children, n):
    bad = tf.reduce_any((children < -1) | (children >= n), axis=1)
    # Padded by one row so that no node (an empty graph) still formats.
    node = tf.argmax(tf.cast(tf.concat([bad, [False]], 0), tf.int32), output_type=tf.int32)
    row = tf.gather(tf.concat([children, -tf.ones([1, children.shape[1]], tf.int32)], 0), node)
    return [_require(tf.logical_not(tf.reduce_any(bad)), [
        "pf.dag_map: node", node, "has a child outside [-1, n_nodes) with n_nodes =", n,
        "- its row of `children` is", row, "; use the index of another node, or -1 for "
        "none"])]


def _levels(children, n):
    """Each node's level by relaxation; still moving after n rounds means a cycle."""
    has = children >= 0
    safe = tf.maximum(children, 0)

    def relax(levels):
        below = tf.where(has, tf.gather(levels, safe), -tf.ones_like(children))
        return tf.reduce_max(tf.concat([below, -tf.ones([n, 1], tf.int32)], 1), 1) + 1

    def body(i, levels, _):
        new = relax(levels)
        return i + 1, new, tf.reduce_any(tf.not_equal(new, levels))

    _, levels, moving = tf.while_loop(
        lambda i, _, moving: moving & (i <= n), body,
        (tf.constant(0), tf.zeros([n], tf.int32), tf.constant(True)))
    # On or above a cycle the level only grows: the highest one is such a node.
    node = tf.argmax(tf.concat([levels, [-1]], 0), output_type=tf.int32)
    with tf.control_dependencies([_require(tf.logical_not(moving), [
            "pf.dag_map: node", node, "is on a cycle of `children` or its children lead "
            "into one; a node must not be its own descendant"])]):
        return tf.identity(levels)


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
