# The test command of README.md: the whole suite on the cpu backend (PTX compile of every CUDA
# kernel included), then the kernel tests under the CUDA simulator.
PYTHON ?= python
export MILLIPYDE_CACHE_DIR ?= $(CURDIR)/.kernel-cache

.PHONY: test test-cpu test-cudasim lint

test: lint test-cpu test-cudasim

lint:
	$(PYTHON) -m ruff check millipyde tests bench

test-cpu:
	MILLIPYDE_BACKEND=cpu $(PYTHON) -m pytest -q -p no:cacheprovider

test-cudasim:
	MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 $(PYTHON) -m pytest -q -p no:cacheprovider -m cudasim_ok tests/kernels tests/graph tests/backend
