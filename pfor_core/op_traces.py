"""The creation traceback of the ops a conversion emits: one per conversion.

TensorFlow records the Python stack with every op it creates (``op.traceback``, shown in
run-time errors as "defined at"). For the ops a conversion emits that stack is pfor's
own walk, the same for every op but a few frames; capturing it for each op cost about
15% of the test suite's time (py-spy, 2.05M ops). ``shared`` captures the
stack once, where pfor was called, and gives it to every op created inside, on this
thread only: a run-time error in a converted op then points at the user's ``pf.pfor``
call, as the per-op stacks did (past pfor's frames). Ops of the loop body keep their own
(they are traced before, ``trace.py``).

TensorFlow has no switch for this: ``ops._create_c_op`` calls ``tf_stack.extract_stack``
through its module's global ``tf_stack``, which ``_install`` replaces by a stand-in that
defers to the real one outside ``shared``. Where TensorFlow's layout is not the one
expected, nothing is installed and every op keeps its own stack.
"""

from __future__ import annotations

import contextlib
import threading

from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.util import tf_stack

_local = threading.local()


class _Stacks:
    """Stands in for the ``tf_stack`` module in TensorFlow's ``ops``."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    def extract_stack(self, stacklevel=1):
        trace = getattr(_local, "trace", None)
        if trace is not None:
            return trace
        return self._module.extract_stack(stacklevel=stacklevel + 1)  # (this frame)


def _install() -> bool:
    current = getattr(tf_ops, "tf_stack", None)
    if isinstance(current, _Stacks):
        return True
    if current is not tf_stack or not callable(getattr(current, "extract_stack", None)):
        return False
    tf_ops.tf_stack = _Stacks(current)
    return True


_INSTALLED = _install()


@contextlib.contextmanager
def shared():
    """Ops created inside (on this thread) share one traceback: the stack here."""
    if not _INSTALLED or getattr(_local, "trace", None) is not None:
        yield  # (nested: the outer conversion's stack stays)
        return
    _local.trace = tf_stack.extract_stack(stacklevel=3)  # (from the caller out)
    try:
        yield
    finally:
        _local.trace = None
