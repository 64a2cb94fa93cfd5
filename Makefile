# The test command of README.md: the whole suite on the cpu backend (PTX compile of every CUDA
# kernel included), then the kernel tests (marked cudasim_ok, wherever they are) under the CUDA
# simulator.
PYTHON ?= python
export MILLIPYDE_CACHE_DIR ?= $(CURDIR)/.kernel-cache
# pytest-xdist workers: one per core (PYTEST_JOBS=0 runs in this process). loadgroup keeps the tests
# marked xdist_group(name) on one worker (a module-scoped Dask cluster, say).
PYTEST_JOBS ?= auto
PYTEST = $(PYTHON) -m pytest -q -p no:cacheprovider -n $(PYTEST_JOBS) --dist loadgroup --durations=25

.PHONY: test test-cpu test-cudasim lint

test: lint test-cpu test-cudasim

lint:
	$(PYTHON) -m ruff check millipyde tests bench

test-cpu:
	MILLIPYDE_BACKEND=cpu $(PYTEST)

test-cudasim:
	MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 $(PYTEST) -m cudasim_ok tests
