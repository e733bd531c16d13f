"""The engine manifest of a person-detector engine (``pairedge build --detector MODEL.onnx``).

It sits beside the engine like a classifier stage's (``yolo.fp16.engine`` -> ``yolo.fp16.engine.json``),
shares its device fields and checks (:mod:`pairedge.runtime.backends.tensorrt_loader`: TensorRT version,
compute capability, DLA core, engine size and SHA-256, refused before deserialisation) and adds what the
runtime needs
to feed the engine and read its outputs without the ONNX file, which a robot may not carry::

    {"format": 1, "kind": "detector", "precision": "fp16", "tensorrt_version": "10.3.0.30",
     "cuda_version": "12.6", "device_name": "Orin", "compute_capability": "8.7",
     "onnx": {"file": "yolo.onnx", "sha256": "...", "size": 123}, "engine": {"file": "yolo.fp16.engine", ...},
     "image_input": "images", "size_input": null | "orig_target_sizes",
     "inputs": {"images": [1, 3, 640, 640]}, "input_size": [640, 640],
     "layout": {"kind": "ultralytics", "outputs": ["output0"], "box_format": null, "reason": "...",
                "resize": "letterbox-center", "rgb": true, "unit_scale": true},
     "dla_core": null, "gpu_fallback": false, "build": {...}, "pairedge_version": "0.1.0"}

``layout`` is the :class:`~pairedge.runtime.detectors.layouts.Layout` told apart from the ONNX graph at build
time (:func:`~pairedge.runtime.detectors.layouts.layout_record`; its preprocessing is the layout kind's, the
``resize`` / ``rgb`` / ``unit_scale`` keys say it for a reader); ``inputs`` are the fixed shapes of the one
optimisation profile (batch 1).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pairedge.runtime.backends.tensorrt_loader import (
    ANY_DEVICE,
    FORMAT,
    EngineFileError,
    check_device_fields,
    device_label,
    dla_arguments,
    manifest_path,
    read_manifest_json,
)
from pairedge.runtime.detectors.layouts import BOX_FORMATS, LAYOUTS, Layout, layout_from_record

KIND = "detector"


@dataclass(frozen=True)
class DetectorEngineManifest:
    """Contents of a detector engine manifest (the module docstring has the JSON layout)."""

    precision: str
    tensorrt_version: str
    cuda_version: str
    device_name: str
    compute_capability: str
    onnx: Mapping[str, Any]
    engine: Mapping[str, Any]
    image_input: str
    inputs: Mapping[str, list[int]]
    input_size: tuple[int, int]
    layout: Mapping[str, Any]
    size_input: str | None = None
    dla_core: int | None = None
    gpu_fallback: bool = False
    build: Mapping[str, Any] = field(default_factory=dict)
    pairedge_version: str = ""
    kind: str = KIND
    format: int = FORMAT

    def to_json(self) -> str:
        import json

        data = asdict(self)
        data["input_size"] = list(self.input_size)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def write(self, engine: Path) -> Path:
        """Write beside ``engine``; returns the manifest path."""
        path = manifest_path(engine)
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    @property
    def to_layout(self) -> Layout:
        """The recorded :class:`Layout`."""
        return layout_from_record(self.layout)

    @property
    def device(self) -> str:
        return device_label(self.dla_core)

    def rebuild_command(self, onnx: Path | str, *, dla_core: int | None | str = ANY_DEVICE) -> str:
        """The ``pairedge build --detector`` command that rebuilds this engine from ``onnx`` (for
        ``dla_core``: None the GPU, N DLA core N; ``ANY_DEVICE``: the recorded device)."""
        core = self.dla_core if dla_core == ANY_DEVICE else dla_core
        parts = ["pairedge", "build", "--detector", str(onnx), "--precision", self.precision]
        return shlex.join(parts + dla_arguments(core, self.gpu_fallback))  # type: ignore[arg-type]

    @classmethod
    def read(cls, engine: Path) -> DetectorEngineManifest:
        """Read and type-check the manifest of a detector ``engine``.

        Raises:
            EngineFileError: missing, unreadable, a classifier's, missing keys or wrong types.
        """
        path, data = read_manifest_json(engine)
        if data.get("kind") != KIND:
            raise EngineFileError(
                f"{path}: not a detector engine manifest (kind {data.get('kind', 'classifier')!r}); build a "
                "detector engine with `pairedge build --detector MODEL.onnx`"
            )
        required = [k for k, f in cls.__dataclass_fields__.items() if _required(f)]
        missing = [k for k in required if k not in data]
        if missing:
            raise EngineFileError(f"{path}: detector engine manifest lacks {', '.join(missing)}; rebuild it")
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        check_device_fields(path, values)
        _check_detector_fields(path, values)
        values["input_size"] = tuple(values["input_size"])
        return cls(**values)


def _required(f: Any) -> bool:
    from dataclasses import MISSING

    return f.default is MISSING and f.default_factory is MISSING


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_detector_fields(path: Path, values: Mapping[str, Any]) -> None:
    """Refuse wrong types in the detector fields (before the runtime trusts them)."""

    def bad(key: str, what: str) -> EngineFileError:
        return EngineFileError(
            f"{path}: {key!r}: expected {what}, got {values.get(key)!r}; rebuild the engine"
        )

    inputs = values["inputs"]
    if (
        not isinstance(inputs, dict)
        or not inputs
        or not all(
            isinstance(k, str) and isinstance(s, list) and all(_is_int(d) and d > 0 for d in s)
            for k, s in inputs.items()
        )
    ):
        raise bad("inputs", "an object of input name -> positive shape")
    if not isinstance(values["image_input"], str) or values["image_input"] not in inputs:
        raise bad("image_input", "the name of one of 'inputs'")
    size_input = values.get("size_input")
    if size_input is not None and (not isinstance(size_input, str) or size_input not in inputs):
        raise bad("size_input", "null or the name of one of 'inputs'")
    size = values["input_size"]
    if not (isinstance(size, list) and len(size) == 2 and all(_is_int(v) and v > 0 for v in size)):
        raise bad("input_size", "[height, width]")
    layout = values["layout"]
    ok = (
        isinstance(layout, dict)
        and layout.get("kind") in LAYOUTS
        and isinstance(layout.get("outputs"), list)
        and all(isinstance(o, str) for o in layout["outputs"])
        and layout.get("box_format") in (None, *BOX_FORMATS)
    )
    if not ok:
        raise bad("layout", f"an object with kind ({', '.join(LAYOUTS)}), outputs, box_format")
