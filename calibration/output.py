"""What ``pairedge calibrate`` writes: ``calibration.json`` / ``.md`` and the stage files, moved into place at
once.

:func:`folder_report` assembles the report (versions, sources and input hashes, options, per-stage figures);
:func:`write_folder` writes the fp32 copies, ``stage{1,2}.int8.onnx`` / ``.fp16.onnx`` (stamped with their
precision and provenance) and the reports into a temporary folder beside ``out``, registers them in
``manifest.json`` and moves them into place (:func:`move_into_place`): an error leaves nothing behind. Every
file name and role is :mod:`pairedge.core.artefacts`'.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pairedge.calibration.quantize import stamp
from pairedge.calibration.report import write_reports
from pairedge.core import artefacts
from pairedge.core.modelfolder import MANIFEST_NAME, register_files, sha256_file
from pairedge.core.version import __version__

if TYPE_CHECKING:
    from pairedge.calibration.api import CalibrateOptions
    from pairedge.calibration.collect import Collected


def folder_report(
    folder: Path, models: Any, collected: Collected, options: CalibrateOptions, stages: dict[str, Any]
) -> dict[str, Any]:
    """The ``calibration.json`` content of one run (``stages``: per stage what :func:`write_folder`
    writes)."""
    import onnxruntime

    inputs = {str(folder / name): sha256_file(folder / name) for name in artefacts.stage_files("fp32")}
    for extra in (options.video, options.detections, *options.features):
        if extra is not None and Path(extra).is_file():
            inputs[str(extra)] = sha256_file(extra)
    opts = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}
    opts["features"] = [str(p) for p in options.features]
    return {
        "pairedge_version": __version__,
        "onnxruntime_version": onnxruntime.__version__,
        "model": {
            "folder": str(folder),
            "feature_spec": models.spec.name,
            "labels": list(models.labels),
        },
        "method": options.method,
        "percentile": options.percentile if options.method == "percentile" else None,
        "placement": options.placement,
        "equalize": options.equalize,
        "target_agreement": options.target_agreement,
        "sources": list(collected.sources),
        "inputs_sha256": inputs,
        "options": opts,
        "stages": {k: v["report"] for k, v in stages.items()},
    }


def write_folder(model: Path, out: Path, stages: dict[str, Any], report: dict[str, Any]) -> dict[str, str]:
    """Write every file of a calibration into ``out`` at once (module docstring); name -> path written.

    ``stages``: per fp32 stage role (``"stage1"``, ``"stage2"``) what
        :func:`pairedge.calibration.api.calibrate`
    made of it (the ``int8`` and ``fp16`` ModelProtos, ``fp32_path``, ``config``, ``report``).
    """
    import onnx

    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    roles: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.calibrate-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    try:
        for key, st in stages.items():
            fp32 = artefacts.by_role(key)
            if fp32 is None or fp32.precision != "fp32":
                raise ValueError(f"calibration stages are keyed by fp32 stage roles, got {key!r}")
            int8, fp16 = artefacts.artefact(fp32.stage, "int8"), artefacts.artefact(fp32.stage, "fp16")
            shutil.copy2(st["fp32_path"], tmp / fp32.onnx)
            roles[fp32.onnx] = fp32.role
            fp32_sha = sha256_file(st["fp32_path"])
            info = {
                "method": st["config"].method,
                "placement": st["config"].placement,
                "layers": {
                    k: {"range": v["range"]} for k, v in st["report"]["layers"].get("weights", {}).items()
                },
                "excluded_nodes": list(st["config"].exclude),
                "equalized": sorted(st["report"]["equalized"]),
                "fp32_sha256": fp32_sha,
                "held_out_agreement": st["report"]["held_out"]["int8"]["agreement"],
            }
            onnx.save(stamp(st["int8"], int8.precision, info), str(tmp / int8.onnx))
            fp16_info = {"fp32_sha256": fp32_sha, "io": "float32", "compute": "float16"}
            onnx.save(stamp(st["fp16"], fp16.precision, fp16_info), str(tmp / fp16.onnx))
            roles[int8.onnx] = int8.role
            roles[fp16.onnx] = fp16.role
        write_reports(tmp, report)
        roles[artefacts.CALIBRATION_FILE] = artefacts.CALIBRATION_ROLE
        roles[artefacts.CALIBRATION_REPORT_FILE] = artefacts.CALIBRATION_REPORT_ROLE
        fresh = not out.exists() or (out.is_dir() and not any(out.iterdir()))
        if fresh:
            register_files(tmp, roles)
        move_into_place(tmp, out)
        if not fresh:  # the model folder itself (or a copy): keep the other entries of its manifest
            register_files(out, roles)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {name: str(out / name) for name in [*roles, MANIFEST_NAME]}


def move_into_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out`` (new or empty folder), else replace ``out``'s files one by one, manifest
    last."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
        return
    for path in sorted(tmp.iterdir()):
        if not (out / path.name).is_file() or path.name not in artefacts.stage_files("fp32"):
            os.replace(path, out / path.name)
