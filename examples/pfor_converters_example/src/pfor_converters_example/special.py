# Dawson's integral (tf.math.special.dawsn, op type "Dawsn") is elementwise: the
# op applied to the stacked input [n, ...] is already the vectorized op, so the
# stock elementwise pattern re-emits it once on the whole batch.
from pfor_core.extend import elementwise


def register(registry):
    registry.add("Dawsn", elementwise)
