"""The user's options for one conversion: fallback, randomness, chunking, memory."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """What ``pf.pfor`` and the APIs built on it were asked for (validated by
    ``checks.options``)."""

    fallback: str = "warn"
    randomness: str = "different"
    parallel_iterations: int | str | None = None  # "auto": chosen for memory_budget
    memory_budget: int | None = None
    ragged_outputs: bool = False  # outputs whose shape varies come back as tf.RaggedTensor
