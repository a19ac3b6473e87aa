"""The differential fuzzer in the normal suite: random loop bodies drawn from the
grammar (fuzz_program and the fuzz_ops_* modules) run under pfor in seven modes
(fuzz_modes) and compared with the sequential loop.

A small derandomized budget runs here; ``bash dev/fuzz N`` runs N random examples per
mode. A failure prints the shrunk body as Python (its inputs, statements with dtypes and
shapes, and the mode).
"""

import pytest

import fuzz_modes
from fuzz_run import fuzz_property

pytestmark = [pytest.mark.fuzz, pytest.mark.grappler]  # optimized, as users run

# Examples per mode (derandomized), about a minute in all on 2 cores; XLA compiles both
# the loop and pfor's graph, so it gets fewer.
CI_EXAMPLES = {"eager": 100, "function": 70, "chunked": 70, "xla": 30, "xla_chunked": 20,
               "iters0": 70,
               "strict": 100}


@pytest.mark.parametrize("mode", fuzz_modes.MODES)
def test_pfor_matches_the_loop(mode):
    fuzz_property(mode, max_examples=CI_EXAMPLES[mode], derandomize=True)()


def test_the_grammar_marks_ops_without_converters():
    """fallback="error" is expected to hold from the grammar: ops without a converter are
    marked, so strict programs never draw them."""
    unconverted = {op.feature for op in fuzz_modes.OPS if not op.converted}
    assert "fake_quant" in unconverted and not {"dawsn", "logical_xor"} & unconverted
