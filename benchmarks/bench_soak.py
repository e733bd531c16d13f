"""Soak test of the streaming runtime (memory must stay flat) and cost of bounded work per frame.

1. **Soak**: ``--frames`` steps (default 100,000) of :meth:`Pipeline.step` on a cheap stream (96 x 72
   textured frames, 5 people drifting, DIS ``ultrafast`` flow at scale 0.5, the bundled default model or a
   ``--model``). The stream exercises every state the runtime keeps: each person's track id is renewed every
   300 frames (staggered, so tracks keep appearing and disappearing), every 1,000th frame starts 50 frames
   without ids (the built-in tracker assigns them), every 97th frame carries a NaN box (dropped and
   reported) and every 500th frame has no image (flow restarts). After ``--warmup`` frames the resident
   memory (``/proc/self/statm``) and the Python heap (``tracemalloc``) are sampled every 1,000 frames; the
   growth is the last sample minus the first, the slope a least-squares fit in KiB per 1,000 frames.
   Target: growth < 1 MiB. ``--top K`` prints the K allocation sites that grew most (to find a leak).
2. **Bounded work**: one step with 10, 100, 1,000 and 10,000 detections in a frame under the default
   ``max_people`` cap (100), and the peak Python heap of that step: the cost stays at that of 100 people.
3. **MOT reader** (``--mot-mb``, default 200, 0 to skip): a generated MOT file of that size read by
   :func:`pairedge.core.io.mot.read_mot` in a fresh subprocess: seconds and peak resident memory over the file
   size.

Writes ``benchmarks/results/bench_soak.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_soak.py                              # 100,000 frames, a few minutes
    python benchmarks/bench_soak.py --frames 20000 --mot-mb 20   # quick check
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import RESULTS, write
from pairedge.core.types import Detections
from pairedge.runtime import Pipeline, PipelineConfig
from pairedge.runtime.flow import get_flow_backend
from pairedge.runtime.memory import tune_allocator
from pairedge.runtime.runner.run import resolve_model

PAGE = os.sysconf("SC_PAGE_SIZE")
W, H, PEOPLE = 96, 72, 5
RENEW, TRACKER_EVERY, TRACKER_LEN, NAN_EVERY, NO_IMAGE_EVERY = 300, 1000, 50, 97, 500


def rss_mib() -> float:
    """Resident memory of this process, MiB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


class Stream:
    """The soak stream: cheap frames and detections that exercise every per-track state (see the
    docstring)."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        noise = rng.integers(0, 255, (H // 4, W // 4 + 8, 3), dtype=np.uint8)
        wide = cv2.GaussianBlur(cv2.resize(noise, (W + 32, H), interpolation=cv2.INTER_CUBIC), (5, 5), 1.2)
        self.images = [np.ascontiguousarray(wide[:, k : k + W]) for k in range(0, 32, 4)]
        self.start = np.column_stack([rng.uniform(0, W - 20, PEOPLE), rng.uniform(0, H - 50, PEOPLE)])
        self.velocity = rng.normal(0, 1.0, (PEOPLE, 2))

    def item(self, k: int) -> tuple[np.ndarray | None, Detections, float]:
        t = k / 30.0
        phase = (k % 400) - 200
        xy = np.clip(self.start + self.velocity * abs(phase) * 0.2, 0, [W - 20, H - 50])
        boxes = np.column_stack([xy, np.full(PEOPLE, 16.0), np.full(PEOPLE, 44.0)]).astype(np.float32)
        ids = np.array([(k + 50 * p) // RENEW * PEOPLE + p + 1 for p in range(PEOPLE)], np.int64)
        if k % TRACKER_EVERY < TRACKER_LEN:
            ids[:] = -1
        if k % NAN_EVERY == 0:
            boxes[0, 2] = np.nan
        image = None if k % NO_IMAGE_EVERY == 1 else self.images[k % len(self.images)]
        return image, Detections(boxes, ids, np.full(PEOPLE, 0.9, np.float32)), t


def load(model: Path, config: PipelineConfig | None = None) -> Pipeline:
    return Pipeline.load(model, flow=get_flow_backend("dis", preset="ultrafast", scale=0.5), config=config)


def soak(model: Path, frames: int, warmup: int, heap_frames: int, top: int) -> dict[str, Any]:
    """Resident memory over ``frames`` steps after ``warmup`` steps, then the Python heap (tracemalloc on)
    over ``heap_frames`` more steps of the same stream (see the module docstring)."""
    stream = Stream()
    every = 1000
    with load(model) as pipe:
        for k in range(warmup):
            pipe.step(*stream.item(k))
        rss = [(0, rss_mib())]
        dropped = notes = 0
        begin = time.perf_counter()
        for k in range(warmup, warmup + frames):
            result = pipe.step(*stream.item(k))
            dropped += sum(result.diagnostics.dropped.values())
            notes += len(result.diagnostics.notes)
            if (k - warmup + 1) % every == 0:
                rss.append((k - warmup + 1, rss_mib()))
        seconds = time.perf_counter() - begin
        tracemalloc.start(8 if top else 1)
        first = warmup + frames
        for k in range(first, first + every):  # tracemalloc's own tables settle
            pipe.step(*stream.item(k))
        base_snapshot = tracemalloc.take_snapshot() if top else None
        heap = [(0, tracemalloc.get_traced_memory()[0] / 1024)]
        first += every
        for k in range(first, first + heap_frames):
            pipe.step(*stream.item(k))
            if (k - first + 1) % every == 0:
                heap.append((k - first + 1, tracemalloc.get_traced_memory()[0] / 1024))
        sites = []
        if base_snapshot is not None:
            diff = tracemalloc.take_snapshot().compare_to(base_snapshot, "traceback")
            for d in diff[:top]:
                where = " <- ".join(
                    f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in d.traceback
                )
                sites.append(f"{d.size_diff / 1024:+.1f} KiB {d.count_diff:+d} blocks: {where}")
        tracemalloc.stop()
        state = {"smoothed_pairs": len(pipe._smoother), "tracker_tracks": pipe._tracker.num_tracks}
    r, h = np.asarray(rss), np.asarray(heap)
    return {
        "frames": frames,
        "warmup": warmup,
        "heap_frames": heap_frames,
        "seconds": seconds,
        "ms_per_frame": 1000 * seconds / max(frames, 1),
        "rss_mib": {"after_warmup": r[0, 1], "final": r[-1, 1], "peak": float(r[:, 1].max())},
        "rss_growth_mib": r[-1, 1] - r[0, 1],
        "rss_slope_kib_per_1000": _slope(r) * 1024,
        "heap_growth_kib": h[-1, 1] - h[0, 1],
        "heap_slope_kib_per_1000": _slope(h),
        "dropped_detections": dropped,
        "notes": notes,
        "state_at_end": state,
        "top_sites": sites,
        "rss_samples": r.tolist(),
        "heap_samples": h.tolist(),
    }


def _slope(samples: np.ndarray) -> float:
    """Least-squares slope of (frames, value) samples per 1,000 frames (0 with fewer than 3 samples)."""
    if len(samples) < 3:
        return 0.0
    return float(np.polyfit(samples[:, 0] / 1000, samples[:, 1], 1)[0])


def bounded(model: Path, counts: tuple[int, ...] = (10, 100, 1000, 10000)) -> list[dict[str, Any]]:
    """Cost of one step with N detections in one frame under the default ``max_people`` cap."""
    rng = np.random.default_rng(1)
    w, h = 1920, 1080
    image = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8)
    image = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    rows = []
    for n in counts:
        heights = rng.uniform(30, 300, n)
        boxes = np.column_stack(
            [rng.uniform(0, w - 100, n), rng.uniform(0, h - 300, n), heights * 0.4, heights]
        ).astype(np.float32)
        dets = Detections(
            boxes, np.arange(1, n + 1, dtype=np.int64), rng.uniform(0.3, 1, n).astype(np.float32)
        )
        with load(model) as pipe:
            pipe.step(image, dets, 0.0)  # first frame: no flow yet
            best, peak_kib = np.inf, 0.0
            for rep in range(3):
                tracemalloc.start()
                t0 = time.perf_counter()
                result = pipe.step(image, dets, 0.1 * (rep + 1))
                best = min(best, time.perf_counter() - t0)
                peak_kib = max(peak_kib, tracemalloc.get_traced_memory()[1] / 1024)
                tracemalloc.stop()
        rows.append(
            {
                "detections": n,
                "kept": len(result.track_ids),
                "pairs": len(result.pairs),
                "dropped": dict(result.diagnostics.dropped),
                "step_ms": 1000 * best,
                "peak_heap_mib": peak_kib / 1024,
            }
        )
        print(f"  {n:>6} detections: {rows[-1]['pairs']} pairs, {rows[-1]['step_ms']:.1f} ms", flush=True)
    return rows


_MOT_CHILD = """
import os, resource, sys, time
from pairedge.core.io.mot import read_mot
with open("/proc/self/statm") as fh:
    base = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
t = time.perf_counter(); table = read_mot(sys.argv[1]); dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(len(table), dt, base, peak)
"""


def mot_reader(megabytes: float) -> dict[str, Any]:
    """Seconds and peak resident memory of reading a generated MOT file of about ``megabytes`` MB."""
    rng = np.random.default_rng(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "det.txt"
        with open(path, "w") as fh:
            fh.write("# generated by bench_soak.py\n")
            while fh.tell() < megabytes * 1e6:
                n = 200_000
                frame = np.sort(rng.integers(1, 100_000, n))
                cols = [frame, rng.integers(-1, 500, n), *rng.uniform(0, 1000, (4, n)), rng.uniform(0, 1, n)]
                np.savetxt(
                    fh,
                    np.column_stack([*cols, -np.ones((n, 3))]),
                    fmt="%d,%d,%.2f,%.2f,%.2f,%.2f,%.3f,%d,%d,%d",
                )
        size = path.stat().st_size
        out = subprocess.run(
            [sys.executable, "-c", _MOT_CHILD, str(path)], capture_output=True, text=True, check=True
        ).stdout.split()
    rows, seconds, base, peak = int(out[0]), float(out[1]), float(out[2]), float(out[3])
    return {
        "file_mb": size / 1e6,
        "rows": rows,
        "seconds": seconds,
        "mb_per_s": size / 1e6 / seconds,
        "peak_rss_over_import_mb": (peak - base) / 1e6,
        "peak_rss_over_file_size": (peak - base) / size,
    }


def markdown(res: dict[str, Any]) -> str:
    s = res["soak"]
    lines = [
        "# bench_soak",
        "",
        f"`{res['command']}` on {res['machine']}, model `{res['model']}`.",
        "",
        "## Soak (memory must stay flat; target growth < 1 MiB after warm-up)",
        "",
        f"{s['frames']:,} frames after {s['warmup']:,} warm-up frames in {s['seconds']:.0f} s "
        f"({s['ms_per_frame']:.2f} ms per frame, wall time on a shared machine); resident memory sampled "
        f"every 1,000 frames. Then {s['heap_frames']:,} more frames with tracemalloc on for the Python heap.",
        "",
        "| measure | frames | after warm-up | end | growth | slope per 1,000 frames |",
        "|---|---|---|---|---|---|",
        f"| resident memory (statm) | {s['frames']:,} | {s['rss_mib']['after_warmup']:.2f} MiB | "
        f"{s['rss_mib']['final']:.2f} MiB | **{s['rss_growth_mib']:+.3f} MiB** | "
        f"{s['rss_slope_kib_per_1000']:+.2f} KiB |",
        f"| Python heap (tracemalloc) | {s['heap_frames']:,} | | | **{s['heap_growth_kib']:+.1f} KiB** | "
        f"{s['heap_slope_kib_per_1000']:+.3f} KiB |",
        "",
        f"Peak resident memory after warm-up {s['rss_mib']['peak']:.2f} MiB. Dropped detections (NaN boxes): "
        f"{s['dropped_detections']:,}; notes: {s['notes']:,}. State at the end: {s['state_at_end']}.",
        "",
        "## Bounded work per frame (default `max_people` = 100, 1920 x 1080 frame)",
        "",
        "| detections | kept | pairs | step ms (best of 3) | peak Python heap of the step |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['detections']:,} | {r['kept']} | {r['pairs']:,} | {r['step_ms']:.1f} | "
        f"{r['peak_heap_mib']:.1f} MiB |"
        for r in res["bounded"]
    ]
    if res.get("mot"):
        m = res["mot"]
        lines += [
            "",
            "## MOT reader",
            "",
            f"A generated {m['file_mb']:.0f} MB MOT file ({m['rows']:,} lines) read by `read_mot` in "
            f"{m['seconds']:.1f} s ({m['mb_per_s']:.0f} MB/s); peak resident memory "
            f"{m['peak_rss_over_import_mb']:.0f} MB over the process after import = "
            f"**{m['peak_rss_over_file_size']:.2f}x the file size**.",
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--warmup", type=int, default=2_000)
    ap.add_argument(
        "--heap-frames", type=int, default=10_000, help="frames with tracemalloc on (after --frames)"
    )
    ap.add_argument("--skip-bounded", action="store_true", help="skip the bounded-work measurement")
    ap.add_argument("--model", type=Path, default=None, help="model folder (default: the bundled model)")
    ap.add_argument("--mot-mb", type=float, default=200.0, help="size of the MOT reader test file; 0 skips")
    ap.add_argument("--top", type=int, default=0, help="print the K allocation sites that grew most")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    cv2.setNumThreads(1)
    tune_allocator()
    model = resolve_model(args.model)
    res: dict[str, Any] = {
        "command": "python benchmarks/bench_soak.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "model": str(args.model) if args.model else "bundled default",
    }
    print("bounded work per frame ...", flush=True)
    res["bounded"] = [] if args.skip_bounded else bounded(model)
    print(f"soak: {args.frames:,} frames ...", flush=True)
    res["soak"] = soak(model, args.frames, args.warmup, args.heap_frames, args.top)
    for line in res["soak"]["top_sites"]:
        print(line)
    if args.mot_mb > 0:
        print(f"MOT reader: {args.mot_mb:g} MB ...", flush=True)
        res["mot"] = mot_reader(args.mot_mb)
    text = markdown(res)
    write("bench_soak", res, text, args.out)
    print(text)


if __name__ == "__main__":
    main()
