"""The errors and warnings users see."""


class ConversionError(ValueError):
    """An op of the loop body could not be vectorized and fallback was refused.

    The message names the op (type and name), the layouts of its inputs, the user's
    source line that created it where TensorFlow recorded one, and what to do.

    >>> import pfor_core as pf
    >>> issubclass(pf.ConversionError, ValueError)
    True
    """

    # Inside a tf.function, autograph would re-raise it as a StagingError: keep the
    # type users catch (the message already names the op and the source line).
    ag_pass_through = True


class FallbackWarning(UserWarning):
    """An op ran in a sequential loop over the iterations instead of vectorized.

    >>> import pfor_core as pf
    >>> issubclass(pf.FallbackWarning, UserWarning)
    True
    """


class Decline(Exception):
    """A converter's "not for these inputs": return it, or raise it from a helper.

    Either way the op goes to the next candidate converter, then to the fallback loop,
    and ``pf.explain`` shows the reason. ``ctx.decline(reason)`` makes one. Raise
    ``ConversionError`` instead when the body itself is wrong (no loop could run it).

    >>> from pfor_core.extend import Decline
    >>> Decline("stacked filter").reason
    'stacked filter'
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

    def __repr__(self):
        return f"Decline({self.reason!r})"


FALLBACK_PREFIX = "pfor fallback:"  # stable text; tests assert it is absent
