"""The compiled feature kernels (pair block, per-box flow sums, track history) against numpy, in the runtime
(issue 26).

Runs ``bench_runtime.py --flows dis:fast:0.5 --people 2,10,100 --no-accuracy`` (the issue's command) in
alternating subprocesses, once with the compiled extension and once with ``PAIREDGE_PAIR_KERNEL=numpy``, for
``--rounds`` rounds, so both see the same machine load; every subprocess runs with ``OMP_NUM_THREADS=1`` and
``OPENBLAS_NUM_THREADS=1`` (one thread, as the latency bench means it: numpy's BLAS would otherwise start a
second thread for the numpy neighbour counts). Reports per round and as the median over rounds: the whole step
over the flow alone at 10 and at 100 people, the features' p50, and the step's allocations at 100 people. The
features themselves are identical (``bench_features_equal.py``).

Writes ``benchmarks/results/bench_pair_kernel.json`` and ``.md``::

    python benchmarks/bench_pair_kernel.py              # about a minute per round
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COMMAND = ["--flows", "dis:fast:0.5", "--people", "2,10,100", "--no-accuracy"]
KEYS = (
    "overhead_ratio",
    "overhead_ratio_100",
    "features_10_ms",
    "features_100_ms",
    "step_10_ms",
    "step_100_ms",
)


def run_once(implementation: str, out: Path) -> dict[str, Any]:
    """One bench_runtime sweep in a subprocess; its criteria plus the step allocations at 100 people."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    env.pop("PAIREDGE_PAIR_KERNEL", None)
    if implementation == "numpy":
        env["PAIREDGE_PAIR_KERNEL"] = "numpy"
    subprocess.run(
        [sys.executable, str(HERE / "bench_runtime.py"), *COMMAND, "--out", str(out)],
        env=env,
        check=True,
        capture_output=True,
    )
    res = json.loads((out / "bench_runtime.json").read_text())
    sweep = res["sweeps"][0]
    by_n = {p["people"]: p for p in sweep["people"]}
    got = by_n[100]["pipeline"].get("feature_kernels", "numpy")
    if got != implementation:
        raise SystemExit(f"asked for the {implementation} feature kernels, the runtime used {got}")
    return {
        **{k: sweep["criteria"][k] for k in KEYS},
        "alloc_100_mib": by_n[100]["step_peak_alloc_mib"],
        "load": res["machine"],
    }


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Feature kernels: compiled (`_pairkernel`) vs numpy in the streaming runtime (issue 26)",
        "",
        f"`python benchmarks/bench_pair_kernel.py --rounds {res['rounds']}`: `bench_runtime.py "
        f"{' '.join(COMMAND)}` in alternating subprocesses (one thread: `OMP_NUM_THREADS=1 "
        "OPENBLAS_NUM_THREADS=1`), numpy (pair block, flow sums, track history) forced with "
        "`PAIREDGE_PAIR_KERNEL=numpy`. Same features (bench_features_equal.md); targets: step / flow <= "
        "1.5x at 10 people, <= 2.0x at 100. The median rows take each column's median over the rounds.",
        "",
        "| round | features | step / flow, 10 people | step / flow, 100 people | features p50, 10 | features "
        "p50, 100 "
        "| step p50, 10 | step p50, 100 | step allocations, 100 |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def row(label: str, impl: str, r: dict[str, float]) -> str:
        return (
            f"| {label} | {impl} | {r['overhead_ratio']:.2f}x | {r['overhead_ratio_100']:.2f}x | "
            f"{r['features_10_ms']:.2f} ms | {r['features_100_ms']:.2f} ms | {r['step_10_ms']:.2f} ms | "
            f"{r['step_100_ms']:.2f} ms | {r['alloc_100_mib']:.1f} MiB |"
        )

    for k, pair in enumerate(res["runs"], 1):
        for impl in ("numpy", "compiled"):
            lines.append(row(str(k), impl, pair[impl]))
    for impl in ("numpy", "compiled"):
        lines.append(row("**median**", f"**{impl}**", res["median"][impl]))
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "bench_pair_kernel")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds: expected at least 1, got {args.rounds}")
    from pairedge.core.features import pairkernel

    if pairkernel.KERNEL is None:
        raise SystemExit("the compiled feature kernels are not built here (pip install needs a C compiler)")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            runs.append({impl: run_once(impl, Path(tmp) / f"{impl}{k}") for impl in ("numpy", "compiled")})
    median = {
        impl: {key: statistics.median(r[impl][key] for r in runs) for key in (*KEYS, "alloc_100_mib")}
        for impl in ("numpy", "compiled")
    }
    res = {"rounds": args.rounds, "runs": runs, "median": median}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    text = markdown(res)
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
