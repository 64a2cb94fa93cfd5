# The test command of README.md (what CI runs): the CI tier of the suite on the cpu backend (PTX
# compile of every CUDA kernel kind included), and its kernel tests (marked cudasim_ok, wherever
# they are) under the CUDA simulator, then the recorded paths' tests over two virtual cpu devices
# (test-devices). `make test-full` runs every test, those marked exhaustive too
# (tests/tiers.py says what goes where).
PYTHON ?= python
export MILLIPYDE_CACHE_DIR ?= $(CURDIR)/.kernel-cache
# pytest-xdist workers: one per core (PYTEST_JOBS=0 runs in this process). loadgroup keeps each test
# group of tests/conftest.py on one worker (a module-scoped Dask cluster; modules sharing kernels).
PYTEST_JOBS ?= auto
PYTEST = $(PYTHON) -m pytest -q -p no:cacheprovider -n $(PYTEST_JOBS) --dist loadgroup --durations=25

# the tier: "ci" leaves out the tests marked exhaustive, "full" runs them all
TIER ?= ci
ifeq ($(TIER),full)
CPU_MARKS :=
SIM_MARKS := cudasim_ok
CPU_OPT := 3
else
CPU_MARKS := not exhaustive
SIM_MARKS := cudasim_ok and not exhaustive
# The CI tier compiles the cpu kernels at LLVM's -O1 (NUMBA_OPT): the same IEEE arithmetic
# (no fast-math flags, so no pass may reorder or contract it; every value test holds either
# way), ~13% fewer CPU seconds for the compile-heavy batch tests (bench/RESULTS.md, "CI: the
# cpu kernels at -O1"). The full tier and every user run compile at Numba's default, -O3;
# -O0 is not an option (it leaves global arrays as dynamic globals: kernels not cachable).
CPU_OPT := 1
endif

.PHONY: test test-full test-cpu test-devices test-cudasim lint

# The two parts run side by side, each on its own workers: the cpu part (Numba compiles of the
# generated kernels, ~3/4 of the CPU seconds) is the longer, and the simulator part fills the
# cores beside it; its blocks without syncthreads run their simulated threads one after another
# on one thread (tests/simulator_poll.py). bench/RESULTS.md, "CI: what its time goes to, and the
# cuts (2026-11-28)", has the last measured times.
# -Otarget prints each part's output whole, once it is done.
test: lint
	$(MAKE) -j2 -Otarget test-cpu test-cudasim
	$(MAKE) test-devices TESTS="$(DEVICE_TESTS)"

test-full:
	$(MAKE) test TIER=full

lint:
	$(PYTHON) -m ruff check millipyde tests bench

test-cpu:
	MILLIPYDE_BACKEND=cpu NUMBA_OPT=$(CPU_OPT) $(PYTEST) -m "$(CPU_MARKS)"

# The cpu part with two virtual devices: checks each test's premise about how many devices
# share its work, as two GPUs would (the whole suite: 7:20 on the 2-core machine, bench/
# RESULTS.md "The whole test suite on two H200s ..."). CI runs it over DEVICE_TESTS, the
# recorded paths' tests, where such premises live (templates per device, chunks and batches
# on every device): ~20 s after the cpu part has filled the kernel cache.
TESTS ?=
DEVICE_TESTS := tests/test_pipeline*.py tests/test_batch_host_paths.py \
	tests/test_generator_callables.py
test-devices:
	MILLIPYDE_BACKEND=cpu MILLIPYDE_CPU_DEVICES=2 NUMBA_OPT=$(CPU_OPT) $(PYTEST) -m "$(CPU_MARKS)" $(TESTS)

test-cudasim:
	MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 $(PYTEST) -m "$(SIM_MARKS)" tests
