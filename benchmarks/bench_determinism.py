"""Training is deterministic: the same ``pairedge train`` command twice gives identical metrics and weights.

Runs each command twice in fresh processes and compares the validation metrics, the training history,
the SHA-256 of ``model.pt`` and the SHA-256 of the exported ONNX file. Commands: the Collective Activity
8-class model (box-only) and a simulator stage-2 model (DIS flow features).

Writes ``benchmarks/results/bench_determinism.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_determinism.py            # about 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _train_bench import DEFAULT_DATA, environment, write


def commands(data: Path) -> dict[str, list[str]]:
    cad = data / "cad_choi" / "annotations"
    common = ["--epochs", "8", "--patience", "4", "--samples-per-epoch", "10000", "--no-progress"]
    return {
        "cad8": ["--data", str(cad), "--spec", "pairedge", "--stage", "2", *common],
        "sim_paper3": [
            "--data",
            "sim:static+moving:seeds=0-3:frames=150",
            "--spec",
            "pairedge",
            "--stage",
            "2",
            *common,
        ],
    }


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_once(args: list[str], out: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-c",
        "from pairedge.apps.cli import main; main()",
        "train",
        *args,
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    report = json.loads((out / "report.json").read_text())
    return {
        "seconds": time.perf_counter() - t0,
        "validation": report["validation"],
        "history": report["history"],
        "model_sha256": sha(out / "model.pt"),
        "onnx_sha256": sha(out / f"stage{report['stage']}.onnx"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd in commands(args.data).items():
            if name == "cad8" and not (args.data / "cad_choi").is_dir():
                print(f"skip {name}: no data at {args.data}")
                continue
            a, b = (run_once(cmd, Path(tmp) / f"{name}_{i}") for i in (1, 2))
            same = {k: a[k] == b[k] for k in ("validation", "history", "model_sha256", "onnx_sha256")}
            results[name] = {
                "command": "pairedge train " + shlex.join(cmd) + " --out DIR",
                "identical": same,
                "mpca": a["validation"]["mpca"],
                "seconds": [a["seconds"], b["seconds"]],
                "model_sha256": [a["model_sha256"], b["model_sha256"]],
            }
            print(name, same)
    lines = [
        "# Training determinism: the same command twice",
        "",
        "`python benchmarks/bench_determinism.py` — each command run twice in fresh processes.",
        "",
        "| run | metrics identical | history identical | model.pt identical | ONNX identical | val MPCA |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        s = r["identical"]
        lines.append(
            f"| {name} | {s['validation']} | {s['history']} | {s['model_sha256']} | {s['onnx_sha256']} | "
            f"{r['mpca']:.4f} |"
        )
    lines += [""] + [f"- `{name}`: `{r['command']}`" for name, r in results.items()]
    env = environment()
    lines += ["", f"Environment: {env}"]
    paths = write(
        "bench_determinism",
        {"results": results, "environment": env},
        "\n".join(lines),
        args.out or Path(__file__).parent / "results",
    )
    print("wrote", *paths)


if __name__ == "__main__":
    main()
