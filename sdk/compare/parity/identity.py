"""Which model a pack was made with, and whether a candidate on the robot is that model (or derived from it).

A pack records the fp32 model's identity: SHA-256 of both ONNX files, feature spec and version, feature
options, labels of both stages, normalisation statistics, thresholds and training-data fingerprints.

A candidate is *the same model* when its files hash the same, *derived* when its metadata names the fp32
files it was made from (``pairedge calibrate`` records their SHA-256; an engine manifest the ONNX hash), and
*another model* when it names other fp32 files, when its stage-2 label **set** differs (another task), or
when it was trained on other data (its data fingerprints differ). Another model is refused before any
comparison (:class:`~pairedge.core.errors.ModelError`). A candidate whose files differ from the pack's and
that records no provenance is *unverified*: it is compared (the levels show how far it is) but the check can
never PASS — a pack made from another model must not pass (:attr:`ParityReport.passed`). Everything else
that can differ (spec, options, label order, normalisation) is what the levels are there to catch, and each
level names it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pairedge.core.errors import ModelError
from pairedge.core.modelfolder import load_onnx, sha256_file
from pairedge.runtime.loading import ModelPair


def model_identity(models: ModelPair, feature_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The identity a pack stores for the (fp32) model pair ``models`` run with ``feature_config``."""
    spec = models.spec
    m1, m2 = models.stage1.metadata, models.stage2.metadata
    return {
        "stage1_sha256": sha256_file(models.stage1.path),
        "stage2_sha256": sha256_file(models.stage2.path),
        "feature_spec": m1.feature_spec,
        "feature_spec_version": m1.feature_spec_version,
        "feature_config": _config_dict(spec, feature_config),
        "stage1_feature_names": list(spec.stage1_names),
        "stage2_feature_names": list(spec.stage2_names),
        "stage1_labels": list(m1.labels),
        "labels": list(m2.labels),
        "norm": {
            "stage1": {"mean": list(m1.norm_mean), "std": list(m1.norm_std)},
            "stage2": {"mean": list(m2.norm_mean), "std": list(m2.norm_std)},
        },
        "thresholds": {**dict(m2.thresholds), **dict(m1.thresholds)},
        "data_fingerprint": {"stage1": m1.data_fingerprint, "stage2": m2.data_fingerprint},
        "architecture": {"stage1": m1.architecture, "stage2": m2.architecture},
    }


def _config_dict(spec: Any, feature_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The complete extractor options (defaults filled in) as plain JSON values."""
    import dataclasses

    cfg = spec.make_config(dict(feature_config) if feature_config else None)
    if dataclasses.is_dataclass(cfg):
        return {k: _plain(v) for k, v in dataclasses.asdict(cfg).items()}  # type: ignore[arg-type]
    return {}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def declared_sources(meta_extra: Mapping[str, Any]) -> set[str]:
    """SHA-256 values a derived model's metadata gives for the fp32 file it was made from.

    Looks for keys such as ``source_sha256`` / ``fp32_sha256`` anywhere in ``meta_extra`` (two levels deep):
    the ``extra`` metadata, or the ``pairedge.quantization`` entry that ``pairedge calibrate`` writes.
    """
    return {
        value.removeprefix("sha256:")
        for key, value in _walk(meta_extra, 2)
        if "sha256" in key and any(w in key for w in ("source", "fp32", "onnx", "parent"))
    }


def _quantization_sources(path: Path) -> set[str]:
    """fp32 hashes named by the ``pairedge.quantization`` metadata entry ``pairedge calibrate`` writes."""
    import json

    try:
        props = {p.key: p.value for p in load_onnx(path).metadata_props}
        info = json.loads(props.get("pairedge.quantization", "{}"))
    except Exception:  # noqa: BLE001 - the loader already accepted the file; no entry means no claim
        return set()
    return declared_sources(info) if isinstance(info, Mapping) else set()


def _walk(obj: Mapping[str, Any], depth: int) -> Iterator[tuple[str, str]]:
    for key, value in obj.items():
        if isinstance(value, str):
            yield str(key).lower(), value
        elif isinstance(value, Mapping) and depth > 0:
            yield from _walk(value, depth - 1)


def relation(pack_identity: Mapping[str, Any], candidate: ModelPair) -> tuple[str, str]:
    """How ``candidate`` relates to the pack's model: ``("same" | "derived" | "unverified", note)``.

    Raises:
        ModelError: the candidate is another model (see the module docstring), naming what differs.
    """
    where = f"{candidate.stage1.path.parent}"
    want_labels = list(pack_identity["labels"])
    have = list(candidate.labels)
    if sorted(have) != sorted(want_labels):
        raise ModelError(
            f"pack from another model: the pack's stage-2 labels are {want_labels}, the model in {where} has "
            f"{have}; make a pack with this model's fp32 folder (`pairedge parity pack`)"
        )
    stages = (("stage1", candidate.stage1), ("stage2", candidate.stage2))
    hashes = {name: sha256_file(mf.path) for name, mf in stages}
    if all(hashes[n] == pack_identity[f"{n}_sha256"] for n, _ in stages):
        return "same", "identical files (SHA-256 match the pack's fp32 model)"
    claimed = {n: declared_sources(mf.metadata.extra) | _quantization_sources(mf.path) for n, mf in stages}
    if all(claimed.values()):
        wrong = [n for n, _ in stages if pack_identity[f"{n}_sha256"] not in claimed[n]]
        if wrong:
            raise ModelError(
                f"pack from another model: {where} was made from {wrong[0]} "
                f"{sorted(claimed[wrong[0]])[0][:12]}..., the pack from "
                f"{pack_identity[f'{wrong[0]}_sha256'][:12]}...; make a pack with the fp32 folder this model "
                "was calibrated / built from"
            )
        return "derived", "derived from the pack's fp32 model (metadata names its SHA-256)"
    prints = pack_identity.get("data_fingerprint", {})
    for name, mf in stages:
        fp = mf.metadata.data_fingerprint
        if fp and prints.get(name) and fp != prints[name]:
            raise ModelError(
                f"pack from another model: {where} {name} was trained on data {fp[:19]}..., the pack's model "
                f"on {prints[name][:19]}...; make a pack with this model's fp32 folder (`pairedge parity "
                "pack`)"
            )
    ours = "/".join(hashes[n][:12] for n, _ in stages)
    theirs = "/".join(str(pack_identity[f"{n}_sha256"])[:12] for n, _ in stages)
    return "unverified", (
        f"the model's files (SHA-256 {ours}...) are not the pack's fp32 files ({theirs}...) and "
        "record no fp32 source hash; make a pack with this model's fp32 folder (`pairedge parity pack`), or "
        "check a model calibrated (`pairedge calibrate`) from the pack's fp32 folder"
    )
