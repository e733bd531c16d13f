#!/usr/bin/env bash
# One-shot GPU check of the CUDA flow, for a lent GPU machine with no internet (see docs/runtime.md).
#
#   bash benchmarks/gpu_check.sh            # from the repository root; about 2-3 minutes on an H200
#
# 1. installs pairedge from this tree (offline, no dependencies) and any wheels carried in .whl/ (for a
#    machine that lacks cuda-python / nvidia-cuda-nvrtc / typer / rich / onnxruntime) into /tmp/pairedge-site;
# 2. records the machine (nvidia-smi, pairedge doctor);
# 3. runs the GPU tests (GPU vs CPU reference flow and pooling, odd sizes, NVRTC / nvcc compiles) and the
#    CPU contract tests;
# 4. runs benchmarks/bench_gpu_flow.py (agreement, cost with 10 / 100 people, Pipeline.step per stage).
# Everything it writes goes to benchmarks/results/ (gpu_check.log, gpu_check_pytest.xml, bench_gpu_flow.*)
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

say "machine"
(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true) | tee -a "$LOG"
timeout 60 "$PY" -m pairedge.cli doctor 2>&1 | tee -a "$LOG"

say "tests"
timeout 150 "$PY" -m pytest -q -p no:cacheprovider -rs --junitxml="$RES/gpu_check_pytest.xml" \
  tests/gpu tests/runtime/test_rt_flow_reference.py 2>&1 | tee -a "$LOG" || status=1

say "timing"
(cd benchmarks && timeout 120 "$PY" bench_gpu_flow.py --frames 50) 2>&1 | tee -a "$LOG" || status=1

say "exit status $status"
if [ -n "${OUT:-}" ]; then
  cp "$LOG" "$RES/gpu_check_pytest.xml" "$OUT/" 2>/dev/null || true
  cp "$RES"/bench_gpu_flow.* "$OUT/" 2>/dev/null || true
fi
exit $status
