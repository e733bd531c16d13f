"""Model size (parameters, ONNX bytes) and classifier cost per pair on ONNX Runtime CPU, every architecture.

For each architecture at the widths of the feature specs (and the shipped default model, when present):
parameters, ONNX file size, and the latency of one batched ``InferenceSession.run`` over 1, 10, 100 and 300
pairs (median of ``--repeats`` runs after warm-up, 1 intra-op thread), reported per call and per pair.

Writes ``benchmarks/results/bench_model_cost.json`` and ``.md``. Run from the repository root::

    python benchmarks/bench_model_cost.py              # about 30 s
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from _train_bench import environment, write
from pairedge.core.bundled import default_model_dir
from pairedge.core.features import get_spec
from pairedge.core.labels import CAD8, PAPER3, STAGE1
from pairedge.export.checkpoint import Checkpoint
from pairedge.export.models import ModelConfig, build_model, count_parameters
from pairedge.export.onnx_export import export_checkpoint
from pairedge.runtime.backends.ort_session import make_session

BATCHES = (1, 10, 100, 300)


def candidates() -> list[tuple[str, ModelConfig, tuple[str, ...], str]]:
    """(name, config, labels, spec) of every architecture at the specs' widths."""
    edge, liang = get_spec("pairedge"), get_spec("liang2026")
    fp = sum(n.startswith("a_") for n in edge.stage2_names)
    return [
        (
            "paper stage 1 (adaptive geometric)",
            ModelConfig("paper_adaptive_geometric", liang.stage1_dim, 2),
            STAGE1.classes,
            "liang2026",
        ),
        (
            "paper stage 2 (residual MLP)",
            ModelConfig("residual_mlp", liang.stage2_dim, 3, dropout=0.3),
            PAPER3.classes,
            "liang2026",
        ),
        ("pairedge stage 1 (MLP)", ModelConfig("stage1_mlp", edge.stage1_dim, 2), STAGE1.classes, "pairedge"),
        (
            "pairedge stage 2 (relation net, 3 classes)",
            ModelConfig(
                "relation_net", edge.stage2_dim, 3, person_features=fp, pair_features=edge.stage2_dim - 2 * fp
            ),
            PAPER3.classes,
            "pairedge",
        ),
        (
            "pairedge stage 2 (relation net, CAD 8 classes)",
            ModelConfig(
                "relation_net", edge.stage2_dim, 8, person_features=fp, pair_features=edge.stage2_dim - 2 * fp
            ),
            CAD8.classes,
            "pairedge",
        ),
    ]


def latency(path: Path, width: int, repeats: int) -> dict[str, float]:
    """Median ms per run and µs per pair for each batch size (1 intra-op thread)."""
    session = make_session(path)  # one intra-op thread, CPU
    out: dict[str, float] = {}
    rng = np.random.default_rng(0)
    for n in BATCHES:
        x = rng.normal(size=(n, width)).astype(np.float32)
        for _ in range(20):
            session.run(None, {"features": x})
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            session.run(None, {"features": x})
            times.append(time.perf_counter() - t0)
        ms = float(np.median(times) * 1e3)
        out[f"ms_{n}"] = ms
        out[f"us_per_pair_{n}"] = ms * 1e3 / n
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, config, labels, spec in candidates():
            model = build_model(config).eval()
            ckpt = Checkpoint(
                model, config, 1 if labels == STAGE1.classes else 2, labels, spec, str(get_spec(spec).version)
            )
            res = export_checkpoint(ckpt, Path(tmp) / "m.onnx")
            rows.append(
                {
                    "model": name,
                    "architecture": config.architecture,
                    "features": config.num_features,
                    "classes": config.num_classes,
                    "parameters": count_parameters(model),
                    "onnx_bytes": res.onnx_bytes,
                    **latency(res.path, config.num_features, args.repeats),
                }
            )
    shipped = default_model_dir()
    for stage in (1, 2):
        path = shipped / f"stage{stage}.onnx"
        if path.is_file():
            proto = onnx.load(str(path))
            width = proto.graph.input[0].type.tensor_type.shape.dim[1].dim_value
            params = int(
                sum(np.prod(t.dims) for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
            )
            rows.append(
                {
                    "model": f"shipped default stage {stage}",
                    "architecture": "",
                    "features": width,
                    "classes": None,
                    "parameters": params,
                    "onnx_bytes": path.stat().st_size,
                    **latency(path, width, args.repeats),
                }
            )
    lines = [
        "# Model size and classifier cost per pair (ONNX Runtime CPU, 1 thread)",
        "",
        f"`python benchmarks/bench_model_cost.py` — median of {args.repeats} `InferenceSession.run` calls "
        "after warm-up. Shipped-model parameters count every float initializer (incl. BatchNorm statistics "
        "and the normalisation buffers).",
        "",
        "| model | F | params | ONNX bytes | ms @1 | ms @10 | ms @100 | ms @300 | µs/pair @300 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['features']} | {r['parameters']} | {r['onnx_bytes']} | {r['ms_1']:.3f} | "
            f"{r['ms_10']:.3f} | "
            f"{r['ms_100']:.3f} | {r['ms_300']:.3f} | {r['us_per_pair_300']:.2f} |"
        )
    env = environment()
    lines += ["", f"Environment: {env}"]
    paths = write(
        "bench_model_cost",
        {"rows": rows, "environment": env, "repeats": args.repeats},
        "\n".join(lines),
        args.out or Path(__file__).parent / "results",
    )
    print("\n".join(lines))
    print("wrote", *paths)


if __name__ == "__main__":
    main()
