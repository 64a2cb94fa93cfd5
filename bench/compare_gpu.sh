#!/usr/bin/env bash
# The GPU checks and timings of the one-engine, datasets and op-library issues, this tree
# against a baseline tree in the same call (each part fits one device call):
#
#   source bench/gpu_env.sh && bash bench/compare_gpu.sh PART BASELINE_TREE
#
# PART "suite": CI's suite (cpu backend and CUDASIM) on the machine's cores.
# PART "tests": GPU tests of the op library, the recorded paths and the sources.
# PART "engine": single ops (bench_single), figure-5.1 and ImageNet
# batches (bench_batches, bench_recipes), Pipelines A/B and the callable recipe
# (bench_pipeline engine), each in both trees.
# PART "data": the streamed dataset rows (bench_data gpu, the baseline's augment beside),
# every recipe's `millipyde augment -n 48` with an empty kernel cache, RandAugment batches.
# Logs go to $OUT (one per step); the last lines print a summary.
set -u
part=$1
base=$(cd "$2" && pwd)
new=$PWD
out=${OUT:-/tmp/compare-out}
mkdir -p "$out"
export MILLIPYDE_BACKEND=cuda PYTHONUNBUFFERED=1
nproc_=$(nproc)
step() {  # step NAME TIMEOUT COMMAND...: run, log to $OUT/NAME.log, say how long it took
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    echo "[$name] rc=$? $((SECONDS - t0)) s"
}
# the same command run in the baseline tree, first on the path (``env -C``: timeout runs
# programs, not shell functions)
in_base=(env -C "$base" PYTHONPATH="/tmp/site:$base" MILLIPYDE_CACHE_DIR=/tmp/cache-base)
export MILLIPYDE_CACHE_DIR=/tmp/cache-new

if [ "$part" = suite ]; then
    # the CI suite (cpu backend, and the simulator's kernel tests) on this machine's cores
    jobs=$((nproc_ < 16 ? nproc_ : 16))
    step suite_cpu 300 env MILLIPYDE_BACKEND=cpu MILLIPYDE_CACHE_DIR=/tmp/cache-cpu \
        python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n "$jobs" --dist loadgroup -rf tests
    step suite_sim 200 env MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 \
        MILLIPYDE_CACHE_DIR=/tmp/cache-sim python3 -m pytest -q -p no:cacheprovider \
        -p no:benchmark -n "$jobs" --dist loadgroup -rf -m cudasim_ok tests
    for f in suite_cpu suite_sim; do
        echo "== $f"; grep -E "^FAILED|^ERROR| passed| failed" "$out/$f.log" | tail -15
    done
fi
if [ "$part" = tests ]; then
    # the GPU tests of the op library, the recorded paths and the sources (no baseline)
    # -v: each result line names its test, so failures are known even if the step is cut off
    step tests "${TESTS_LIMIT:-330}" python3 -m pytest -v -p no:cacheprovider -p no:benchmark \
        -n "$((nproc_ < 16 ? nproc_ : 16))" -rf -m "not exhaustive" tests/ops tests/kernels \
        tests/test_generator_batches_ops.py tests/test_generator_batches_tv.py \
        tests/test_generator_batches_geo.py tests/test_generator_batches_album.py \
        tests/test_generator_batches_stats.py tests/test_generator_mixed.py \
        tests/test_compose.py tests/test_batch_mix.py tests/test_transforms.py \
        tests/test_policies.py tests/test_augmix.py tests/test_pipeline_chunks.py
    echo "== tests"; grep -E "FAILED|ERROR|passed|failed" "$out/tests.log" | grep -v PASSED | tail -40
elif [ "$part" = engine ]; then
    step single_base 60 "${in_base[@]}" python3 "$new/bench/bench_single.py" --repeat 300
    step single_new 60 python3 bench/bench_single.py --repeat 300
    step batches_base 70 "${in_base[@]}" python3 bench/bench_batches.py --batches 40
    step batches_new 70 python3 bench/bench_batches.py --batches 40
    step recipes_base 60 "${in_base[@]}" python3 -m bench.bench_recipes --outputs 1024 --repeat 3 \
        --batch-outputs 51200
    step recipes_new 60 python3 -m bench.bench_recipes --outputs 1024 --repeat 3 \
        --batch-outputs 51200
    step pipeline 200 python3 bench/bench_pipeline.py engine --tree new=. --tree "base=$base" \
        --out "$out" --budget 320
    for f in single_base single_new; do echo "== $f"; tail -6 "$out/$f.log"; done
    for f in batches_base batches_new; do echo "== $f"; tail -8 "$out/$f.log"; done
    for f in recipes_base recipes_new; do
        echo "== $f"
        python3 - "$out/$f.log" <<'PY' || tail -5 "$out/$f.log"
import json, sys
text = open(sys.argv[1]).read()
res = json.loads(text[text.index("{"):])
b = res["millipyde_batches_256_f32_nchw"]
print(f"imagenet batches(256): {b['img_s']:.0f} img/s; kornia {res['kornia_img_s_512']}")
PY
    done
    echo "== pipeline"; tail -25 "$out/pipeline.log"
elif [ "$part" = data ]; then
    step data 330 python3 bench/bench_data.py gpu --baseline "$base" --budget 310 \
        --batches 300 --shard-batches 150 --rank-batches 120 --out "$out"
    for r in imagenet thesis detection; do
        rm -rf /tmp/cold-cache /tmp/cold-out
        step "cold_$r" 90 env MILLIPYDE_CACHE_DIR=/tmp/cold-cache python3 -m millipyde augment \
            -o /tmp/cold-out -n 48 --seed 0 --recipe "$r"
    done
    if python3 -c "import bench.bench_recipes as b; assert hasattr(b, 'randaugment')" 2>/dev/null
    then
        step randaugment 90 python3 -m bench.bench_recipes --randaugment --outputs 1024
    fi
    echo "== data"; tail -30 "$out/data.log"
    for r in imagenet thesis detection; do echo "== cold $r"; tail -3 "$out/cold_$r.log"; done
    [ -f "$out/randaugment.log" ] && { echo "== randaugment"; tail -12 "$out/randaugment.log"; }
fi
