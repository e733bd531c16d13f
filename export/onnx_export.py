"""PyTorch classifier -> ONNX: dynamic pair axis, declared opset, checker, shape inference, metadata, parity.

The graph contract is the one of :mod:`pairedge.core.modelmeta`: input ``features`` (pairs, F) float32 of RAW
feature values (z-scoring is the graph's first op), output ``logits`` (pairs, C) float32, ``pairs``
dynamic. The file carries :class:`~pairedge.core.modelmeta.ModelMetadata` in ``metadata_props``. After
writing, ONNX Runtime (CPU) and PyTorch are run on the same inputs and the maximum absolute logit difference
is returned (fp32: about 1e-6).
"""

from __future__ import annotations

import copy
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
from pairedge.core.artefacts import artefact
from pairedge.core.errors import InputError, ModelError
from pairedge.core.modelfolder import Manifest, register_files
from pairedge.core.modelmeta import INPUT_NAME, OUTPUT_NAME, ModelMetadata
from pairedge.export.checkpoint import Checkpoint, check_finite
from pairedge.export.models import count_parameters, get_normalization
from pairedge.runtime.backends.ort_session import make_session
from torch import nn

DEFAULT_OPSET = 17
PAIR_AXIS = "pairs"
CHECK_BATCHES = (1, 7, 300)
#: ONNX Runtime only guarantees opsets >= 7 (opset 6 graphs of these models fail there: no Sub(6) kernel).
ORT_MIN_OPSET = 7


def supported_opsets() -> tuple[int, int]:
    """The ai.onnx opsets these models export to, ``(lowest, highest)``, inclusive.

    The classic TorchScript exporter writes opsets 7 to 20 (torch 2.x: ``ONNX_MIN_OPSET`` /
    ``ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET``; above 20 it warns and then fails for 24 and up), ONNX Runtime
    guarantees 7 and up, and the installed onnx checks up to ``onnx.defs.onnx_opset_version()``. Every
    architecture exports and matches PyTorch at each opset of that range (tests/apps/cli/test_export.py).
    """
    try:
        from torch.onnx import _constants as limits

        lo = int(getattr(limits, "ONNX_MIN_OPSET", ORT_MIN_OPSET))
        hi = int(getattr(limits, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", 20))
    except ImportError:  # pragma: no cover - a torch without the constants module
        lo, hi = ORT_MIN_OPSET, 20
    return max(lo, ORT_MIN_OPSET), min(hi, int(onnx.defs.onnx_opset_version()))


def check_opset(opset: object) -> int:
    """``opset`` as an int in :func:`supported_opsets`, checked before any export work.

    Raises:
        InputError: not an integer, or outside the supported range (the message gives the range).
    """
    lo, hi = supported_opsets()
    if isinstance(opset, bool) or not isinstance(opset, int | np.integer) or not lo <= int(opset) <= hi:
        raise InputError(
            f"--opset {opset}: expected an ai.onnx opset from {lo} to {hi} (what torch {torch.__version__}'s "
            f"exporter, onnx {onnx.__version__} and ONNX Runtime support for these models); the default is "
            f"{DEFAULT_OPSET}"
        )
    return int(opset)


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_model` wrote and measured.

    Attributes:
        path: the ONNX file.
        metadata: what it declares.
        max_abs_diff: max |logits_onnxruntime - logits_torch| over every checked batch.
        max_abs_logit: max |logits_torch| over the same inputs (the scale the difference is relative to).
        batch_sizes: the pair counts checked.
        opset: the declared ai.onnx opset.
        num_parameters: trainable parameters of the PyTorch model.
        onnx_bytes: size of the file.
    """

    path: Path
    metadata: ModelMetadata
    max_abs_diff: float
    max_abs_logit: float
    batch_sizes: tuple[int, ...]
    opset: int
    num_parameters: int
    onnx_bytes: int


def _to_onnx_bytes(model: nn.Module, num_features: int, opset: int) -> bytes:
    """Trace ``model`` (eval mode) with the classic TorchScript exporter; dynamic first axis."""
    buf = io.BytesIO()
    dummy = torch.zeros(2, num_features)
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated in favour of the torch.export one, which needs onnxscript;
        # it is exact for these small static MLP graphs.
        warnings.simplefilter("ignore", category=DeprecationWarning)
        warnings.simplefilter("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        # opsets 7 and 8 keep initializers as graph inputs; torch says so on every export
        warnings.filterwarnings("ignore", message=".*keep_initializers_as_inputs.*")
        torch.onnx.export(
            model,
            (dummy,),
            buf,  # type: ignore[arg-type]  # a file-like object works with the TorchScript exporter
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: PAIR_AXIS}, OUTPUT_NAME: {0: PAIR_AXIS}},
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    return buf.getvalue()


def _finalise(raw: bytes, metadata: ModelMetadata, opset: int) -> onnx.ModelProto:
    """Attach metadata, then check (full) and infer shapes; verify the graph contract."""
    proto = onnx.load_from_string(raw)
    proto.producer_name = "pairedge"
    proto.producer_version = metadata.pairedge_version
    proto.doc_string = (
        f"pairedge stage-{metadata.stage} classifier ({metadata.architecture}), feature spec "
        f"{metadata.feature_spec} v{metadata.feature_spec_version}, labels {list(metadata.labels)}"
    )
    del proto.metadata_props[:]
    onnx.helper.set_model_props(proto, metadata.to_props())
    onnx.checker.check_model(proto, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    out = inferred.graph.output[0].type.tensor_type.shape.dim
    inp = inferred.graph.input[0].type.tensor_type.shape.dim
    got = (inp[0].dim_param, inp[1].dim_value, out[0].dim_param, out[1].dim_value)
    want = (PAIR_AXIS, metadata.num_features, PAIR_AXIS, len(metadata.labels))
    if got != want:
        raise ModelError(f"exported graph has shapes (in, F, out, C) = {got}, expected {want}")
    declared = {o.domain: o.version for o in inferred.opset_import}
    if declared.get("", declared.get("ai.onnx")) != opset:
        raise ModelError(f"exported graph declares opset {declared}, expected {opset}")
    return inferred


def sample_inputs(metadata: ModelMetadata, n: int, seed: int = 0) -> np.ndarray:
    """(n, F) float32 raw features drawn around the model's normalisation statistics."""
    rng = np.random.default_rng(seed)
    mean = np.asarray(metadata.norm_mean, np.float32)
    std = np.asarray(metadata.norm_std, np.float32)
    return (mean + std * rng.standard_normal((n, len(mean))).astype(np.float32)).astype(np.float32)


def max_abs_difference(model: nn.Module, onnx_path: str | Path, X: np.ndarray) -> float:
    """max |ONNX Runtime(X) - torch(X)| for raw features X (N, F) float32 (CPU provider)."""
    return parity_stats(model, onnx_path, X)[0]


def parity_stats(model: nn.Module, onnx_path: str | Path, X: np.ndarray) -> tuple[float, float]:
    """(max |ONNX Runtime(X) - torch(X)|, max |torch(X)|) for raw features X (N, F) float32."""

    session = make_session(onnx_path, what=str(onnx_path))
    (got,) = session.run([OUTPUT_NAME], {INPUT_NAME: np.ascontiguousarray(X, np.float32)})
    model.eval()
    with torch.no_grad():
        ref = model(torch.from_numpy(np.ascontiguousarray(X, np.float32))).numpy()
    if got.shape != ref.shape:
        raise ModelError(f"{onnx_path}: ONNX Runtime output shape {got.shape} != PyTorch {ref.shape}")
    if not got.size:
        return 0.0, 0.0
    return float(np.max(np.abs(got - ref))), float(np.max(np.abs(ref)))


def export_model(
    model: nn.Module,
    metadata: ModelMetadata,
    out: str | Path,
    *,
    opset: int = DEFAULT_OPSET,
    check_batches: Sequence[int] = CHECK_BATCHES,
    check_inputs: np.ndarray | None = None,
) -> ExportResult:
    """Export ``model`` (a copy, in eval mode) to ``out`` and measure ONNX Runtime vs PyTorch.

    Args:
        model: maps raw features (N, F) float32 to logits (N, C).
        metadata: written to ``metadata_props``; its normalisation statistics must be the model's.
        out: the ``.onnx`` path (parent folders are created).
        opset: ai.onnx opset to declare, in :func:`supported_opsets` (InputError otherwise).
        check_batches: pair counts of the random parity inputs.
        check_inputs: optional real (N, F) features checked as well.
    """
    opset = check_opset(opset)  # before any work: torch would dump its graph and warn on a bad one
    model = copy.deepcopy(model).cpu().float().eval()
    check_finite(model, "the model to export")
    metadata = metadata.validated(str(out))
    mean, std = get_normalization(model)
    if not (np.allclose(mean, metadata.norm_mean) and np.allclose(std, metadata.norm_std)):
        raise ModelError("metadata normalisation statistics differ from the model's buffers")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    proto = _finalise(_to_onnx_bytes(model, metadata.num_features, opset), metadata, opset)
    onnx.save(proto, str(out))
    stats = [parity_stats(model, out, sample_inputs(metadata, n, seed=n)) for n in check_batches]
    if check_inputs is not None and len(check_inputs):
        stats.append(parity_stats(model, out, check_inputs))
    if not all(np.isfinite(d) and np.isfinite(m) for d, m in stats):
        out.unlink(missing_ok=True)
        raise ModelError(
            f"{out}: the exported model produces non-finite logits (NaN or infinity) on finite inputs "
            f"(max |difference|, max |logit| per check: {[(float(d), float(m)) for d, m in stats]}); "
            "file removed. Check the weights and normalisation statistics (std must be > 0)"
        )
    return ExportResult(
        path=out,
        metadata=metadata,
        max_abs_diff=max(d for d, _ in stats) if stats else float("nan"),
        max_abs_logit=max(m for _, m in stats) if stats else float("nan"),
        batch_sizes=tuple(int(n) for n in check_batches),
        opset=opset,
        num_parameters=count_parameters(model),
        onnx_bytes=out.stat().st_size,
    )


def register_export(result: ExportResult) -> Manifest | None:
    """Record an exported ``stage{1,2}.onnx`` in its folder's ``manifest.json`` (created if missing).

    Files with other names are not part of a model folder's layout and are not registered (returns None);
    :func:`pairedge.runtime.loading.find_models` only picks ``stage1.onnx`` / ``stage2.onnx``.
    """
    name = result.path.name
    fp32 = artefact(result.metadata.stage, "fp32")
    if name != fp32.onnx:
        return None
    return register_files(result.path.parent, {name: fp32.role})


def export_checkpoint(ckpt: Checkpoint, out: str | Path, **kwargs: object) -> ExportResult:
    """Export a loaded :class:`Checkpoint` (pairedge-trained or imported from the paper's code)."""
    return export_model(ckpt.model, ckpt.metadata(), out, **kwargs)  # type: ignore[arg-type]
