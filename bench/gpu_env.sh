# shellcheck shell=bash
# Source at the start of every device command (run from the repository root, with `.whl` carried):
#
#   source bench/gpu_env.sh && python3 -m bench ops ...
#
# Installs the carried wheels (.whl/: numpy 2.4.x, cucim-cu13, kornia, kornia-rs) into /tmp/site
# ahead of the image's own packages, puts the repository on PYTHONPATH, prints the versions that
# matter and the GPUs, and exits the calling shell non-zero if NumPy >= 2.5 (which breaks
# numba-cuda 0.30.4 at import) is still the one imported.

export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl \
        || { echo "gpu_env.sh: FAILED to install the carried wheels from .whl/" >&2; exit 1; }
else
    echo "gpu_env.sh: WARNING: no .whl/*.whl here (name .whl in the run's carry)" >&2
fi
export PYTHONPATH=/tmp/site:$PWD

python3 - <<'PY' || { echo "gpu_env.sh: ENVIRONMENT CHECK FAILED (see above)" >&2; exit 1; }
import importlib
import sys

import numpy

print(f"python     {sys.version.split()[0]}  ({sys.executable})")
print(f"numpy      {numpy.__version__}  ({numpy.__file__})")
major, minor = (int(p) for p in numpy.__version__.split(".")[:2])
if (major, minor) >= (2, 5):
    print("!" * 72, file=sys.stderr)
    print(f"!!! numpy {numpy.__version__} is the one imported: numba-cuda 0.30.4 breaks with it.",
          file=sys.stderr)
    print("!!! Carry .whl (numpy 2.4.x wheel) and check PYTHONPATH=/tmp/site.", file=sys.stderr)
    print("!" * 72, file=sys.stderr)
    sys.exit(1)

def show(label, module, extra=None, attr=None):
    try:
        mod = importlib.import_module(module)
        if extra:
            sub = importlib.import_module(extra)
            if attr:
                getattr(sub, attr)  # lazy_loader packages import for real on attribute access
        where = getattr(mod, "__file__", None) or list(getattr(mod, "__path__", []))
        print(f"{label:<10} {getattr(mod, '__version__', '?')}  ({where})")
    except Exception as exc:  # report, don't stop: a missing contender is skipped by bench
        print(f"{label:<10} NOT IMPORTABLE: {type(exc).__name__}: {exc}")

show("numba", "numba")
show("numba-cuda", "numba_cuda", "numba.cuda")
show("cupy", "cupy")
show("torch", "torch")
show("torchvision", "torchvision")
show("skimage", "skimage")
show("cucim", "cucim", "cucim.skimage.filters", "gaussian")
show("kornia", "kornia")
show("millipyde", "millipyde")
PY
nvidia-smi -L || echo "gpu_env.sh: nvidia-smi -L failed" >&2
