"""Candidate model folders for the parity tests: the bundled model with one thing changed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from pairedge.default_model import default_model_dir

Edit = Callable[[onnx.ModelProto, dict[str, str]], None]


def make_candidate(tmp: Path, edits: dict[int, Edit] | None = None) -> Path:
    """A copy of the bundled model's two ONNX files (no manifest), stage ``n`` changed by ``edits[n]``."""
    folder = tmp / "candidate"
    folder.mkdir(parents=True, exist_ok=True)
    for stage in (1, 2):
        src = default_model_dir() / f"stage{stage}.onnx"
        if edits is None or stage not in edits:
            shutil.copy(src, folder / src.name)
            continue
        model = onnx.load(str(src))
        props = {p.key: p.value for p in model.metadata_props}
        edits[stage](model, props)
        del model.metadata_props[:]
        for k, v in props.items():
            model.metadata_props.add(key=k, value=v)
        onnx.save(model, str(folder / src.name))
    return folder


def set_initializer(model: onnx.ModelProto, name: str, change: Callable[[np.ndarray], np.ndarray]) -> None:
    """Replace initializer ``name`` by ``change(its value)``."""
    for k, init in enumerate(model.graph.initializer):
        if init.name == name:
            new = numpy_helper.from_array(change(numpy_helper.to_array(init).copy()), name)
            model.graph.initializer[k].CopyFrom(new)
            return
    raise KeyError(name)


def set_extra(props: dict[str, str], **values: object) -> None:
    extra = json.loads(props.get("pairedge.extra", "{}"))
    extra.update(values)
    props["pairedge.extra"] = json.dumps(extra)
