"""Where the bundled stage 2 loses int8 agreement: QAT variants and two diagnostics of the shipped file.

Issue 38 asks for int8 top-1 agreement with fp32 >= 99 % on held-out seeds; the shipped QAT stage 2 stays
below it (``bench_qat.py``). This benchmark asks whether the QAT step or the fp32 model is the cause:

1. **QAT variants of stage 2** (the fp32 weights unchanged): the recipe's config and variants of its range
   percentile, cross-layer equalisation, calibration and learning rate. Each is fine-tuned exactly as
   ``python -m pairedge.apps.recipes.default_model --int8-only`` does
   (:func:`pairedge.export.qat.train.finetune` on the recipe's training rows, the best epoch on their
   validation sequences) and exported with the export check; then compared with fp32 through
   :mod:`pairedge.compare.comparator` (bench_qat's figures) on the **validation scenes** (seeds 2000-2003,
   every preset: where a variant would be chosen) and the **held-out scenes** (seeds 4000-4001: reported,
   never used to choose).
2. **Diagnostics of the shipped ``stage2.int8.onnx``** on the same rows: its QAT weights with the activations
   left in float (no activation Q/DQ: how much of the gap is weight rounding and QAT drift), and each Gemm in
   turn kept in float (weights and input; what a per-layer mixed-precision fallback could recover).
3. **Hidden activations bounded at the source** (a diagnostic, not the shipped model): every ReLU of the
   fp32 stage 2 clipped at a percentile of its outputs on the QAT training rows (no retraining), then the
   best-on-validation QAT variant's config without hidden equalisation (scaling through a clip is not
   exact); the fake-quantized model (within the export check's tolerance of its int8 file) against that
   clipped fp32, and the clipped fp32's held-out MPCA against the shipped one's.

Writes ``benchmarks/results/bench_qat_sweep.json`` and ``.md``. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/bench_qat_sweep.py        # about 20 minutes on one core
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from _train_bench import write
from bench_qat import HELD_OUT, VALIDATION, score_rows
from onnx import numpy_helper
from pairedge.calibration.infer import logits, session
from pairedge.compare.comparator import DecisionRule
from pairedge.core.bundled import QAT_RECIPE, RECIPE, default_model_dir
from pairedge.export.qat import config_of, export_int8, import_fp32, stage_info
from pairedge.export.qat.build import stage_rows
from pairedge.export.qat.data import RecipeRows, recipe_rows, scene_rows
from pairedge.export.qat.train import finetune
from pairedge.export.train import predict_logits
from pairedge.runtime.loading import find_models
from torch import nn

HERE = Path(__file__).resolve().parent
#: (name, overrides of the recipe's stage-2 QAT config).
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("recipe", {}),
    ("percentile 99.9", {"percentile": 99.9}),
    ("percentile 99.5", {"percentile": 99.5}),
    ("percentile 99.0", {"percentile": 99.0}),
    ("percentile 99.9, no hidden equalisation", {"percentile": 99.9, "hidden_strength": 0.0}),
    ("percentile 99.9, full hidden equalisation", {"percentile": 99.9, "hidden_strength": 1.0}),
    ("MSE ranges", {"calibration": "mse"}),
    ("percentile 99.9, lr 3e-4", {"percentile": 99.9, "lr": 3e-4}),
)

#: Percentiles of each hidden ReLU's outputs on the QAT training rows that the bounded diagnostic clips at.
CLIPS = (99.9, 99.0)


def float_gemms(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    """A copy of a Q/DQ graph with the Gemms ``names`` reading their float input and their dequantized
    (QAT) weight: no Q/DQ on either (what TensorRT runs in fp16 for a layer left out of int8)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    init = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    for node in graph.node:
        if node.op_type != "Gemm" or node.name not in names:
            continue
        node.input[0] = producer[producer[node.input[0]].input[0]].input[0]  # DQ <- Q <- float tensor
        wdq = producer[node.input[1]]
        q = numpy_helper.to_array(init[wdq.input[0]]).astype(np.float32)
        scale = numpy_helper.to_array(init[wdq.input[1]]).astype(np.float32)
        axis = next((a.i for a in wdq.attribute if a.name == "axis"), 1)
        shape = [1] * q.ndim
        shape[axis] = -1
        name = f"{node.input[1]}_float"
        graph.initializer.append(numpy_helper.from_array(q * scale.reshape(shape), name))
        node.input[1] = name
    return out


def clipped_relus(model: nn.Module, X: np.ndarray, percentile: float) -> nn.Module:
    """A copy of a torch model with every ReLU replaced by ``Hardtanh(0, c)``, ``c`` the ``percentile`` of
    that ReLU's outputs on (N, F) rows ``X`` (every 5th row)."""
    out = copy.deepcopy(model).eval()
    relus = [(name, mod) for name, mod in out.named_modules() if isinstance(mod, nn.ReLU)]
    seen: dict[str, list[torch.Tensor]] = {name: [] for name, _ in relus}
    hooks = [
        mod.register_forward_hook(lambda _m, _i, o, n=name: seen[n].append(o.detach().flatten()))
        for name, mod in relus
    ]
    with torch.no_grad():
        out(torch.from_numpy(np.ascontiguousarray(X[::5], np.float32)))
    for h in hooks:
        h.remove()
    for name, _ in relus:
        bound = float(np.percentile(torch.cat(seen[name]).numpy(), percentile))
        parent_name, _, leaf = name.rpartition(".")
        parent = out.get_submodule(parent_name) if parent_name else out
        setattr(parent, leaf, nn.Hardtanh(0.0, max(bound, 1e-3)))
    return out


def figures(rows: RecipeRows, z: dict[str, dict[str, np.ndarray]], rule: DecisionRule) -> dict[str, Any]:
    """bench_qat's comparator figures of candidate logits ``z["int8"]`` against ``z["fp32"]``, plus the
    stage-2 logit error (max, p99) on the gated pairs."""
    s = score_rows(rows, z, rule)
    return {
        "top1_together": s["top1_together"]["decision"]["agreement_excl_near_ties"],
        "top1_gated": s["top1_gated"]["decision"]["agreement_excl_near_ties"],
        "logit_error_gated": s["top1_gated"]["logits"],
        "mpca_fp32": s["mpca"]["stage2"]["fp32"],
        "mpca_int8": s["mpca"]["stage2"]["int8"],
    }


#: Stage-2 logits of (N, F) rows: an ONNX session's or a torch model's.
Logits = Callable[[np.ndarray], np.ndarray]


def onnx_logits(model: onnx.ModelProto | Path) -> Logits:
    sess = session(model)
    return lambda X: logits(sess, X)


def torch_logits(model: nn.Module) -> Logits:
    return lambda X: predict_logits(model, X)


def evaluate(
    candidate: Logits,
    base: dict[str, dict[str, dict[str, np.ndarray]]],
    sets: dict[str, RecipeRows],
    rule: DecisionRule,
    reference: Logits | None = None,
) -> dict[str, Any]:
    """Figures of one stage-2 candidate on every row set against ``reference`` (None: the shipped fp32
    stage 2); stage 1 stays the shipped fp32 vs int8."""
    out = {}
    for name, rows in sets.items():
        ref = base[name]["fp32"]["stage2_all"] if reference is None else reference(rows.stage2_all)
        z = {
            "fp32": {"stage1": base[name]["fp32"]["stage1"], "stage2_all": ref},
            "int8": {"stage1": base[name]["int8"]["stage1"], "stage2_all": candidate(rows.stage2_all)},
        }
        out[name] = figures(rows, z, rule)
    return out


def base_logits(folder: Path, rows: RecipeRows) -> dict[str, dict[str, np.ndarray]]:
    """fp32 logits of both stages and the shipped int8 stage 1's (stage 1 is not under study)."""
    z = {}
    for precision, suffix in (("fp32", ""), ("int8", ".int8")):
        z[precision] = {"stage1": logits(session(folder / f"stage1{suffix}.onnx"), rows.stage1.X)}
    z["fp32"]["stage2_all"] = logits(session(folder / "stage2.onnx"), rows.stage2_all)
    return z


def pct(v: float) -> str:
    return f"{100 * v:.2f} %"


def row(name: str, res: dict[str, Any], extra: str = "") -> str:
    cells = [f"{name}{extra}"]
    for part in ("validation", "held_out"):
        f = res[part]
        err = f["logit_error_gated"]
        cells += [pct(f["top1_gated"]), pct(f["top1_together"]), f"{err['p99']:.3g} / {err['max']:.3g}"]
    h = res["held_out"]
    cells.append(f"{100 * (h['mpca_fp32'] - h['mpca_int8']):+.2f}")
    return "| " + " | ".join(cells) + " |"


def markdown(res: dict[str, Any]) -> str:
    columns = [
        f"{part} {what}"
        for part in ("validation", "held-out")
        for what in ("top-1 (gated)", "top-1 (together)", "logit error p99 / max")
    ]
    head = "| candidate | " + " | ".join(columns) + " | held-out MPCA drop (points) |\n|---|" + "---:|" * 7
    lines = [
        "# Where the bundled stage 2 loses int8 agreement",
        "",
        f"Command: `{res['command']}` ({res['seconds']:.0f} s). Comparator figures as in bench_qat "
        "(near-ties within 1e-3 counted as agreeing); validation scenes: seeds "
        f"{VALIDATION[0]} ({', '.join(VALIDATION[1])}); held out: seeds {HELD_OUT[0]} "
        f"({', '.join(HELD_OUT[1])}), never used to choose. Target (issue 38): top-1 >= 99 % held out, "
        "parity's int8 logit tolerance p99 <= 0.25 / max <= 1.",
        "",
        "## QAT variants of stage 2 (fp32 weights unchanged)",
        "",
        head,
    ]
    for name, r in res["variants"].items():
        lines.append(row(name, r, f" (best epoch {r['best_epoch']}, {r['seconds']:.0f} s)"))
    best = res["chosen_on_validation"]
    lines += [
        "",
        f"Best on validation (top-1 gated): **{best}**.",
        "",
        "## Diagnostics of the shipped stage2.int8.onnx",
        "",
        head,
        row("shipped file", res["shipped"]),
        row("its QAT weights, activations in float", res["activations_float"]),
    ]
    for name, r in res["one_gemm_float"].items():
        lines.append(row(f"{name} in float", r))
    b = res["bounded"]
    lines += [
        "",
        "## Hidden activations bounded at the source (diagnostic; fake-quantized model vs the clipped fp32)",
        "",
        f"QAT config: the recipe's with {b['qat_overrides']}.",
        "",
        head.replace(
            "| held-out MPCA drop (points) |",
            "| held-out MPCA drop (points) | clipped fp32 MPCA vs shipped fp32 (points) |",
        )
        + "---:|",
    ]
    for pct, r in b["rows"].items():
        lines.append(row(f"ReLUs clipped at p{pct}", r) + f" {r['fp32_mpca_change_points']:+.2f} |")
    lines += ["", f"Environment: {res['environment']}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=default_model_dir(), help="the bundled model folder")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--variants", type=int, default=len(VARIANTS), help="only the first N variants")
    args = parser.parse_args(argv)
    if not 1 <= args.variants <= len(VARIANTS):
        raise SystemExit(f"error: --variants: expected 1 to {len(VARIANTS)}, got {args.variants}")
    t0 = time.time()
    folder = args.model
    tau = find_models(folder).threshold("p_interact")
    rule = DecisionRule(tau=tau)
    sets = {"validation": scene_rows(RECIPE, [VALIDATION]), "held_out": scene_rows(RECIPE, [HELD_OUT])}
    base = {k: base_logits(folder, rows) for k, rows in sets.items()}
    shipped = onnx.load(str(folder / "stage2.int8.onnx"))
    gemms = [n.name for n in shipped.graph.node if n.op_type == "Gemm"]
    res: dict[str, Any] = {
        "command": "OMP_NUM_THREADS=1 python benchmarks/bench_qat_sweep.py",
        "shipped": evaluate(onnx_logits(shipped), base, sets, rule),
        "activations_float": evaluate(onnx_logits(float_gemms(shipped, set(gemms))), base, sets, rule),
        "one_gemm_float": {
            g: evaluate(onnx_logits(float_gemms(shipped, {g})), base, sets, rule) for g in gemms
        },
        "variants": {},
    }
    train = recipe_rows(RECIPE, "train")
    loaded = {k: import_fp32(folder / f"{k}.onnx") for k in ("stage1", "stage2")}
    models = {k: m for k, (m, _) in loaded.items()}
    metas = {k: meta for k, (_, meta) in loaded.items()}
    recipe_config = config_of(QAT_RECIPE, "stage2")
    # every variant keeps the recipe's gate floor: one split of the training rows serves them all
    X_train, X_val = stage_rows(train, models, metas, recipe_config.gate_floor)["stage2"]
    check = X_val[:: max(1, len(X_val) // 4096)]
    with tempfile.TemporaryDirectory(prefix="bench-qat-sweep-") as tmp:
        out = Path(tmp) / "stage2.int8.onnx"
        for name, over in VARIANTS[: args.variants]:
            t = time.time()
            result = finetune(models["stage2"], 2, X_train, X_val, replace(recipe_config, **over), tau)
            recipe = copy.deepcopy(QAT_RECIPE)
            recipe["stage2"].update(over)
            export_int8(folder / "stage2.onnx", result, out, stage_info(recipe, "stage2", result), check)
            res["variants"][name] = {
                "overrides": over,
                "best_epoch": result.best_epoch,
                **evaluate(onnx_logits(out), base, sets, rule),
                "seconds": time.time() - t,
            }
            print(row(name, res["variants"][name]), flush=True)
    res["chosen_on_validation"] = max(
        res["variants"], key=lambda n: res["variants"][n]["validation"]["top1_gated"]
    )
    chosen = {**res["variants"][res["chosen_on_validation"]]["overrides"], "hidden_strength": 0.0}
    config = replace(recipe_config, **chosen)
    shipped_mpca = res["shipped"]["held_out"]["mpca_fp32"]
    res["bounded"] = {"qat_overrides": chosen, "rows": {}}
    for pct in CLIPS:
        t = time.time()
        bounded = clipped_relus(models["stage2"], X_train, pct)
        result = finetune(bounded, 2, X_train, X_val, config, tau)
        figs = evaluate(torch_logits(result.model), base, sets, rule, reference=torch_logits(bounded))
        figs["fp32_mpca_change_points"] = 100 * (figs["held_out"]["mpca_fp32"] - shipped_mpca)
        res["bounded"]["rows"][f"{pct:g}"] = {**figs, "seconds": time.time() - t}
        print(row(f"ReLUs clipped at p{pct:g}", figs), flush=True)
    res["seconds"] = time.time() - t0
    res["environment"] = f"Python {sys.version.split()[0]}, numpy {np.__version__}, onnx {onnx.__version__}"
    text = markdown(res)
    write("bench_qat_sweep", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
