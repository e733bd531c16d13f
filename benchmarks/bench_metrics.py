"""Scoring speed of the evaluation protocols.

1. pairwise: ``classification_metrics`` on N = 10 million predictions with C = 8 classes, timed in the same
   run as the memory-bound floor, one ``np.bincount`` pass over the same data (target: within 5x of the
   floor). Two floors are reported: ``bincount(key)`` over a precomputed ``y_true * C + y_pred`` key array
   (the
   strictest: one pass, nothing else) and ``bincount(y_true * C + y_pred)`` (the key built too).
2. pairwise stage 1: ``pair_detection`` on 1 million predicted and 1 million true pairs.
3. pairwise end to end from JSON Lines files (10k frames, 10 pairs each) with ``score_files``.
4. PCP on 100k people and PAR on 10k frames, through ``benchmarks/_protocol_bench.py`` (written with the
   PCP / PAR protocols); when that file is missing the run says so in its results.

Writes ``benchmarks/results/bench_metrics.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_metrics.py            # full size (about a minute on 2 cores)
    python benchmarks/bench_metrics.py --n 1000000 --repeat 3   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
TARGET_RATIO = 5.0


def timed(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    """Run ``fn`` once to warm up, then ``repeat`` times; best and median wall seconds."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return {"best_s": min(times), "median_s": statistics.median(times), "repeat": repeat}


def bench_pairwise(n: int, c: int, repeat: int, seed: int) -> dict[str, Any]:
    """classification_metrics vs one bincount pass over the same (N,) int64 arrays."""
    from pairedge.measure.metrics.pairwise import classification_metrics

    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, c, n, dtype=np.int64)
    y_pred = np.where(rng.random(n) < 0.8, y_true, rng.integers(0, c, n, dtype=np.int64))
    key = y_true * c + y_pred
    floor = np.bincount(key, minlength=c * c).reshape(c, c)
    metrics = classification_metrics(y_true, y_pred, c)
    if not np.array_equal(metrics.confusion, floor):
        raise AssertionError("classification_metrics confusion differs from the bincount floor")
    score = timed(lambda: classification_metrics(y_true, y_pred, c), repeat)
    strict = timed(lambda: np.bincount(key, minlength=c * c), repeat)
    with_key = timed(lambda: np.bincount(y_true * c + y_pred, minlength=c * c), repeat)
    return {
        "n": n,
        "classes": c,
        "accuracy": metrics.accuracy,
        "score": score,
        "floor_bincount": strict,
        "floor_key_and_bincount": with_key,
        "ratio_vs_bincount": score["best_s"] / strict["best_s"],
        "ratio_vs_key_and_bincount": score["best_s"] / with_key["best_s"],
        "predictions_per_s": n / score["best_s"],
        "target_ratio": TARGET_RATIO,
    }


def bench_pairs(n: int, repeat: int, seed: int) -> dict[str, Any]:
    """Stage-1 pair detection on n predicted and n true (frame, id_a, id_b) pairs, half shared."""
    from pairedge.measure.metrics.pairwise import pair_detection

    rng = np.random.default_rng(seed)

    def pairs(m: int) -> np.ndarray:
        frame = rng.integers(0, 20_000, m)
        a = rng.integers(0, 500, m)
        b = a + 1 + rng.integers(0, 500, m)
        return np.unique(np.stack([frame, a, b], axis=1), axis=0)

    gold = pairs(n)
    pred = np.unique(np.concatenate([gold[: len(gold) // 2], pairs(n - len(gold) // 2)]), axis=0)
    result = pair_detection(pred, gold)
    t = timed(lambda: pair_detection(pred, gold), repeat)
    return {
        "pred": len(pred),
        "gold": len(gold),
        "tp": result.tp,
        "time": t,
        "pairs_per_s": len(pred) / t["best_s"],
    }


def write_pairwise_files(folder: Path, frames: int, pairs_per_frame: int, seed: int) -> tuple[Path, Path]:
    """Synthetic gold / prediction JSON Lines (runtime schema, with probs and groups of 2) for file
    scoring."""
    rng = np.random.default_rng(seed)
    names = ["walking_together", "standing_together", "sitting_together"]
    gold_lines, pred_lines = [json.dumps({"label_set": "paper3"})], []
    for frame in range(frames):
        ids = rng.permutation(4 * pairs_per_frame)[: 2 * pairs_per_frame].reshape(-1, 2).tolist()
        true = rng.integers(0, 3, len(ids)).tolist()
        guess = [t if rng.random() < 0.8 else int(rng.integers(0, 3)) for t in true]
        probs = rng.dirichlet(np.ones(3), len(ids)).round(4).tolist()
        groups = [{"members": pair, "activity": names[t]} for pair, t in zip(ids, true, strict=True)]
        gold = [{"ids": pair, "label": names[t]} for pair, t in zip(ids, true, strict=True)]
        pred = [
            {"ids": pair[::-1], "label": names[g], "p_interact": round(float(rng.random()), 4), "probs": pr}
            for pair, g, pr in zip(ids, guess, probs, strict=True)
        ]
        gold_lines.append(json.dumps({"frame": frame, "interactions": gold, "groups": groups}))
        pred_lines.append(json.dumps({"frame": frame, "interactions": pred, "groups": groups[::2]}))
    gold_path, pred_path = folder / "gold.jsonl", folder / "pred.jsonl"
    gold_path.write_text("\n".join(gold_lines) + "\n")
    pred_path.write_text("\n".join(pred_lines) + "\n")
    return pred_path, gold_path


def bench_files(frames: int, pairs_per_frame: int, repeat: int, seed: int) -> dict[str, Any]:
    """End-to-end ``score_files`` (JSON parsing, validation, all pairwise metrics) on synthetic files."""
    from pairedge.measure.metrics.pairwise import score_files

    with tempfile.TemporaryDirectory() as tmp:
        pred, gold = write_pairwise_files(Path(tmp), frames, pairs_per_frame, seed)
        size = pred.stat().st_size + gold.stat().st_size
        t = timed(lambda: score_files(pred, gold), repeat)
    n = frames * pairs_per_frame
    return {"frames": frames, "pairs": n, "bytes": size, "time": t, "pairs_per_s": n / t["best_s"]}


def bench_other_protocols(seed: int) -> dict[str, Any]:
    """PCP on 100k people and PAR on 10k frames via benchmarks/_protocol_bench.py (if present)."""
    sys.path.insert(0, str(HERE))
    try:
        import _protocol_bench as pb  # type: ignore[import-not-found]
    except ImportError as exc:
        reason = f"benchmarks/_protocol_bench.py not importable: {exc}"
        return {"pcp": {"error": reason}, "par": {"error": reason}}
    out: dict[str, Any] = {}
    for name, call in (
        ("pcp", lambda: pb.bench_pcp(100_000, seed)),
        ("par", lambda: pb.bench_par(10_000, seed)),
    ):
        try:
            out[name] = call()
        except Exception as exc:  # report, do not lose the pairwise numbers
            out[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=3)}
    return out


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    blas_env = {k: v for k, v in os.environ.items() if k.endswith("_NUM_THREADS")}
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "thread_env": blas_env,
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def markdown(res: dict[str, Any]) -> str:
    pw, pairs, m = res["pairwise"], res["pair_detection"], res["machine"]
    verdict = "meets" if pw["ratio_vs_bincount"] <= TARGET_RATIO else "misses"
    lines = [
        "# bench_metrics: scoring speed of the evaluation protocols",
        "",
        f"Command: `{res['command']}`",
        "",
        f"Machine: {m['cpu']}, {m['usable_cpus']} usable of {m['logical_cpus']} logical CPUs, "
        f"Python {m['python']}, numpy {m['numpy']}, {m['platform']}; 1-minute load average at the start "
        f"{m['load_average_1min']} (a shared machine: ratios are from the same run, absolute times vary).",
        "",
        f"## pairwise: {pw['n']:,} predictions, C = {pw['classes']}",
        "",
        "| what | best | median |",
        "|---|---|---|",
        "| `classification_metrics` (validation + confusion + all metrics) | "
        f"{_fmt_s(pw['score']['best_s'])} "
        f"| {_fmt_s(pw['score']['median_s'])} |",
        f"| floor: `np.bincount(key)` on a precomputed key | {_fmt_s(pw['floor_bincount']['best_s'])} "
        f"| {_fmt_s(pw['floor_bincount']['median_s'])} |",
        f"| floor: `np.bincount(y_true * C + y_pred)` | {_fmt_s(pw['floor_key_and_bincount']['best_s'])} "
        f"| {_fmt_s(pw['floor_key_and_bincount']['median_s'])} |",
        "",
        f"Ratio to one bincount pass: **{pw['ratio_vs_bincount']:.2f}x** ({verdict} the {TARGET_RATIO:g}x "
        f"target); to key + bincount: {pw['ratio_vs_key_and_bincount']:.2f}x. "
        f"Throughput {pw['predictions_per_s'] / 1e6:.0f} M predictions/s. Best of {pw['score']['repeat']} "
        "runs.",
        "",
        "`np.bincount` is a single-threaded integer loop that never calls BLAS, so `OPENBLAS_NUM_THREADS` / "
        "`OMP_NUM_THREADS` / `MKL_NUM_THREADS` do not change these numbers "
        f"(set here: {m['thread_env'] or 'none'}).",
        "",
        f"## pairwise stage 1: {pairs['pred']:,} predicted vs {pairs['gold']:,} true pairs",
        "",
        f"`pair_detection`: {_fmt_s(pairs['time']['best_s'])} best, {pairs['pairs_per_s'] / 1e6:.1f} M "
        f"pairs/s (TP = {pairs['tp']:,}).",
        "",
        f"## pairwise from files: {res['files']['frames']:,} frames, {res['files']['pairs']:,} pairs "
        f"({res['files']['bytes'] / 1e6:.1f} MB of JSON Lines)",
        "",
        f"`score_files` (parse, validate, all metrics incl. groups): {res['files']['time']['best_s']:.2f} s "
        f"best, {res['files']['pairs_per_s'] / 1e3:.0f} k pairs/s. Per-record Python checks of the parsed "
        "JSON dominate; `json.loads` itself is about 10 % of the time.",
        "",
        "## PCP (100k people) and PAR (10k frames)",
        "",
    ]
    for name in ("pcp", "par"):
        entry = res["other"][name]
        if "error" in entry:
            lines.append(f"- {name}: not measured ({entry['error']})")
        else:
            shown = ", ".join(
                f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in entry.items()
            )
            lines.append(f"- {name}: {shown}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="pairwise predictions (default 10M)")
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=1_000_000, help="stage-1 pairs (default 1M)")
    parser.add_argument(
        "--frames", type=int, default=10_000, help="frames of the file benchmark (10 pairs each)"
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    res: dict[str, Any] = {
        "command": " ".join(
            ["python benchmarks/bench_metrics.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "machine": machine(),
        "pairwise": bench_pairwise(args.n, args.classes, args.repeat, args.seed),
        "pair_detection": bench_pairs(args.pairs, args.repeat, args.seed),
        "files": bench_files(args.frames, 10, min(args.repeat, 3), args.seed),
        "other": bench_other_protocols(args.seed),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_metrics.json").write_text(json.dumps(res, indent=2, default=float) + "\n")
    md = markdown(res)
    (args.out / "bench_metrics.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
