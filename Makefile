# The test command of README.md: the whole suite on the cpu backend (PTX compile of every CUDA
# kernel included), and the kernel tests (marked cudasim_ok, wherever they are) under the CUDA
# simulator.
PYTHON ?= python
export MILLIPYDE_CACHE_DIR ?= $(CURDIR)/.kernel-cache
# pytest-xdist workers: one per core (PYTEST_JOBS=0 runs in this process). loadgroup keeps each test
# group of tests/conftest.py on one worker (a module-scoped Dask cluster; modules sharing kernels).
PYTEST_JOBS ?= auto
PYTEST = $(PYTHON) -m pytest -q -p no:cacheprovider -n $(PYTEST_JOBS) --dist loadgroup --durations=25

.PHONY: test test-cpu test-cudasim lint

# The two parts run side by side, each on its own workers: a simulator worker keeps well under a
# core busy (each simulated GPU thread is a Python thread, and they hand the GIL to each other all
# the time), and the cpu part's compiles use the rest (bench/RESULTS.md, twelfth session, h-ci2).
# -Otarget prints each part's output whole, once it is done.
test: lint
	$(MAKE) -j2 -Otarget test-cpu test-cudasim

lint:
	$(PYTHON) -m ruff check millipyde tests bench

test-cpu:
	MILLIPYDE_BACKEND=cpu $(PYTEST)

test-cudasim:
	MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 $(PYTEST) -m cudasim_ok tests
