"""``pf.dag_map``: a cell per node of a tree or DAG, one vectorized call per level.

A node's level is 0 without children, else 1 + its children's highest level; every
level is one ``pfor`` over its nodes, so the sequential steps are the depth.
"""

import tensorflow as tf

from pfor_core import api

_TRACES = 4  # fixed-point traces that find the state's structure from the cell itself


def dag_map(cell, inputs, children, *, fallback="warn"):
    """Every node's state of ``cell`` run children before parents (docs/api.rst).

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
    spec = _state_spec(cell, inputs, k)

    def gather_children(states, kids):
        mask = kids >= 0
        safe = tf.maximum(kids, 0)

        def one(s):
            m = tf.reshape(mask, [k] + [1] * (s.shape.rank - 1))
            return tf.where(m, tf.gather(s, safe), tf.zeros_like(tf.gather(s, safe)))
        return tf.nest.map_structure(one, states), mask

    def run_level(ids, states):
        def one(i):
            v = ids[i]
            cs, mask = gather_children(states, children[v])
            x = tf.nest.map_structure(lambda t: t[v], inputs)
            return _checked(cell(x, cs, mask), spec)
        out = api.pfor(one, tf.size(ids), fallback=fallback)
        return tf.nest.map_structure(
            lambda s, o: tf.tensor_scatter_nd_update(s, ids[:, None], o), states, out)

    states = tf.nest.map_structure(
        lambda s: tf.zeros(tf.concat([[n], s.shape], 0), s.dtype), spec)
    depth = tf.reduce_max(tf.concat([levels, [-1]], 0)) + 1

    def body(level, states):
        ids = tf.cast(tf.reshape(tf.where(tf.equal(levels, level)), [-1]), tf.int32)
        return level + 1, run_level(ids, states)

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
    msg = tf.strings.format(
        "pf.dag_map: node {} has a child outside [-1, {}): its row of `children` is {}; "
        "use the index of another node, or -1 for none", (node, n, row),
        summarize=-1)
    return [tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [msg])]


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
    msg = tf.strings.format(
        "pf.dag_map: node {} is on a cycle of `children` or its children lead into one; "
        "a node must not be its own descendant", (node,))
    with tf.control_dependencies([tf.debugging.Assert(tf.logical_not(moving), [msg])]):
        return tf.identity(levels)


def _state_spec(cell, inputs, k):
    """The state's structure, traced from ``cell`` until the child states it is given
    are what it returns.

    Guesses: one float tensor of unknown shape (a structured state shows in what the
    cell returns), then a row of the first input where that left shapes unknown.
    """
    row = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), inputs)
    first_row = tf.nest.flatten(row)[0]
    floats = [t.dtype for t in tf.nest.flatten(inputs) if t.dtype.is_floating]
    guess = tf.TensorSpec(None, floats[0] if floats else tf.float32)
    tried_row, error = False, None
    for _ in range(_TRACES):
        try:
            got = _trace(cell, row, guess, k)
        except Exception as e:  # noqa: BLE001 - reported below with what was tried
            got, error = None, e
        if got is not None and _same(got, guess):
            return got
        if got is None or not all(s.shape.is_fully_defined() for s in tf.nest.flatten(got)):
            if tried_row:
                break
            tried_row, guess = True, tf.TensorSpec(first_row.shape, guess.dtype)
            continue
        guess = got
    why = f" ({type(error).__name__}: {error})" if error is not None else ""
    raise ValueError(
        "pf.dag_map could not find the state's structure and static shape by calling "
        f"`cell` on child states of its own output{why}; make cell return the same "
        "structure it reads from child_states, each tensor of a shape known without "
        "running it")


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
