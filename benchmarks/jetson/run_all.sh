#!/usr/bin/env bash
# The first real-device run of pairedge in one command, for a Jetson with JetPack 6 (TensorRT 10.3) or 7.
#
#   bash benchmarks/jetson/run_all.sh                 # the bundled default model
#   MODEL=/path/to/model_folder bash benchmarks/jetson/run_all.sh
#
# On a copy of the model folder it: records `pairedge doctor`; makes the fp16 and Q/DQ int8 ONNX files
# (`pairedge calibrate`, unless the folder has them); for fp32, fp16 and int8: lints (`pairedge check`),
# builds the engines (`pairedge build`, one shared timing cache) and replays a parity pack through the native
# TensorRT backend (`pairedge parity check --backend tensorrt`); then benchmarks every precision on ONNX
# Runtime CPU and native TensorRT (`pairedge bench`) and writes one Markdown report, report.md.
#
# NOT RUN BY THE PAIREDGE DEVELOPERS: written against the documented TensorRT 10.x API and tested only over a
# fake TensorRT module (see README, "Deploying to a Jetson"). Please send us report.md.
set -uo pipefail

PYTHON="${PYTHON:-python3}"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT:-benchmarks/results/jetson/$(hostname)-${STAMP}}"
PROFILE="${PROFILE:-1,64,512}"
WORKSPACE="${WORKSPACE:-512}"
SOURCE="${MODEL:-$("$PYTHON" -c 'from pairedge.default_model import default_model_dir; print(default_model_dir())')}"
mkdir -p "$OUT/logs"
WORK="$OUT/model"
rm -rf "$WORK" && cp -r "$SOURCE" "$WORK"
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

step doctor pairedge doctor --json
cp "$OUT/logs/doctor.log" "$OUT/doctor.json"
if [ ! -f "$WORK/stage1.int8.onnx" ] || [ ! -f "$WORK/stage1.fp16.onnx" ]; then
    step calibrate pairedge calibrate "$WORK" --out "$WORK" --scenes "static:0-3,moving:0-3"
fi
step parity-pack pairedge parity pack "$WORK" --out "$OUT/parity-pack.npz" --scene static:0 --frames 60

for precision in fp32 fp16 int8; do
    if [ "$precision" = fp32 ]; then files="$WORK/stage1.onnx $WORK/stage2.onnx"
    else files="$WORK/stage1.$precision.onnx $WORK/stage2.$precision.onnx"; fi
    # shellcheck disable=SC2086
    step "check-$precision" pairedge check $files
    step "build-$precision" pairedge build "$WORK" --precision "$precision" --profile "$PROFILE" \
        --workspace "$WORKSPACE" --timing-cache "$OUT/timing.cache"
    step "parity-$precision" pairedge parity check "$OUT/parity-pack.npz" "$WORK" --backend tensorrt \
        --precision "$precision" --json "$OUT/parity-$precision.json" --md "$OUT/parity-$precision.md"
done

step bench pairedge bench "$WORK" --precisions fp32,fp16,int8 --backends ort-cpu,tensorrt --out "$OUT/bench"
"$PYTHON" "$(dirname "$0")/report.py" "$OUT"
echo "report: $OUT/report.md"
