"""Make the bundled detector's folder: ``python -m pairedge.apps.recipes.bundled_detector``.

Checks that ``yolox_nano.onnx`` in the folder (or ``--source FILE``, copied in) is the YOLOX-Nano export of
its provenance (SHA-256 :data:`SOURCE_SHA256`), writes its fp16 copy ``yolox_nano.fp16.onnx``
(:func:`pairedge.calibration.fp16.to_fp16`: float16 weights and compute, float32 input and output) and
``manifest.json`` (:mod:`pairedge.runtime.detectors.bundled` reads it: title, source, licence, layout, and
each file's role, SHA-256 and size). ``LICENSE`` and ``PROVENANCE.md`` are kept beside them as committed.
Deterministic: the same source gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from pairedge.calibration.fp16 import to_fp16
from pairedge.core.modelfolder import sha256_file
from pairedge.runtime.detectors.bundled import MANIFEST, detectors_dir

#: The SHA-256 of YOLOX-Nano's raw export as recorded in its provenance (PROVENANCE.md).
SOURCE_SHA256 = "e8af074932d4ed7e232278e3055cefcdea3edf178874a3694ae292649fb464dd"
FP32, FP16 = "yolox_nano.onnx", "yolox_nano.fp16.onnx"
INFO = {
    "format": 1,
    "name": "yolox-nano",
    "title": "YOLOX-Nano",
    "source": "YOLOX (Megvii; Ge et al. 2021), COCO-pretrained, raw export of tools/export_onnx.py",
    "licence": "Apache-2.0",
    "licence_file": "LICENSE",
    "provenance_file": "PROVENANCE.md",
    "layout": "yolox-raw",
    "input": [1, 3, 416, 416],
    "classes": "COCO 80 (0 = person)",
}


def make(folder: Path, source: Path | None = None) -> dict[str, object]:
    """Write the fp16 copy and the manifest into ``folder``; returns the manifest."""
    import onnx

    folder.mkdir(parents=True, exist_ok=True)
    if source is not None and source.resolve() != (folder / FP32).resolve():
        shutil.copyfile(source, folder / FP32)
    digest = sha256_file(folder / FP32)
    if digest != SOURCE_SHA256:
        raise SystemExit(f"{folder / FP32}: SHA-256 {digest}, expected YOLOX-Nano's {SOURCE_SHA256}")
    model = onnx.load(str(folder / FP32))
    (input_name,) = [i.name for i in model.graph.input]
    (output_name,) = [o.name for o in model.graph.output]
    onnx.save(
        to_fp16(model, keep_fp32=[], input_name=input_name, output_name=output_name), str(folder / FP16)
    )
    files = [
        {
            "name": name,
            "role": role,
            "sha256": sha256_file(folder / name),
            "size": (folder / name).stat().st_size,
        }
        for name, role in ((FP32, "fp32"), (FP16, "fp16"))
    ]
    manifest = {**INFO, "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=detectors_dir() / "yolox_nano", help="the folder")
    parser.add_argument("--source", type=Path, default=None, help="YOLOX-Nano's raw export to copy in")
    args = parser.parse_args(argv)
    manifest = make(args.out, args.source)
    for f in manifest["files"]:  # type: ignore[attr-defined]
        print(f"{f['name']}: {f['size']:,} bytes, sha256 {f['sha256']}")


if __name__ == "__main__":
    main()
