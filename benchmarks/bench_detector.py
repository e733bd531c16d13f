"""Person detector on PETS 2009 S2.L1 against MOT15 ``gt.txt``: recall / precision at IoU 0.5, ms per frame.

Runs a detector (OpenCV's HOG default, or ``--detector MODEL.onnx``) on every ``--every``-th frame of
``vtest.avi`` (default 1: all 795), with OpenCV and ONNX Runtime on one thread. Detections are matched to the
ground-truth boxes of the same frame by Hungarian assignment on IoU >= 0.5 (``_matching.match_to_truth``);
recall = matched truth boxes / truth boxes, precision = matched detections / detections. The ground truth
annotates everyone in view, also people partly hidden or at the image border, so recall is against all of
them. Writes ``benchmarks/results/bench_detector.json`` / ``.md``::

    python benchmarks/bench_detector.py                 # needs OpenCV < 5 for HOG
    python benchmarks/bench_detector.py --every 10      # a quicker subsample
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _matching import match_to_truth  # noqa: E402

PETS = HERE.parent.parent / "shared" / "data" / "pets09_s2l1"


def measure(detector_spec: str, every: int, max_frames: int | None) -> dict:
    import cv2
    from pairedge.runtime.detectors import open_detector

    cv2.setNumThreads(1)
    gt = np.loadtxt(PETS / "mot15" / "gt" / "gt.txt", delimiter=",")
    cap = cv2.VideoCapture(str(PETS / "vtest.avi"))
    tp = n_pred = n_truth = 0
    times: list[float] = []
    with open_detector(detector_spec) as det:
        describe = det.describe()
        index = -1
        while True:
            ok, frame = cap.read()
            index += 1
            if not ok or (max_frames is not None and index >= max_frames):
                break
            if index % every:
                continue
            start = time.perf_counter()
            found = det.detect(frame)
            times.append(time.perf_counter() - start)
            truth = gt[gt[:, 0] == index + 1]  # MOT frames are 1-based
            matched = match_to_truth(found.boxes, truth[:, 2:6], truth[:, 1].astype(np.int64))
            tp += int((matched >= 0).sum())
            n_pred += len(found)
            n_truth += len(truth)
    cap.release()
    ms = 1000 * np.array(times)
    return {
        "detector": describe,
        "frames": len(times),
        "every": every,
        "truth_boxes": n_truth,
        "detections": n_pred,
        "matched": tp,
        "recall": tp / max(n_truth, 1),
        "precision": tp / max(n_pred, 1),
        "ms_per_frame_mean": float(ms.mean()),
        "ms_per_frame_p50": float(np.percentile(ms, 50)),
        "ms_per_frame_p99": float(np.percentile(ms, 99)),
        "threads": 1,
        "opencv": cv2.__version__,
        "cpu": platform.processor() or platform.machine(),
    }


def markdown(r: dict) -> str:
    return "\n".join(
        [
            "# Person detector on PETS 2009 S2.L1 vs MOT15 gt.txt (IoU 0.5, Hungarian)",
            "",
            f"Detector: {r['detector']}",
            "",
            "| frames | truth boxes | detections | recall | precision | ms/frame mean | p50 | p99 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
            f"| {r['frames']} (every {r['every']}) | {r['truth_boxes']} | {r['detections']} | "
            f"{r['recall']:.3f} | "
            f"{r['precision']:.3f} | {r['ms_per_frame_mean']:.1f} | {r['ms_per_frame_p50']:.1f} | "
            f"{r['ms_per_frame_p99']:.1f} |",
            "",
            f"One thread (cv2.setNumThreads(1)), OpenCV {r['opencv']}, {r['cpu']}. "
            "Command: `python benchmarks/bench_detector.py`.",
            "",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--detector", default="hog", help="'hog' or an .onnx detector")
    ap.add_argument("--every", type=int, default=1, help="use every N-th frame (1: all 795)")
    ap.add_argument("--max-frames", type=int, default=None)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    if not PETS.is_dir():
        raise SystemExit(f"PETS data not found at {PETS}")
    args.out.mkdir(parents=True, exist_ok=True)
    r = measure(args.detector, max(1, args.every), args.max_frames)
    (args.out / "bench_detector.json").write_text(json.dumps(r, indent=2) + "\n")
    (args.out / "bench_detector.md").write_text(markdown(r))
    print(markdown(r))


if __name__ == "__main__":
    main()
