#!/usr/bin/env bash
# One-shot GPU check of the CUDA flow, for a lent GPU machine with no internet (see docs/runtime.md).
#
#   bash benchmarks/gpu_check.sh            # from the repository root; about 2-3 minutes on an H200
#
# 1. installs pairedge from this tree (offline, no dependencies) and any wheels carried in .whl/ (for a
#    machine that lacks cuda-python / nvidia-cuda-nvrtc / typer / rich / onnxruntime) into /tmp/pairedge-site;
# 2. records the machine (nvidia-smi, pairedge doctor);
# 3. runs the emulated tests first: the same kernel files on the CPU through HIP-CPU (every kernel against its
#    numpy twin, CudaFlow's launches, the whole flow on real frames). They pass in CI; if they fail here too the kernel
#    or its launch is wrong, if only the GPU tests fail it is the GPU path (driver, NVRTC, timing, races).
#    They skip with the reason when ../shared/tools/hip-cpu or TBB is missing;
# 4. runs the GPU tests (GPU vs CPU reference flow and pooling, odd sizes, NVRTC / nvcc compiles) and the
#    CPU contract tests;
# 5. runs benchmarks/bench_gpu_flow.py (every kernel vs its twin on the GPU, agreement, cost with 10 / 100
#    people, Pipeline.step per stage).
# Everything it writes goes to benchmarks/results/ (gpu_check.log, gpu_check_emulated.xml, gpu_check_pytest.xml,
# bench_gpu_flow.*)
# and, when $OUT is set (the lent machine's return folder), is copied there too. Each step has a timeout;
# the whole script stays under 5 minutes.
set -u -o pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=${PAIREDGE_SITE:-/tmp/pairedge-site}
RES=benchmarks/results
mkdir -p "$RES"
LOG=$RES/gpu_check.log
: >"$LOG"
say() { echo "== $*" | tee -a "$LOG"; }
status=0

say "install (offline) into $SITE"
if compgen -G ".whl/*.whl" >/dev/null; then
  timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl 2>&1 | tee -a "$LOG"
fi
timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$SITE" . 2>&1 | tee -a "$LOG" || status=1
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PAIREDGE_CACHE_DIR=${PAIREDGE_CACHE_DIR:-/tmp/pairedge-cache}
# the emulated device's HIP-CPU headers: next to the checkout (the installed copy cannot find them itself)
if [ -z "${PAIREDGE_HIP_CPU:-}" ] && [ -e ../shared/tools/hip-cpu/include/hip/hip_runtime.h ]; then
  export PAIREDGE_HIP_CPU="$(cd ../shared/tools/hip-cpu && pwd)"
fi
if [ ! -e /usr/include/oneapi/tbb/version.h ] && [ ! -e /usr/include/tbb/version.h ] && [ "$(id -u)" = 0 ]; then
  timeout 60 apt-get install -y libtbb-dev >/dev/null 2>&1 || echo "no libtbb-dev: the emulated tests will skip" | tee -a "$LOG"
fi

say "machine"
(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true) | tee -a "$LOG"
timeout 60 "$PY" -m pairedge.apps.cli doctor 2>&1 | tee -a "$LOG"

say "emulated tests (the kernels on the CPU, HIP-CPU)"
unset PAIREDGE_CUDA_EMULATION
timeout 120 "$PY" -m pytest -q -p no:cacheprovider -rs --junitxml="$RES/gpu_check_emulated.xml" \
  tests/gpu/test_twins.py tests/gpu/test_backend.py tests/gpu/test_cuda.py \
  tests/gpu/test_emulated_flow.py 2>&1 | tee -a "$LOG" || status=1

say "tests"
timeout 150 "$PY" -m pytest -q -p no:cacheprovider -rs --junitxml="$RES/gpu_check_pytest.xml" \
  tests/gpu tests/runtime/flow/test_reference.py 2>&1 | tee -a "$LOG" || status=1

say "timing"
(cd benchmarks && timeout 120 "$PY" bench_gpu_flow.py --frames 50) 2>&1 | tee -a "$LOG" || status=1

say "exit status $status"
if [ -n "${OUT:-}" ]; then
  cp "$LOG" "$RES/gpu_check_pytest.xml" "$RES/gpu_check_emulated.xml" "$OUT/" 2>/dev/null || true
  cp "$RES"/bench_gpu_flow.* "$OUT/" 2>/dev/null || true
fi
exit $status
