"""The person detector shipped inside the package: YOLOX-Nano (Megvii, Apache-2.0), verified like the model.

``pairedge/models/detectors/yolox_nano/`` holds the COCO-pretrained YOLOX-Nano export exactly as YOLOX's
``tools/export_onnx.py`` writes it by default (the raw layout, input ``[1, 3, 416, 416]``), its fp16 copy
(made by ``python -m pairedge.apps.recipes.bundled_detector``), YOLOX's ``LICENSE``, ``PROVENANCE.md`` (where
the file comes from) and ``manifest.json``: name, source, licence, layout, and each file's role, SHA-256 and
size. :func:`bundled_detector` re-hashes the file it hands out and refuses one that differs from the manifest,
as the classifier folder's files are (:mod:`pairedge.core.modelfolder`).

``"yolox-nano"`` (:data:`DEFAULT_DETECTOR`) is the default of ``pairedge run`` without a detection file, of
the ROS node, and of ``pairedge build --detector``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pairedge.core import limits
from pairedge.core.bundled import default_model_dir
from pairedge.core.errors import FormatError, ModelError, ModelIntegrityError
from pairedge.core.modelfolder import sha256_file

#: The bundled detectors: name -> folder under ``pairedge/models/detectors/``. Read-only.
BUNDLED_DETECTORS: Mapping[str, str] = MappingProxyType({"yolox-nano": "yolox_nano"})
#: The default person detector wherever one runs without being named.
DEFAULT_DETECTOR = "yolox-nano"
MANIFEST = "manifest.json"
PRECISIONS = ("fp32", "fp16")


def detectors_dir() -> Path:
    """``pairedge/models/detectors`` of the installed package (beside the bundled classifier model)."""
    return default_model_dir().parent / "detectors"


@dataclass(frozen=True)
class BundledDetector:
    """A bundled detector as its manifest describes it.

    Attributes:
        name: the registry name (``"yolox-nano"``). folder: its folder.
        title, source, licence: what it is, where it comes from, its licence (SPDX id).
        layout: the layout its export writes (:mod:`pairedge.runtime.detectors.layouts`).
        files: precision -> ``{"name", "sha256", "size"}``.
    """

    name: str
    folder: Path
    title: str
    source: str
    licence: str
    layout: str
    files: Mapping[str, Mapping[str, Any]]

    def path(self, precision: str = "fp32") -> Path:
        """The verified file of ``precision``.

        Raises:
            ModelError: no file of that precision. ModelIntegrityError: missing, or its SHA-256 / size differ
            from the manifest (reinstall pairedge).
        """
        entry = self.files.get(precision)
        if entry is None:
            raise ModelError(
                f"bundled detector {self.name}: no {precision} file; expected one of {', '.join(self.files)}"
            )
        path = self.folder / str(entry["name"])
        fix = "reinstall pairedge (pip install --force-reinstall pairedge)"
        if not path.is_file():
            raise ModelIntegrityError(f"bundled detector {self.name}: {path} is missing; {fix}")
        size = path.stat().st_size
        if size != entry["size"]:
            raise ModelIntegrityError(
                f"bundled detector {self.name}: {path} is {size} bytes, the manifest says "
                f"{entry['size']}; {fix}"
            )
        digest = sha256_file(path, "a bundled detector file", limits.MAX_MODEL_BYTES)
        if digest != entry["sha256"]:
            raise ModelIntegrityError(
                f"bundled detector {self.name}: {path} has SHA-256 {digest}, the manifest says "
                f"{entry['sha256']}; {fix}"
            )
        return path

    def describe(self) -> str:
        """A short name for notes: ``"YOLOX-Nano (bundled, Apache-2.0)"``."""
        return f"{self.title} (bundled, {self.licence})"


def is_bundled_name(spec: object) -> bool:
    """Whether ``spec`` names a bundled detector."""
    return isinstance(spec, str) and spec.strip().lower() in BUNDLED_DETECTORS


def bundled_detector(name: str = DEFAULT_DETECTOR) -> BundledDetector:
    """The bundled detector ``name`` from its manifest.

    Raises:
        ModelError: not a bundled name, or its manifest is missing or malformed (reinstall pairedge).
    """
    key = name.strip().lower()
    if key not in BUNDLED_DETECTORS:
        raise ModelError(
            f"{name!r} is not a bundled detector; expected one of {', '.join(BUNDLED_DETECTORS)}"
        )
    folder = detectors_dir() / BUNDLED_DETECTORS[key]
    manifest = folder / MANIFEST
    try:
        limits.regular_file(manifest, "a bundled detector manifest", limits.MAX_SIDECAR_BYTES)
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (FormatError, OSError, ValueError) as exc:
        raise ModelError(
            f"bundled detector {key}: {manifest} is missing or unreadable ({exc}); reinstall pairedge"
        ) from None
    try:
        files = {
            str(f["role"]): {"name": str(f["name"]), "sha256": str(f["sha256"]), "size": int(f["size"])}
            for f in data["files"]
        }
        return BundledDetector(
            key,
            folder,
            str(data["title"]),
            str(data["source"]),
            str(data["licence"]),
            str(data["layout"]),
            MappingProxyType(files),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"bundled detector {key}: {manifest} lacks {exc}; reinstall pairedge") from None
