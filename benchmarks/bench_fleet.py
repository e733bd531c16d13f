"""Fleet evaluation wall time: N simulated logs evaluated serially, and on a local Ray cluster of 1 and 2
workers.

    python benchmarks/bench_fleet.py [--logs 8] [--frames 60]

Each log is a simulated scene (`static` and `moving`, held-out seeds 1000+) recorded as a ROS 2 log (MCAP,
camera images + the simulated detector's Detection2DArray, gold pairs beside it, as `pairedge simulate --bag`
lays it out) and evaluated by `pairedge eval`'s per-source task with the bundled model. Reports the wall time
of each executor, Ray's start-up time (measured
apart: `ray.init` before the run), the per-log overhead of Ray against the serial run with one worker
((ray_1 - local) / logs), the speed-up with two workers, and checks the pooled metrics are identical.
Writes benchmarks/results/bench_fleet.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from _train_bench import write
from pairedge.apps.evaluation.fleet_eval import evaluate_many
from pairedge.apps.evaluation.sources import parse_sources
from pairedge.apps.ros.write import write_log
from pairedge.measure.sim import simulate
from pairedge.measure.sim.output import write_scene
from pairedge.runtime.runner.run import resolve_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=8)
    parser.add_argument("--frames", type=int, default=60)
    args = parser.parse_args()
    import ray

    root = Path(tempfile.mkdtemp(prefix="bench_fleet_"))
    for k in range(args.logs):
        preset, seed = ("static", "moving")[k % 2], 1000 + k // 2
        write_scene(preset, seed, args.frames, root / f"robot{k}")
        frames = (
            (f.image, f.detections, f.timestamp) for f in simulate(preset, seed=seed, frames=args.frames)
        )
        write_log(frames, root / f"robot{k}" / "log", storage="mcap")
    sources = parse_sources(str(root))
    model = resolve_model(None)
    rows = []
    start = time.perf_counter()
    local = evaluate_many(model, sources, max_frames=args.frames)
    rows.append(
        {"executor": "local (serial)", "workers": 1, "startup_s": 0.0, "wall_s": time.perf_counter() - start}
    )
    reports = {"local": local}
    for workers in (1, 2):
        t0 = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
        t1 = time.perf_counter()
        result = evaluate_many(model, sources, max_frames=args.frames, executor="ray")
        t2 = time.perf_counter()
        ray.shutdown()
        reports[f"ray{workers}"] = result
        rows.append({"executor": "ray", "workers": workers, "startup_s": t1 - t0, "wall_s": t2 - t1})
    same = all(
        np.array_equal(r.report.confusion, local.report.confusion)
        and r.report.stage1 == local.report.stage1
        and r.report.per_source == local.report.per_source
        for r in reports.values()
    )
    overhead = (rows[1]["wall_s"] - rows[0]["wall_s"]) / args.logs
    speedup = rows[1]["wall_s"] / rows[2]["wall_s"]
    payload = {
        "logs": args.logs,
        "frames_per_log": args.frames,
        "rows": rows,
        "identical_metrics": same,
        "ray_overhead_per_log_s": overhead,
        "speedup_2_vs_1_workers": speedup,
        "summary": local.report.summary(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "ray": ray.__version__,
    }
    lines = [
        "# Fleet evaluation: serial vs Ray",
        "",
        f"{args.logs} simulated ROS 2 logs (MCAP) x {args.frames} frames (static/moving, seeds 1000+), "
        f"bundled model, {os.cpu_count()} cores, Ray {ray.__version__}. `python benchmarks/bench_fleet.py "
        f"--logs {args.logs} --frames {args.frames}`",
        "",
        "| executor | workers | Ray start-up s | wall s (excl. start-up) |",
        "|---|---|---|---|",
        *(f"| {r['executor']} | {r['workers']} | {r['startup_s']:.2f} | {r['wall_s']:.2f} |" for r in rows),
        "",
        f"- Ray overhead per log (1 worker vs serial): {overhead:+.3f} s",
        f"- speed-up with 2 workers vs 1: {speedup:.2f}x",
        f"- pooled metrics identical across executors: {same}",
    ]
    write("bench_fleet", payload, "\n".join(lines) + "\n")
    shutil.rmtree(root, ignore_errors=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
