"""Speed of the scene simulator on one CPU core: frames per second, rendering alone and with video encoding.

Cases: ``static`` at 640 x 480 with 10 people (target: at least 100 frames/s rendering on one core), the
``panorama`` preset at 3760 x 480 with 30 people, and, for reference, ``moving`` (424 x 240) and ``crowd``
(960 x 540, 80 people). "Rendering" is the whole in-memory API (``Scene.next_frame``: world step, drawing,
boxes, labels, detector noise); "with encoding" adds writing each frame to an mp4v ``cv2.VideoWriter``.
The process is pinned to one core (where the OS allows it), OpenCV uses one thread and BLAS one thread.

Writes ``benchmarks/results/bench_sim.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_sim.py                # about a minute
    python benchmarks/bench_sim.py --frames 100
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from pairedge.measure.sim import Scene, get_preset  # noqa: E402
from pairedge.measure.sim.config import with_people  # noqa: E402

HERE = Path(__file__).resolve().parent
CASES = (("static", 10), ("panorama", 30), ("moving", 7), ("crowd", 80))


def pin_one_core() -> str:
    """Restrict this process to one CPU (Linux); returns a description."""
    if hasattr(os, "sched_setaffinity"):
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    return "not pinned (no sched_setaffinity)"


def run_case(name: str, people: int, frames: int, seed: int, encode: bool) -> dict[str, Any]:
    cfg = with_people(get_preset(name), people)
    t0 = time.perf_counter()
    scene = Scene(cfg, seed)
    setup = time.perf_counter() - t0
    w, h = scene.size
    writer = None
    with tempfile.TemporaryDirectory() as tmp:
        if encode:
            writer = cv2.VideoWriter(
                str(Path(tmp) / "v.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), scene.fps, (w, h)
            )
        for _ in range(5):  # warm-up
            f = scene.next_frame()
            if writer is not None:
                writer.write(f.image)
        times, visible = [], []
        for _ in range(frames):
            start = time.perf_counter()
            f = scene.next_frame()
            if writer is not None:
                writer.write(f.image)
            times.append(time.perf_counter() - start)
            visible.append(len(f.truth))
        if writer is not None:
            writer.release()
    med = statistics.median(times)
    return {
        "preset": name,
        "size": f"{w}x{h}",
        "people": people,
        "encode": encode,
        "frames": frames,
        "setup_s": setup,
        "median_ms": 1e3 * med,
        "p90_ms": 1e3 * float(np.percentile(times, 90)),
        "fps": 1.0 / med,
        "mean_fps": frames / sum(times),
        "visible_mean": float(np.mean(visible)),
    }


def markdown(results: list[dict[str, Any]], env: dict[str, Any]) -> str:
    lines = [
        "# Scene simulator speed (one CPU core)",
        "",
        f"Machine: {env['machine']}, Python {env['python']}, numpy {env['numpy']}, OpenCV {env['opencv']}, "
        f"{env['pinning']}, 1 OpenCV thread. Command: `{env['command']}`. {env['cpus']} CPUs, load average "
        f"{env['load_average_1min']:.1f} when the run started (other jobs share the machine: a higher load "
        "means slower, noisier numbers).",
        "",
        "Rendering = `Scene.next_frame()` (world step, drawing, tight boxes, labels, detector noise);",
        "with encoding = plus `cv2.VideoWriter` (mp4v). Median over the frames after 5 warm-up frames.",
        "",
        "| preset | size | people (visible, mean) | encoding | median ms/frame | p90 ms | frames/s (median) "
        "| setup s |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['preset']} | {r['size']} | {r['people']} ({r['visible_mean']:.1f}) | "
            f"{'yes' if r['encode'] else 'no'} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | {r['fps']:.0f} | "
            f"{r['setup_s']:.2f} |"
        )
    target = next(r for r in results if r["preset"] == "static" and not r["encode"])
    verdict = "met" if target["fps"] >= 100 else "NOT met"
    lines += [
        "",
        f"Target (>= 100 frames/s rendering at 640 x 480 with 10 people, one core): {verdict} "
        f"({target['fps']:.0f} frames/s).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=200, help="timed frames per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    env = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "opencv": cv2.__version__,
        "pinning": pin_one_core(),
        "command": f"python benchmarks/bench_sim.py --frames {args.frames}",
        "cpus": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    results = []
    for name, people in CASES:
        for encode in (False, True):
            r = run_case(name, people, args.frames, args.seed, encode)
            print(
                f"{name:9s} {r['size']:9s} people {people:3d} encode {encode!s:5s} "
                f"{r['median_ms']:7.2f} ms/frame  {r['fps']:6.0f} frames/s"
            )
            results.append(r)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_sim.json").write_text(json.dumps({"environment": env, "results": results}, indent=2))
    (args.out / "bench_sim.md").write_text(markdown(results, env))
    print(f"wrote {args.out / 'bench_sim.json'} and .md")


if __name__ == "__main__":
    main()
