"""The CUDA kernels executed on the emulated device (HIP-CPU on the CPU): agreement and cost. EMULATED, not a
GPU.

    python benchmarks/bench_emulated_cuda.py [--data ../shared/data] [--frames 30]     # about a minute

1. **Build**: g++ time of ``lk.cu`` and ``pool.cu`` with HIP-CPU into fresh shared libraries (an empty cache
   folder), and the time to load them from the disk cache afterwards.
2. **Kernels**: every kernel against its numpy twin (:mod:`pairedge.runtime.flow.cuda.twins`) at 1 x 1,
   1 x 23, 19 x 1, 17 x 33, 37 x 50 and 120 x 161: the largest absolute difference and how many elements
   differ.
3. **Whole flow**: ``flow="cuda"`` on the emulated device against ``flow="reference"`` at scale 0.5 on the six
   Sintel scenes (frame 2 -> 3) and the first ``--frames`` PETS frames (the dense field, the fused pooled sums
   against the dense path's, the background grid), with the time per frame of both (one thread each, median).
4. **pairedge run**: ``PAIREDGE_CUDA_EMULATION=hip-cpu pairedge run vtest.avi --detections gt.txt --flow
   cuda`` against ``--flow reference`` on the first ``--frames`` PETS frames: whether every frame's
   interactions are identical, and the wall time of each command.

Writes ``benchmarks/results/bench_emulated_cuda.json`` and ``.md``. Exits with status 2 and the reason when
the emulated device cannot be built here (no HIP-CPU, g++ or TBB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write
from bench_runtime import machine
from pairedge.apps.probe import emulation_skip_reason
from pairedge.core.features.flowpool import flow_moments, pool_rects
from pairedge.gpu.cuda.emulated.device import EmulatedDevice
from pairedge.runtime.flow import get_flow_backend
from pairedge.runtime.flow.cuda.kernels import kernel_source
from pairedge.runtime.flow.cuda.twins import CASES, KernelRunner, compare, load_flow_kernels
from pairedge.runtime.flow.pooling import PoolRequest

HERE = Path(__file__).resolve().parent
SHAPES = [(1, 1), (1, 23), (19, 1), (17, 33), (37, 50), (120, 161)]
SINTEL = [f"{p}/{d}" for p in ("clean", "final") for d in ("easy", "medium", "hard")]


def build() -> dict[str, Any]:
    """Fresh g++ builds (an empty cache) per kernel file, then the load from the disk cache."""
    from pairedge.gpu.cuda.emulated import build as builder
    from pairedge.gpu.cuda.emulated.toolchain import find_toolchain

    toolchain = find_toolchain()[0]
    assert toolchain is not None
    out: dict[str, Any] = {"toolchain": toolchain.describe(), "flags": " ".join(builder.FLAGS + builder.LIBS)}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAIREDGE_CACHE_DIR"] = tmp
        for name in ("lk.cu", "pool.cu"):
            out[f"{name} g++ s"] = builder.build_library(name, kernel_source(name), toolchain)[2]
        start = time.perf_counter()
        load_flow_kernels(EmulatedDevice())
        out["load from disk cache s"] = time.perf_counter() - start
        del os.environ["PAIREDGE_CACHE_DIR"]
    return out


def kernels() -> list[dict[str, Any]]:
    device = EmulatedDevice()
    runner = KernelRunner(device, load_flow_kernels(device))
    rows = []
    for name in CASES:
        worst, differ, total, rel = 0.0, 0, 0, 0.0
        for shape in SHAPES:
            mark = device.mark()
            result, got, want = compare(runner, name, *shape, seed=sum(shape))
            device.release(mark)
            worst, differ, total = max(worst, result.max_abs), differ + result.mismatches, total + result.size
            scale = np.maximum(np.abs(want.astype(np.float64)), 1e-300)
            rel = max(rel, float((np.abs(got - want) / scale).max()) if got.size else 0.0)
        rows.append(
            {"kernel": name, "max_abs": worst, "max_rel": rel, "differing": differ, "elements": total}
        )
    device.close()
    return rows


def _timed(fn: Any, *args: Any) -> tuple[Any, float]:
    """``fn(*args)`` (an array result copied: backends reuse their output buffer) and its milliseconds."""
    start = time.perf_counter()
    out = fn(*args)
    ms = (time.perf_counter() - start) * 1e3
    return (out.copy() if isinstance(out, np.ndarray) else out), ms


def sintel(data: Path, cuda: Any, ref: Any) -> list[dict[str, Any]]:
    rows = []
    for scene in SINTEL:
        a, b = (
            cv2.imread(str(data / "sintel" / scene / f"frame_000{k}.png"), cv2.IMREAD_GRAYSCALE)
            for k in (2, 3)
        )
        cuda.compute(a, b)  # sizes the buffers, captures the graphs
        got, ms_cuda = _timed(cuda.compute, a, b)
        want, ms_ref = _timed(ref.compute, a, b)
        diff = np.abs(got - want)
        rows.append(
            {
                "scene": scene,
                "shape": list(got.shape[:2]),
                "max_abs_px": float(diff.max()),
                "differing": int((diff > 0).sum()),
                "elements": diff.size,
                "emulated_ms": ms_cuda,
                "reference_ms": ms_ref,
            }
        )
    return rows


def pets(data: Path, cuda: Any, ref: Any, n: int) -> dict[str, Any]:
    gt = np.loadtxt(data / "pets09_s2l1" / "mot15" / "gt" / "gt.txt", delimiter=",")
    cap = cv2.VideoCapture(str(data / "pets09_s2l1" / "vtest.avi"))
    frames = [cuda.resize(cv2.cvtColor(cap.read()[1], cv2.COLOR_BGR2GRAY), 0).copy() for _ in range(n)]
    cap.release()
    worst, differ, rel, grid_equal, t_cuda, t_ref, t_pool = 0.0, 0, 0.0, True, [], [], []
    for k in range(1, n):
        prev, cur = frames[k - 1], frames[k]
        dense, ms = _timed(cuda.compute_scaled, prev, cur)
        t_cuda.append(ms)
        want, ms = _timed(ref.compute_scaled, prev, cur)
        t_ref.append(ms)
        worst, differ = max(worst, float(np.abs(dense - want).max())), differ + int((dense != want).sum())
        boxes = gt[gt[:, 0] == k + 1][:, 2:6]
        request = PoolRequest(boxes, (0.15, 0.05), 8)
        pooled, ms = _timed(cuda.compute_pooled, prev, cur, request)
        t_pool.append(ms)
        sums = flow_moments(dense, pool_rects(boxes, cuda.scale, dense.shape[:2], request.inset))
        rel = max(rel, float((np.abs(pooled.moments - sums) / np.maximum(np.abs(sums), 1e-12)).max()))
        grid_equal = grid_equal and bool(np.array_equal(pooled.grid, dense[4::8, 4::8]))
    return {
        "frames": n,
        "shape": list(frames[0].shape),
        "dense_max_abs_px": worst,
        "dense_differing": differ,
        "pooled_sums_max_rel": rel,
        "grid_equal": grid_equal,
        "emulated_ms_p50": float(np.median(t_cuda)),
        "emulated_pooled_ms_p50": float(np.median(t_pool)),
        "reference_ms_p50": float(np.median(t_ref)),
    }


def cli(data: Path, n: int) -> dict[str, Any]:
    pets_dir = data / "pets09_s2l1"
    out: dict[str, Any] = {}
    records = {}
    with tempfile.TemporaryDirectory() as tmp:
        for flow in ("reference", "cuda"):
            env = {**os.environ, "PAIREDGE_CUDA_EMULATION": "hip-cpu"} if flow == "cuda" else dict(os.environ)
            cmd = [
                sys.executable,
                "-m",
                "pairedge.apps.cli",
                "run",
                str(pets_dir / "vtest.avi"),
                "--detections",
                str(pets_dir / "mot15" / "gt" / "gt.txt"),
                "--flow",
                flow,
                "--max-frames",
                str(n),
                "--no-video",
                "--out",
                f"{tmp}/{flow}",
            ]
            start = time.perf_counter()
            run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            wall = time.perf_counter() - start
            if run.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stdout}\n{run.stderr}")
            lines = Path(f"{tmp}/{flow}/results.jsonl").read_text().splitlines()
            records[flow] = [json.loads(line)["interactions"] for line in lines[1:]]
            summary = json.loads(Path(f"{tmp}/{flow}/summary.json").read_text())
            out[flow] = {
                "wall_s": wall,
                "flow_ms_p50": summary["latency_ms"]["flow"]["p50"],
                "interacting_pair_frames": summary["interacting"],
                "pipeline_flow": summary["pipeline"]["flow"],
                "stderr_says_emulated": "EMULATED" in run.stderr,
            }
    out["identical_interactions"] = records["cuda"] == records["reference"]
    out["frames"] = n
    return out


def markdown(res: dict[str, Any]) -> str:
    b = res["build"]
    lines = [
        "# CUDA kernels on the EMULATED device (HIP-CPU on the CPU; not a GPU)",
        "",
        f"Machine: {res['machine']}",
        "",
        "`python benchmarks/bench_emulated_cuda.py`. The kernels are the "
        "unmodified `lk.cu` / `pool.cu`; timings are CPU emulation (blocks on TBB threads, "
        f"{os.cpu_count()} CPUs here; the numpy reference on one), never GPU timings.",
        "",
        f"Build ({b['toolchain']}; `{b['flags']}`): lk.cu {b['lk.cu g++ s']:.1f} s, pool.cu "
        f"{b['pool.cu g++ s']:.1f} s of g++ into an empty cache; loading both from the disk cache "
        f"{b['load from disk cache s']:.3f} s.",
        "",
        "## Every kernel against its numpy twin (max over 1x1, 1x23, 19x1, 17x33, 37x50, 120x161)",
        "",
        "| kernel(s) | max abs difference | max rel difference | differing elements |",
        "|---|---:|---:|---:|",
    ]
    for r in res["kernels"]:
        lines.append(
            f"| {r['kernel']} | {r['max_abs']:.3g} | {r['max_rel']:.3g} | {r['differing']} of "
            f"{r['elements']} |"
        )
    if "sintel" in res:
        lines += [
            "",
            '## Whole flow, emulated `flow="cuda"` vs `flow="reference"`, scale 0.5',
            "",
            "| Sintel scene | flow size | max abs px | differing | emulated ms | reference ms |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for r in res["sintel"]:
            lines.append(
                f"| {r['scene']} | {r['shape'][1]}x{r['shape'][0]} | {r['max_abs_px']:.3g} | "
                f"{r['differing']} of {r['elements']} | {r['emulated_ms']:.0f} | {r['reference_ms']:.0f} |"
            )
        p = res["pets"]
        lines += [
            "",
            f"PETS, first {p['frames']} frames at {p['shape'][1]}x{p['shape'][0]}: dense field max abs "
            f"difference {p['dense_max_abs_px']:.3g} px ({p['dense_differing']} elements differ); fused "
            f"pooled sums vs the dense path's: max relative difference {p['pooled_sums_max_rel']:.3g}; "
            f"background grid identical: {p['grid_equal']}; per frame (median) emulated "
            f"{p['emulated_ms_p50']:.0f} ms dense / {p['emulated_pooled_ms_p50']:.0f} ms pooled, reference "
            f"{p['reference_ms_p50']:.0f} ms.",
        ]
        c = res["cli"]
        lines += [
            "",
            f"## `pairedge run vtest.avi --detections gt.txt`, first {c['frames']} PETS frames",
            "",
            "| command | wall s (process) | flow ms p50 | interacting pair-frames |",
            "|---|---:|---:|---:|",
            f"| `--flow reference` | {c['reference']['wall_s']:.1f} | {c['reference']['flow_ms_p50']:.1f} | "
            f"{c['reference']['interacting_pair_frames']} |",
            f"| `PAIREDGE_CUDA_EMULATION=hip-cpu ... --flow cuda` | {c['cuda']['wall_s']:.1f} | "
            f"{c['cuda']['flow_ms_p50']:.1f} | {c['cuda']['interacting_pair_frames']} |",
            "",
            f"Identical interactions on every frame: **{c['identical_interactions']}**; the emulated run's "
            f"stderr says EMULATED: {c['cuda']['stderr_says_emulated']}; its summary's flow: "
            f"`{c['cuda']['pipeline_flow']}`.",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    reason = emulation_skip_reason()
    if reason is not None:
        print(f"the emulated CUDA device is not usable here: {reason}")
        return 2
    cv2.setNumThreads(1)
    res: dict[str, Any] = {"machine": machine(), "build": build(), "kernels": kernels()}
    if args.data.is_dir():
        cuda = get_flow_backend("cuda", scale=0.5, api="hip-cpu")
        ref = get_flow_backend("reference", scale=0.5)
        res["sintel"], res["pets"] = sintel(args.data, cuda, ref), pets(args.data, cuda, ref, args.frames)
        cuda.close()
        res["cli"] = cli(args.data, args.frames)
    else:
        print(f"no data at {args.data}: the whole-flow and pairedge-run sections are skipped")
    text = markdown(res)
    write("bench_emulated_cuda", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
