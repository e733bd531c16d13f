"""Detector exports read as their projects write them: layouts told apart, and the same boxes from every form
of one model on PETS 2009 S2.L1.

1. Every export in ``--exports DIR`` that ``tests/fixtures/detectors/signatures.json`` records (made by each
   project's own export code; not committed, see that folder's README) is opened as ``pairedge run
   --detector FILE`` opens it: the layout told apart and why, against the layout its project writes.
2. The bundled YOLOX-Nano in the forms a user meets, on every ``--every``-th frame of ``vtest.avi``: the raw
   export (shipped), YOLOX's own decoded export of the same weights (``--decoded FILE``:
   ``tools/export_onnx.py -n yolox-nano -c yolox_nano.pth --decode_in_inference``), the shipped fp16 copy, and
   ONNX Runtime's QDQ and dynamic quantizations of the raw file (made here); per form, the layout read, the
   boxes per frame, and for each confident box of the raw export (score >= 0.5) the distance (largest
   coordinate difference, px) to the nearest box of the form: median, 99th percentile, largest.

Writes ``benchmarks/results/bench_detector_layouts.json`` / ``.md``::

    python benchmarks/bench_detector_layouts.py [/path/to/pets09_s2l1] [--exports DIR] [--decoded FILE] \
        [--every 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "pets09_s2l1"
SIGNATURES = HERE.parent / "tests" / "fixtures" / "detectors" / "signatures.json"
sys.path.insert(0, str(HERE.parent / "tests" / "runtime" / "detectors"))


def exports_table(folder: Path) -> list[dict[str, Any]]:
    from pairedge.runtime.detectors import open_detector
    from test_layouts import EXPECTED

    rows = []
    for name, entry in sorted(json.loads(SIGNATURES.read_text())["exports"].items()):
        path = folder / str(entry.get("file") or "")
        if not entry.get("file") or not path.is_file():
            continue
        with open_detector(path) as det:
            kind, why = det.layout.kind, det.layout.reason
        rows.append(
            {
                "export": name,
                "project": entry["project"],
                "expected": EXPECTED[name],
                "read_as": kind,
                "why": why,
                "ok": kind == EXPECTED[name],
            }
        )
    return rows


def quantized(raw: Path, work: Path) -> dict[str, Path]:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    class Grey(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = 1

        def get_next(self) -> dict[str, np.ndarray] | None:
            self.left -= 1
            return {"images": np.full((1, 3, 416, 416), 114, np.float32)} if self.left >= 0 else None

    qdq, dyn = work / "yolox_nano.qdq.onnx", work / "yolox_nano.dynamic.onnx"
    quantize_static(str(raw), str(qdq), Grey(), quant_format=QuantFormat.QDQ)
    quantize_dynamic(str(raw), str(dyn), weight_type=QuantType.QUInt8)
    return {"ORT QDQ (static, 1 grey calibration frame)": qdq, "ORT dynamic (ConvInteger)": dyn}


def forms_table(video: Path, forms: dict[str, Path], every: int) -> list[dict[str, Any]]:
    from pairedge.runtime.detectors import open_detector

    detectors = {name: open_detector(path).activate() for name, path in forms.items()}
    try:
        ref = next(iter(detectors))
        stats = {n: {"frames": 0, "boxes": 0, "same_count": 0} for n in detectors}
        gaps: dict[str, list[float]] = {n: [] for n in detectors}
        cap = cv2.VideoCapture(str(video))
        index = -1
        while True:
            ok, image = cap.read()
            index += 1
            if not ok:
                break
            if index % every:
                continue
            base = detectors[ref].detect(image)
            for name, det in detectors.items():
                found = base if name == ref else det.detect(image)
                s = stats[name]
                s["frames"] += 1
                s["boxes"] += len(found)
                confident = found.boxes[found.scores >= 0.5]
                want = base.boxes[base.scores >= 0.5]
                s["same_count"] += int(len(confident) == len(want))
                for box in want:  # each confident raw-export box: its nearest box of this form (inf: none)
                    near = np.abs(found.boxes - box).max(axis=1).min() if len(found) else np.inf
                    gaps[name].append(float(near))
        cap.release()
        out = []
        for name in detectors:
            g = np.array(gaps[name]) if gaps[name] else np.zeros(1)
            found = np.isfinite(g)
            pct = np.percentile(g[found], [50, 99]).tolist() if found.any() else [None, None]
            out.append(
                {
                    "form": name,
                    "layout": detectors[name].layout.kind,
                    **stats[name],
                    "boxes_compared": len(g),
                    "boxes_with_a_twin": int(found.sum()),
                    "gap_px_p50": pct[0],
                    "gap_px_p99": pct[1],
                    "gap_px_max": float(g[found].max()) if found.any() else None,
                }
            )
        return out
    finally:
        for det in detectors.values():
            det.deactivate()


def markdown(res: dict[str, Any]) -> str:
    lines = ["# Detector exports read as their projects write them", "", f"`{res['command']}`", ""]
    if res["exports"]:
        lines += [
            "## Real exports (random weights; made by each project's export code)",
            "",
            "| export | project | its layout | read as | how it was told apart |",
            "|---|---|---|---|---|",
        ]
        for r in res["exports"]:
            mark = "" if r["ok"] else " (WRONG)"
            lines.append(
                f"| {r['export']} | {r['project']} | {r['expected']} | {r['read_as']}{mark} | {r['why']} |"
            )
    else:
        lines.append("No `--exports` folder: the real exports were not read (see tests/fixtures/detectors).")
    lines += [
        "",
        f"## YOLOX-Nano in every form on PETS S2.L1 (every {res['every']}th frame)",
        "",
        "| form | layout read | frames | boxes per frame | raw-export boxes with a twin | distance px p50 / "
        "p99 / "
        "max |",
        "|---|---|---:|---:|---:|---|",
    ]

    def px(v: float | None) -> str:
        return "-" if v is None else f"{v:.4f}"

    for r in res["forms"]:
        lines.append(
            f"| {r['form']} | {r['layout']} | {r['frames']} | {r['boxes'] / max(r['frames'], 1):.2f} | "
            f"{r['boxes_with_a_twin']} of {r['boxes_compared']} | {px(r['gap_px_p50'])} / "
            f"{px(r['gap_px_p99'])} "
            f"/ {px(r['gap_px_max'])} |"
        )
    lines += [
        "",
        "ONNX Runtime's quantizers keep the layout and the graph runs, but both quantized copies score every "
        "person near 0 (uint8 activations over YOLOX's 0-255 input): a quantized detector needs real "
        "calibration images and per-channel care, which pairedge does not do for detectors.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the pets09_s2l1 folder")
    ap.add_argument(
        "--exports", type=Path, default=None, help="a folder holding the exports signatures.json records"
    )
    ap.add_argument("--decoded", type=Path, default=None, help="YOLOX's decoded export of YOLOX-Nano")
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    if not (args.data / "vtest.avi").is_file():
        raise SystemExit(f"error: PETS S2.L1 not found at {args.data}; pass the pets09_s2l1 folder")
    for given in (args.exports, args.decoded):
        if given is not None and not given.exists():
            raise SystemExit(f"error: {given}: no such file or folder")
    if args.every < 1:
        raise SystemExit("error: --every: expected at least 1")
    from pairedge.runtime.detectors.bundled import bundled_detector

    bundled = bundled_detector()
    with tempfile.TemporaryDirectory() as tmp:
        forms = {"raw (shipped)": bundled.path("fp32")}
        if args.decoded is not None:
            forms["decoded (YOLOX's export, same weights)"] = args.decoded
        forms["fp16 (shipped)"] = bundled.path("fp16")
        forms.update(quantized(bundled.path("fp32"), Path(tmp)))
        res = {
            "command": " ".join(
                ["python benchmarks/bench_detector_layouts.py", *(sys.argv[1:] if argv is None else argv)]
            ),
            "every": args.every,
            "exports": exports_table(args.exports) if args.exports else [],
            "forms": forms_table(args.data / "vtest.avi", forms, args.every),
        }
    text = markdown(res)
    write("bench_detector_layouts", res, text, args.out)
    print(text)
    return 0 if all(r["ok"] for r in res["exports"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
