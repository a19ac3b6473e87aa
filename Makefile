# Developer shortcuts; every target uses the project's virtual environment (bash dev/install).
PYTHON ?= .venv/bin/python

.PHONY: bench bench-quick docs

# All workloads and sizes (about 6 minutes on 2 cores): benchmarks/results/full/
bench:
	bash dev/install
	$(PYTHON) benchmarks/run.py --full --out benchmarks/results/full

# A few sizes per workload (about 1 minute on 2 cores): benchmarks/results/quick/
bench-quick:
	bash dev/install
	$(PYTHON) benchmarks/run.py --quick --out benchmarks/results/quick

# The HTML documentation, warnings as errors: docs/_build/index.html
docs:
	$(PYTHON) -m sphinx -W -b html docs docs/_build
