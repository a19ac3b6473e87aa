"""pfor: vectorize parallel-for loops over TensorFlow graphs statically.

``import pfor_core as pf``; docs/api.rst is the contract (the converter API for packs is
``pfor_core.extend``, docs/extending.rst).
"""

from pfor_core import autograph as _autograph
from pfor_core import data
from pfor_core.api import map_fn, pfor, vectorized_map
from pfor_core.collectives import all_gather, all_max, all_mean, all_min, all_sum
from pfor_core.custom import custom_vectorization
from pfor_core.dag import dag_map
from pfor_core.derivatives import (batch_jacobian, hessian, jacobian, per_example_gradients,
                                   tape_batch_jacobian, tape_jacobian)
from pfor_core.errors import ConversionError, FallbackWarning
from pfor_core.existing_loops import vectorize_loops
from pfor_core.explain import Report, explain
from pfor_core.hookspecs import hookimpl
from pfor_core.layout import Invariant, Stacked
from pfor_core.plugins import (CONVERTER_API_VERSION, default_registry,
                               register_batch_polymorphic, register_converter)
from pfor_core.vmap import vmap

__version__ = "0.7.6"

_autograph.keep_library_unconverted()

__all__ = [
    "CONVERTER_API_VERSION", "ConversionError", "FallbackWarning", "Invariant", "Report",
    "Stacked", "all_gather", "data", "all_max", "all_mean", "all_min", "all_sum", "batch_jacobian", "custom_vectorization", "dag_map", "default_registry", "explain", "hessian", "hookimpl",
    "jacobian", "map_fn", "per_example_gradients", "pfor", "register_batch_polymorphic",
    "register_converter", "tape_batch_jacobian", "tape_jacobian", "vectorize_loops", "vectorized_map", "vmap",
]
