#!/usr/bin/env bash
# The first real-device run of pairedge in one command, for a Jetson with JetPack 6 (TensorRT 10.3) or 7; it
# also runs, end to end, on any machine with ONNX Runtime (CPU), where each TensorRT step is skipped with the
# reason (recorded in status.tsv and report.md, never counted as a pass).
#
#   bash benchmarks/jetson/run_all.sh                 # the bundled default model
#   MODEL=/path/to/model_folder bash benchmarks/jetson/run_all.sh
#
# On a copy of the model folder it: records `pairedge doctor`; makes the fp16 and Q/DQ int8 ONNX files with
# `pairedge calibrate` (the README's arguments) into a second folder when the model folder lacks them (an
# int8 file the folder ships, e.g. the bundled model's quantization-aware one, is checked as it is, and the
# calibrated int8 beside it as "int8-ptq"); packs a HELD-OUT simulator clip (seeds no training, calibration
# or choice used); for every variant: lints (`pairedge check`), builds the engines (`pairedge build`, one
# shared timing cache; TensorRT only) and replays the pack (`pairedge parity check`) on ONNX Runtime CPU and
# on the native TensorRT backend; then benchmarks every precision (`pairedge bench`) on held-out scenes and
# writes one Markdown report, report.md, whose first table says PASS / FAIL per precision.
# Exit code: 0 when every step that ran succeeded (every parity check and bench gate PASS), else 1.
#
# Settings (environment variables; defaults in brackets):
#   MODEL         model folder [the bundled model]         OUT        run folder [benchmarks/results/jetson/HOST-STAMP]
#   PYTHON        [python3]                                PAIREDGE   the CLI [pairedge]
#   PROFILE       engine pair-count profile [1,64,512]     WORKSPACE  TensorRT workspace MiB [512]
#   CAL_SCENES    calibration scenes [static:0-3,moving:0-3: the README's; training seeds]
#   CAL_FRAMES    frames per calibration scene [calibrate's default]
#   PACK_SCENE    parity clip [noisy:5000: held out]       PACK_BOXES truth | detections [detections]
#   FRAMES        parity clip length in frames [60]
#   BENCH_DATA    bench's held-out sources [sim:static+moving+noisy:seeds=5001:frames=150]
#   BENCH_REPEATS timed classifier calls per pair count [100]   BENCH_PEOPLE crowd sizes [2,10,30,100]
# A quick run (a few minutes on a laptop CPU; the test uses smaller still):
#   CAL_FRAMES=60 FRAMES=20 BENCH_DATA=sim:static:seeds=5001:frames=20 BENCH_REPEATS=10 BENCH_PEOPLE=10 bash benchmarks/jetson/run_all.sh
#
# NOT YET RUN ON A JETSON BY THE PAIREDGE DEVELOPERS: the TensorRT steps are written against the documented
# TensorRT 10.x API and tested over a fake TensorRT module (see README, "Deploying to a Jetson"); the ONNX
# Runtime steps run in the test suite (tests/benchmarks/test_jetson_script.py). Please send us report.md.
set -uo pipefail

PYTHON="${PYTHON:-python3}"
PAIREDGE="${PAIREDGE:-pairedge}"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT:-benchmarks/results/jetson/$(hostname)-${STAMP}}"
PROFILE="${PROFILE:-1,64,512}"
WORKSPACE="${WORKSPACE:-512}"
CAL_SCENES="${CAL_SCENES:-static:0-3,moving:0-3}"
CAL_FRAMES="${CAL_FRAMES:-}"
PACK_SCENE="${PACK_SCENE:-noisy:5000}"
PACK_BOXES="${PACK_BOXES:-detections}"
FRAMES="${FRAMES:-60}"
BENCH_DATA="${BENCH_DATA:-sim:static+moving+noisy:seeds=5001:frames=150}"
BENCH_REPEATS="${BENCH_REPEATS:-100}"
BENCH_PEOPLE="${BENCH_PEOPLE:-2,10,30,100}"
SOURCE="${MODEL:-$("$PYTHON" -c 'from pairedge.core.bundled import default_model_dir; print(default_model_dir())')}"
mkdir -p "$OUT/logs"
WORK="$OUT/model"
CAL="$OUT/calibrated"
rm -rf "$WORK" "$CAL" && cp -r "$SOURCE" "$WORK"
STATUS="$OUT/status.tsv"
: > "$STATUS"

step() {  # step NAME COMMAND...: run, log, record the exit code (a failing step does not stop the others)
    local name="$1"; shift
    echo "== $name: $*"
    "$@" > "$OUT/logs/$name.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$*" >> "$STATUS"
    tail -n 3 "$OUT/logs/$name.log"
    return 0
}

skip() {  # skip NAME REASON: a step that cannot run here, recorded with the reason (never as a pass)
    echo "== $1: SKIPPED ($2)"
    printf '%s\tskip\t%s\n' "$1" "$2" >> "$STATUS"
}

has() { [ -f "$1/stage1.$2.onnx" ] && [ -f "$1/stage2.$2.onnx" ]; }

# TensorRT and a GPU, as `pairedge doctor` sees them (empty: usable)
TRT_REASON="$("$PYTHON" -c 'from pairedge.apps.probe import gpu_skip_reason; print(gpu_skip_reason(need_tensorrt=True) or "")' 2>&1 | tail -n 1)"
BACKENDS="onnxruntime"
[ -z "$TRT_REASON" ] && BACKENDS="onnxruntime tensorrt"

step doctor "$PAIREDGE" doctor --json
cp "$OUT/logs/doctor.log" "$OUT/doctor.json"

if has "$WORK" fp16 && has "$WORK" int8; then
    skip calibrate "the model folder has stage{1,2}.fp16.onnx and stage{1,2}.int8.onnx"
else
    cal_args=(--scenes "$CAL_SCENES")
    [ -n "$CAL_FRAMES" ] && cal_args+=(--frames "$CAL_FRAMES")
    step calibrate "$PAIREDGE" calibrate "$WORK" --out "$CAL" "${cal_args[@]}"
fi

# variant -> "folder precision": fp32 / fp16 / int8 from the model folder where it has them, else calibrated
declare -A VARIANT
VARIANT[fp32]="$WORK fp32"
for p in fp16 int8; do
    if has "$WORK" "$p"; then VARIANT[$p]="$WORK $p"; else VARIANT[$p]="$CAL $p"; fi
done
NAMES="fp32 fp16 int8"
if has "$WORK" int8 && [ -d "$CAL" ]; then VARIANT[int8-ptq]="$CAL int8"; NAMES="$NAMES int8-ptq"; fi
: > "$OUT/variants.tsv"
for v in $NAMES; do printf '%s\t%s\n' "$v" "${VARIANT[$v]}" >> "$OUT/variants.tsv"; done  # for report.py

step parity-pack "$PAIREDGE" parity pack "$WORK" --out "$OUT/parity-pack.npz" --scene "$PACK_SCENE" \
    --frames "$FRAMES" --boxes "$PACK_BOXES"

for v in $NAMES; do
    read -r folder precision <<< "${VARIANT[$v]}"
    if [ "$precision" = fp32 ]; then files="$folder/stage1.onnx $folder/stage2.onnx"
    else files="$folder/stage1.$precision.onnx $folder/stage2.$precision.onnx"; fi
    # shellcheck disable=SC2086
    step "check-$v" "$PAIREDGE" check $files
    if [ -n "$TRT_REASON" ]; then
        skip "build-$v" "$TRT_REASON"
    else
        step "build-$v" "$PAIREDGE" build "$folder" --precision "$precision" --profile "$PROFILE" \
            --workspace "$WORKSPACE" --timing-cache "$OUT/timing.cache"
    fi
    for backend in onnxruntime tensorrt; do
        if [ "$backend" = tensorrt ] && [ -n "$TRT_REASON" ]; then
            skip "parity-$backend-$v" "$TRT_REASON"
            continue
        fi
        step "parity-$backend-$v" "$PAIREDGE" parity check "$OUT/parity-pack.npz" "$folder" --backend "$backend" \
            --precision "$precision" --json "$OUT/parity-$backend-$v.json" --md "$OUT/parity-$backend-$v.md"
    done
done

bench_args=(--data "$BENCH_DATA" --repeats "$BENCH_REPEATS" --people "$BENCH_PEOPLE" --backends "${BACKENDS// /,}")
[ -n "$TRT_REASON" ] && skip bench-tensorrt "$TRT_REASON"
shipped="fp32"
for p in fp16 int8; do has "$WORK" "$p" && shipped="$shipped,$p"; done
step bench "$PAIREDGE" bench "$WORK" --precisions "$shipped" "${bench_args[@]}" --out "$OUT/bench"
if [ -d "$CAL" ]; then
    step bench-calibrated "$PAIREDGE" bench "$CAL" --precisions fp32,fp16,int8 "${bench_args[@]}" \
        --out "$OUT/bench-calibrated"
fi
"$PYTHON" "$(dirname "$0")/report.py" "$OUT"
rc=$?
echo "report: $OUT/report.md"
exit "$rc"
