"""INT8 by quantization-aware training: ``stage{1,2}.int8.onnx`` with every Gemm / MatMul in int8.

For each stage of a model folder:

1. **start from the fp32 model that ships**: :func:`import_fp32` rebuilds the torch model from the fp32
   ONNX file (architecture and widths from its metadata, every weight from its initializers, whose names
   are the torch state-dict keys) and checks that torch and ONNX Runtime give the same logits. Importing is
   exact; retraining from the recipe would take a quarter of an hour and match the shipped weights only on a
   CPU with the same BLAS kernel;
2. **fine-tune with fake quantization** as TensorRT's explicit quantization computes (int8 symmetric, zero
   point 0, per-output-channel weights, per-tensor activations, float bias), after range equalisation
   (:mod:`pairedge.export.qat.equalize`), every layer reading its input once
   (:mod:`pairedge.export.qat.fake`): distillation from the fp32 model on the recipe's training rows, the
   epoch chosen on the training scenes' validation sequences (:mod:`pairedge.export.qat.train`);
3. **export the QDQ graph** through the one Q/DQ writer (:mod:`pairedge.export.qat.export` on
   :mod:`pairedge.calibration.qdq_graph`) and verify it: ONNX checker, the Q/DQ rules
   ``pairedge calibrate`` and ``pairedge check`` apply
   (:func:`pairedge.calibration.qdq_rules.check_qdq_rules`), every Gemm / MatMul input int8 (but the layers a
   sensitivity sweep keeps float, :mod:`pairedge.export.qat.sensitivity`), and ONNX Runtime
   against the fake-quantized torch model.

The file carries the fp32 file's metadata unchanged, plus ``pairedge.precision = "int8"`` and
``pairedge.quantization`` (JSON): ``method: "qat"``, the ``fp32_sha256`` of the fp32 file it was made from
(what the runtime's staleness check and parity's identity check read), the QAT recipe, the validation scores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pairedge.calibration.infer import logits
from pairedge.calibration.qdq_rules import check_qdq_rules
from pairedge.calibration.quantize import stamp
from pairedge.core.errors import ModelError
from pairedge.core.modelfolder import sha256_file
from pairedge.core.modelmeta import ModelMetadata
from pairedge.export.models import ModelConfig, build_model
from pairedge.export.qat import fake
from pairedge.export.qat.export import QUANTIZED_OPS, float_nodes, gemm_inputs_quantized, qdq_graph
from pairedge.export.qat.train import QatConfig, QatResult
from pairedge.export.train import predict_logits
from pairedge.runtime.backends.ort_session import make_session
from torch import nn

#: Largest |torch - ONNX Runtime| logit difference accepted when importing an fp32 file.
IMPORT_TOLERANCE = 1e-4
#: |fake-quantized torch - ONNX Runtime int8| logit differences accepted after export, with ONNX Runtime's
#: graph optimisations off: the Q/DQ file as the ONNX operators define it, the arithmetic the fine-tuning
#: emulates (the bundled stage 2: 99.9th percentile row 0, worst 0.019). A file that computes something else
#: moves most rows: the 99.9th percentile row must stay within EXPORT_TOLERANCE, the worst row within
#: EXPORT_MAX. ONNX Runtime's optimised session (pre-packed float GEMMs summing in another order) and a
#: TensorRT engine (fused int8 kernels) round differently: a hidden value within float noise of an int8
#: rounding boundary lands one step apart, and the steps cascade (the bundled stage 2: 0.1 % of the first
#: hidden layer's values, 18 % of rows moved, worst 0.17-0.5). That is the runtime's rounding, not the file's:
#: it is recorded (``runtime_p999_abs_diff``, ``runtime_max_abs_diff``) and judged where it matters, by the
#: agreement with fp32 and ``pairedge parity check``.
EXPORT_TOLERANCE = 0.05
EXPORT_MAX = 0.25
EXPORT_QUANTILE = 99.9


def _props(proto: Any) -> dict[str, str]:
    return {p.key: p.value for p in proto.metadata_props}


def model_config(meta: ModelMetadata, weights: Mapping[str, Any]) -> ModelConfig:
    """The :class:`ModelConfig` of a pairedge file from its metadata (architecture, widths, ``train`` record)
    and its weights by state-dict key (arrays or tensors: only ``shape`` is read)."""
    train = dict(meta.extra.get("train", {}))
    return ModelConfig(
        architecture=meta.architecture,
        num_features=meta.num_features,
        num_classes=len(meta.labels),
        hidden=tuple(int(h) for h in train.get("hidden", ())),
        person_features=int(weights["person.0.weight"].shape[1]) if "person.0.weight" in weights else 0,
        pair_features=int(weights["pair.0.weight"].shape[1]) if "pair.0.weight" in weights else 0,
        input_squash=train.get("input_squash"),
        activation_bound=train.get("activation_bound"),
    )


def import_fp32(path: str | Path) -> tuple[nn.Module, ModelMetadata]:
    """The torch model (eval mode) of a pairedge fp32 ONNX file, and its metadata.

    Raises:
        ModelError: not a pairedge model, an architecture or initializer layout this cannot rebuild, or
            torch's logits differ from ONNX Runtime's by more than :data:`IMPORT_TOLERANCE`.
    """
    import onnx
    from onnx import numpy_helper
    from pairedge.export.onnx_export import parity_stats, sample_inputs

    proto = onnx.load(str(path))
    meta = ModelMetadata.from_props(_props(proto), source=str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    if dict(meta.extra.get("train", {})).get("ignore_features"):
        raise ModelError(
            f"{path}: models with ignore_features cannot be imported for QAT yet; retrain without"
        )
    model = build_model(model_config(meta, inits))
    wanted = model.state_dict()
    missing = sorted(set(wanted) - set(inits))
    if missing:
        raise ModelError(
            f"{path}: initializers {missing[:4]} of a {meta.architecture} model are missing; "
            "re-export the model with `pairedge export`"
        )
    model.load_state_dict({k: torch.from_numpy(np.array(inits[k], np.float32)) for k in wanted})
    model.eval()
    diff, _ = parity_stats(model, path, sample_inputs(meta, 512, seed=0))
    if not diff <= IMPORT_TOLERANCE:
        raise ModelError(
            f"{path}: the imported torch model differs from the file by {diff:.2e} (> "
            f"{IMPORT_TOLERANCE:g}); its graph is not the {meta.architecture} this code builds"
        )
    return model, meta


@dataclass(frozen=True)
class Int8File:
    """One written ``stage{n}.int8.onnx``: its path, the QAT result and the checks of the written file."""

    path: Path
    result: QatResult
    export_max_abs_diff: float
    quantized_ops: int
    export_p999_abs_diff: float = 0.0
    runtime_max_abs_diff: float = 0.0
    runtime_p999_abs_diff: float = 0.0


def export_int8(
    fp32_path: Path, result: QatResult, out: Path, info: dict[str, Any], check_X: np.ndarray
) -> Int8File:
    """Write the QDQ file of ``result`` beside ``fp32_path`` as ``out`` and verify it (module docstring).

    Args:
        info: the ``pairedge.quantization`` entry (``fp32_sha256`` and ``excluded_nodes``, the Gemm / MatMul
            nodes of the float layers, are added here).
        check_X: (N, F) float32 rows ONNX Runtime and the fake-quantized model are compared on.

    Raises:
        ModelError: the file breaks a Q/DQ rule, leaves a Gemm / MatMul input of a quantized layer in
            float, or differs from the fake-quantized model beyond :data:`EXPORT_TOLERANCE` /
            :data:`EXPORT_MAX` (nothing is written then).
    """
    import onnx

    fp32 = onnx.load(str(fp32_path))
    qdq = qdq_graph(fp32, result.model, result.gains)
    kept = {f"{path}.weight" for path in fake.float_layers(result.model)}
    problems = [str(i) for i in check_qdq_rules(qdq)] + gemm_inputs_quantized(qdq, kept)
    if problems:
        raise ModelError(
            f"{out.name}: the QAT graph is not int8 as TensorRT needs it: " + "; ".join(problems[:4])
        )
    info = {**info, "excluded_nodes": float_nodes(qdq, kept)}
    stamp(qdq, "int8", {**info, "method": "qat", "fp32_sha256": sha256_file(fp32_path)})
    want = predict_logits(result.model, check_X)

    def row_diffs(optimization: str) -> np.ndarray:
        got = logits(make_session(qdq, optimization=optimization), check_X)
        return np.abs(got - want).max(axis=1) if len(check_X) else np.zeros(1)

    per_row, runtime = row_diffs("disable"), row_diffs("all")
    diff, typical = float(per_row.max()), float(np.percentile(per_row, EXPORT_QUANTILE))
    if not (typical <= EXPORT_TOLERANCE and diff <= EXPORT_MAX):
        raise ModelError(
            f"{out.name}: ONNX Runtime's int8 logits (graph optimisations off) differ from the "
            f"fake-quantized model by {typical:.3f} at the {EXPORT_QUANTILE:g}th percentile row (limit "
            f"{EXPORT_TOLERANCE}) and {diff:.3f} at worst (limit {EXPORT_MAX}); the export does not "
            "compute what was trained"
        )
    onnx.save(qdq, str(out))
    count = sum(n.op_type in QUANTIZED_OPS for n in qdq.graph.node)
    return Int8File(
        out,
        result,
        diff,
        count,
        typical,
        float(runtime.max()),
        float(np.percentile(runtime, EXPORT_QUANTILE)),
    )


def stage_info(
    qat_recipe: dict[str, Any], key: str, result: QatResult, sweep: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``pairedge.quantization`` entry of one stage (without the fp32 hash and the float nodes, added at
    export); ``sweep``: the sensitivity sweep's record (:meth:`SweepResult.to_dict`) when one ran."""
    info = {
        "qat_recipe": qat_recipe,
        "best_epoch": result.best_epoch,
        "validation": {k: round(v, 6) for k, v in result.validation.items()},
        "activation_ranges": {k: round(v, 6) for k, v in result.ranges.items()},
        "excluded_nodes": [],
        "stage": key,
    }
    if sweep is not None:
        info["sensitivity"] = sweep
    return info


def config_of(qat_recipe: dict[str, Any], key: str) -> QatConfig:
    """The :class:`QatConfig` of stage ``key`` of a QAT recipe."""
    return QatConfig.from_dict(dict(qat_recipe[key]))
