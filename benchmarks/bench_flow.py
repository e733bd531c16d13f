"""Optical-flow accuracy against cost, per flow backend and setting, on real data.

For every flow setting (``--flows``, ``backend:preset:scale``):

1. **MPI-Sintel** (1024 x 436, ``sintel/{clean,final}/{easy,medium,hard}``): mean end-point error of the
   flow from frame 2 to frame 3 against the ground truth (pixels whose truth is unknown or marked invalid
   are ignored; the flow is resized to full resolution and its vectors divided by the scale, as the
   features read it), and the same for zero flow as the baseline.
2. **PETS 2009** (768 x 576, real people walking): per ground-truth person and frame pair, the error of the
   median flow inside the inner box the ``pairedge`` features pool against the box-centre displacement (the
   check of ``bench_pets.py``), median over people that move more than 1 px.
3. **Cost**: milliseconds per frame of the flow alone (``FlowStream.push``: grey conversion, resize and the
   flow) at 640 x 480 on the runtime benchmark's textured scene (10 people), single thread; median of
   ``--frames`` frames after a warm-up.

The table is what the runtime's default (DIS ``fast`` at scale 0.5) is chosen from: the error each setting
removes against what it costs per frame.

Writes ``benchmarks/results/bench_flow.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_flow.py                    # data in ../shared/data, about 3 minutes
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write
from bench_pets import box_flow_errors
from bench_runtime import FlowSetting, flow_label, machine, parse_flows
from pairedge.apps.bench.measure import boxes_scene
from pairedge.core.io.flo import endpoint_error, read_flo
from pairedge.runtime import FlowConfig
from pairedge.runtime.flow import FlowStream, available_flow_backends, get_flow_backend

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data"
FLOWS = (
    "dis:ultrafast:0.5,dis:fast:0.5,dis:medium:0.5,dis:ultrafast:1.0,dis:fast:1.0,dis:medium:1.0,"
    "farneback:-:0.5,farneback:-:1.0,reference:-:0.5,cuda:-:0.5"
)
PASSES, LEVELS = ("clean", "final"), ("easy", "medium", "hard")


def backend_of(flow: FlowSetting) -> Any:
    """A flow backend with the setting's preset (DIS) and scale."""
    options: dict[str, Any] = {"scale": flow.scale or 1.0}
    if flow.backend == "dis":
        options["preset"] = flow.preset or "fast"
    return get_flow_backend(flow.backend, **options)


def sintel_errors(root: Path, flow: FlowSetting) -> dict[str, float]:
    """Mean EPE per ``pass/level`` (and for zero flow under ``zero/...``)."""
    out: dict[str, float] = {}
    backend = backend_of(flow)
    for p in PASSES:
        for level in LEVELS:
            base = root / p / level
            a = cv2.imread(str(base / "frame_0002.png"), cv2.IMREAD_GRAYSCALE)
            b = cv2.imread(str(base / "frame_0003.png"), cv2.IMREAD_GRAYSCALE)
            truth = read_flo(base / "gt" / "frame_0002.flo")
            invalid = cv2.imread(str(base / "gt" / "invalid" / "frame_0002.png"), cv2.IMREAD_GRAYSCALE)
            valid = None if invalid is None else invalid == 0
            field = backend.compute(a, b)
            full = cv2.resize(field, (a.shape[1], a.shape[0]), interpolation=cv2.INTER_LINEAR) / backend.scale
            out[f"{p}/{level}"] = endpoint_error(full, truth, valid)
            out[f"zero/{p}/{level}"] = endpoint_error(np.zeros_like(truth), truth, valid)
    return out


def flow_ms(flow: FlowSetting, frames: int, warmup: int = 10) -> float:
    """Median milliseconds of ``FlowStream.push`` at 640 x 480, 10 textured people."""
    stream = FlowStream(backend_of(flow))
    times = []
    for i, (image, _dets, _t) in enumerate(boxes_scene(10, frames + warmup)):
        t0 = time.perf_counter()
        stream.push(image)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Optical flow: accuracy against cost",
        "",
        f"Machine: {res['machine']}",
        "",
        "`python benchmarks/bench_flow.py`. Sintel: mean end-point error (px) of frame 2 -> 3, full "
        "resolution, invalid pixels ignored. PETS: median error (px) of the median flow in the pooled inner "
        "box against the ground-truth box-centre displacement, people moving > 1 px. Cost: median ms per "
        "frame of the flow alone at 640 x 480 (grey, resize, flow), one thread.",
        "",
        "| flow | ms / frame | "
        + " | ".join(f"Sintel {p}/{lv}" for p in PASSES for lv in LEVELS)
        + " | Sintel mean | PETS moving people, median / p90 |",
        "|---|---:|" + "---:|" * (len(PASSES) * len(LEVELS) + 2),
    ]
    first = res["results"][0]["sintel"]
    zero = [first[f"zero/{p}/{lv}"] for p in PASSES for lv in LEVELS]
    lines.append(
        "| zero flow | 0 | "
        + " | ".join(f"{v:.2f}" for v in zero)
        + f" | {np.mean(zero):.2f} | {res['results'][0]['pets']['displacement_moving']['median']:.2f} / "
        f"{res['results'][0]['pets']['displacement_moving']['p90']:.2f} |"
    )
    for r in res["results"]:
        epe = [r["sintel"][f"{p}/{lv}"] for p in PASSES for lv in LEVELS]
        pets = r["pets"]["moving_inner"]
        default = " (runtime default)" if r["flow"] == res["default"] else ""
        lines.append(
            f"| {r['flow']}{default} | {r['ms']:.2f} | "
            + " | ".join(f"{v:.2f}" for v in epe)
            + f" | {np.mean(epe):.2f} | {pets['median']:.2f} / {pets['p90']:.2f} |"
        )
    for label, reason in res.get("skipped", {}).items():
        lines.append(f"| {label} | not run here: {reason} |" + " |" * (len(PASSES) * len(LEVELS) + 2))
    lines += [
        "",
        "`reference` is the CPU (numpy) reference of the CUDA flow (`pairedge.runtime.flow.lk_reference`, "
        "robust pyramidal Lucas-Kanade with propagation); its parameters were chosen on the Sintel *clean* "
        "pass only, so Sintel *final* and PETS are held out for it. `cuda` is the same algorithm on an "
        "NVIDIA GPU (its cost here is wall time of `FlowStream.push`, upload and download of the dense "
        "field included).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the shared data folder")
    ap.add_argument("--flows", default=FLOWS, help="backend:preset:scale list")
    ap.add_argument("--frames", type=int, default=60, help="frames timed per setting")
    ap.add_argument("--pets-frames", type=int, default=None, help="limit the PETS check (default: all 795)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    sintel, pets = args.data / "sintel", args.data / "pets09_s2l1"
    for folder in (sintel, pets):
        if not folder.is_dir():
            raise SystemExit(f"{folder} not found; pass the shared data folder")
    # the runtime's default for the pairedge spec: backend "auto" -> DIS, preset "fast", the spec's scale 0.5
    default = flow_label(FlowSetting("dis", FlowConfig("fast", 0.5)))
    res: dict[str, Any] = {"machine": machine(), "default": default, "results": []}
    res["skipped"] = {}
    for flow in parse_flows(args.flows):
        reason = available_flow_backends().get(flow.backend)
        if reason is not None:  # e.g. cuda without a GPU: say so in the report instead of failing
            res["skipped"][flow_label(flow)] = reason
            print(f"skipped {flow_label(flow)}: {reason}")
            continue
        t0 = time.perf_counter()
        row = {
            "flow": flow_label(flow),
            "ms": flow_ms(flow, args.frames),
            "sintel": sintel_errors(sintel, flow),
        }
        row["pets"] = box_flow_errors(
            pets / "vtest.avi", pets / "mot15" / "gt" / "gt.txt", flow, args.pets_frames
        )
        checked = row["pets"]
        res["results"].append(row)
        print(
            f"{row['flow']}: {row['ms']:.2f} ms, PETS {checked['moving_inner']['median']:.2f} px "
            f"({time.perf_counter() - t0:.0f} s)"
        )
    text = markdown(res)
    write("bench_flow", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
