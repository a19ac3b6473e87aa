"""Every public callable of pfor_core documents itself with a runnable example, and the
examples run: doctest over the docstrings of the names in ``pfor_core.__all__`` (and
``pf.data.map_batched``), compared with ELLIPSIS and NORMALIZE_WHITESPACE."""

import doctest
import inspect

import pytest

import pfor_core as pf

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _public_callables() -> dict[str, object]:
    """Name -> object for the callables pfor_core defines and exports. ``hookimpl`` is
    pluggy's marker instance (its docstring is pluggy's), so it is left out."""
    found = {}
    for name in pf.__all__:
        obj = getattr(pf, name)
        if inspect.ismodule(obj):
            for sub in getattr(obj, "__all__", None) or [n for n in vars(obj)
                                                         if not n.startswith("_")]:
                member = getattr(obj, sub)
                if inspect.isfunction(member) and member.__module__ == obj.__name__:
                    found[f"{name}.{sub}"] = member
        elif (inspect.isfunction(obj) or inspect.isclass(obj)) and \
                obj.__module__.startswith("pfor_core"):
            found[name] = obj
    return found


PUBLIC = _public_callables()


def test_the_public_names_are_found():
    expected = {"pfor", "vmap", "vectorized_map", "map_fn", "jacobian", "batch_jacobian",
                "hessian", "tape_jacobian", "tape_batch_jacobian", "per_example_gradients",
                "all_sum", "all_mean", "all_max", "all_min", "all_gather",
                "data.map_batched", "explain", "register_converter",
                "register_batch_polymorphic"}
    missing = expected - set(PUBLIC)
    assert not missing, f"public callables not found in pfor_core.__all__: {sorted(missing)}"


def test_every_public_callable_has_an_example():
    without = sorted(name for name, obj in PUBLIC.items()
                     if ">>>" not in (inspect.getdoc(obj) or ""))
    assert not without, f"public callables whose docstring has no >>> example: {without}"


def _kit_examples() -> dict[str, object]:
    """The converter API's and the testing kit's names whose docstrings hold examples."""
    from pfor_core import extend, testing  # pylint: disable=import-outside-toplevel

    return {f"{module.__name__}.{n}": getattr(module, n) for module in (extend, testing)
            for n in module.__all__ if ">>>" in (inspect.getdoc(getattr(module, n)) or "")
            and (inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n)))}


KIT = _kit_examples()


def test_the_kit_has_examples():
    assert "pfor_core.testing.assert_matches_loop" in KIT
    assert "pfor_core.extend.op_types_of" in KIT


@pytest.mark.parametrize("name", sorted(PUBLIC) + sorted(KIT))
def test_examples_run(name):
    obj = PUBLIC.get(name) or KIT[name]
    finder = doctest.DocTestFinder(recurse=False)
    module = inspect.getmodule(obj)
    tests = [t for t in finder.find(obj, name=name, module=module, globs={}) if t.examples]
    assert tests, f"{name} has no doctest examples"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"
