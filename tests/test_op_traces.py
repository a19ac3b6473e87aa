"""The ops a conversion emits share one creation traceback, where pfor was called
(op_traces.py); the body's ops and ops built outside pfor keep their own."""

import tensorflow as tf

import pfor_core as pf

X = tf.constant([[1., 2.], [3., 4.]])
IDX = tf.constant([0, 5])


def body(i):
    return tf.gather(X, tf.gather(IDX, i))  # BODY LINE


def _call_line():
    return pf.pfor(body, 2, fallback="error")  # CALL LINE


def _line_of(marker, fn):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if marker in line)


def _frames(op):
    return [(f.filename, f.lineno) for f in op.traceback]


def test_converted_ops_share_the_stack_of_the_pfor_call():
    graph = tf.function(_call_line).get_concrete_function().graph
    gathers = [op for op in graph.get_operations() if op.type == "GatherV2"]
    assert gathers, "no converted gather"
    traces = {tuple(_frames(op)) for op in gathers}
    assert len(traces) == 1, traces
    (trace,) = traces
    assert (__file__, _line_of("CALL LINE", _call_line)) in trace
    # From the caller out: none of pfor's walk, nor the stand-in's own frames.
    pfor_frames = [f for f, _ in trace if "pfor_core" in f]
    assert not [f for f in pfor_frames if f.endswith(("walk.py", "op_traces.py"))], trace


def test_a_run_time_error_of_a_converted_op_names_the_pfor_call():
    try:
        tf.function(_call_line)()
    except tf.errors.InvalidArgumentError as error:
        assert f"line {_line_of('CALL LINE', _call_line)}" in str(error), str(error)
    else:
        raise AssertionError("an index out of range did not raise")


def test_the_body_and_ops_outside_pfor_keep_their_own_stacks():
    seen = {}

    def traced(i):
        out = body(i)
        seen["op"] = out.op
        return out

    tf.function(lambda: pf.pfor(traced, 2, fallback="error")).get_concrete_function()
    assert (__file__, _line_of("BODY LINE", body)) in _frames(seen["op"])
    outside = tf.function(lambda: tf.gather(X, 1)).get_concrete_function().graph
    (gather,) = [op for op in outside.get_operations() if op.type == "GatherV2"]
    assert any(f == __file__ for f, _ in _frames(gather))
    assert not any("pfor_core" in f for f, _ in _frames(gather))
