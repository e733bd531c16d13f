"""Loading an exported classifier: read and check its metadata before any runtime touches the file.

A pairedge ONNX model declares itself in ``metadata_props`` (see :mod:`pairedge.core.modelmeta`). The loader
refuses, with a :class:`ModelError` that says how to fix it: a file that is not ONNX, a model without
pairedge metadata, a feature spec (or spec version) this pairedge does not know, an input/output contract
that does not match the metadata, external-data references that leave the model's folder (absolute
paths, ``..``, symlinks pointing elsewhere) or are missing (SPEC section 9), and floating-point weights that
hold NaN or infinity. Metadata is validated field by field (:func:`pairedge.core.modelmeta.validate_fields`).

Nothing is opened before :func:`pairedge.core.limits.regular_file` accepts it: the model file and every
external data file must be regular files (never a FIFO or a device such as ``/dev/zero``) within
:data:`pairedge.core.limits.MAX_MODEL_BYTES`, and the external data all tensors declare stays within it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError, ModelError
from pairedge.core.features import FeatureSpec, get_spec
from pairedge.core.modelfolder import load_onnx
from pairedge.core.modelmeta import INPUT_NAME, OUTPUT_NAME, ModelMetadata

_EXTERNAL = 1  # onnx.TensorProto.EXTERNAL


@dataclass(frozen=True)
class ModelFile:
    """A checked classifier file.

    Attributes:
        path: the .onnx file (absolute).
        metadata: its pairedge metadata.
        spec: the feature spec the metadata names.
        has_external_data: True when some tensor lives in a side file (all inside ``path.parent``).
    """

    path: Path
    metadata: ModelMetadata
    spec: FeatureSpec
    has_external_data: bool = False

    @property
    def num_features(self) -> int:
        return self.metadata.num_features

    @property
    def labels(self) -> tuple[str, ...]:
        return self.metadata.labels

    @property
    def num_classes(self) -> int:
        return len(self.metadata.labels)


def load_model(path: str | Path, *, stage: int | None = None) -> ModelFile:
    """Read and check an exported classifier (the weights are not loaded here; a backend does that).

    Args:
        path: the .onnx file.
        stage: when given, the model must declare this stage (1 or 2).

    Raises:
        ModelError: see the module docstring.
    """
    given = Path(path).expanduser()
    if not given.exists():
        raise ModelError(f"{path}: model file not found; fix the path (a model directory holds stage1.onnx)")
    try:  # the path as given, so that a symlink to /dev/zero is named as such
        proto = load_onnx(given, "an ONNX classifier (.onnx)")
    except FormatError as exc:
        raise ModelError(str(exc)) from None
    file = given.resolve()
    props = {p.key: p.value for p in proto.metadata_props}
    meta = ModelMetadata.from_props(props, source=str(file))
    if stage is not None and meta.stage != stage:
        raise ModelError(f"{file}: expected a stage-{stage} model, got metadata stage {meta.stage}")
    spec = _check_spec(file, meta)
    _check_io(file, proto, meta)
    external = check_external_data(file, proto)
    _check_finite(file, proto)
    return ModelFile(path=file, metadata=meta, spec=spec, has_external_data=external)


def _check_spec(file: Path, meta: ModelMetadata) -> FeatureSpec:
    try:
        spec = get_spec(meta.feature_spec)
    except ModelError as exc:
        raise ModelError(f"{file}: {exc}") from None
    layout = spec.for_version(meta.feature_spec_version) if spec.version else spec
    if layout is not None:
        spec = layout  # an older version this pairedge still implements (its own layout)
    elif spec.version and meta.feature_spec_version != spec.version:
        raise ModelError(
            f"{file}: trained on feature spec {spec.name!r} version {meta.feature_spec_version!r}, this "
            f"pairedge implements version {', '.join(spec.versions)}; re-export the model with this pairedge "
            "version"
        )
    width = spec.stage1_dim if meta.stage == 1 else spec.stage2_dim
    if meta.num_features != width:
        raise ModelError(
            f"{file}: stage-{meta.stage} model of spec {spec.name!r} expects {width} features, metadata says "
            f"num_features={meta.num_features}"
        )
    if meta.stage == 1 and len(meta.labels) not in (1, 2):
        raise ModelError(
            f"{file}: a stage-1 model has 2 classes (not / interacting), got labels {meta.labels}"
        )
    return spec


def _dims(value_info: Any) -> list[int | str]:
    return [
        d.dim_value if d.HasField("dim_value") else d.dim_param for d in value_info.type.tensor_type.shape.dim
    ]


def _check_io(file: Path, proto: Any, meta: ModelMetadata) -> None:
    initializers = {t.name for t in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    names_in = [i.name for i in inputs]
    names_out = [o.name for o in proto.graph.output]
    if names_in != [INPUT_NAME] or OUTPUT_NAME not in names_out:
        raise ModelError(
            f"{file}: expected one input {INPUT_NAME!r} and an output {OUTPUT_NAME!r}, got inputs {names_in} "
            f"and outputs {names_out}; export with `pairedge export`"
        )
    checks = (
        (inputs[0], meta.num_features, "input features"),
        (proto.graph.output[names_out.index(OUTPUT_NAME)], len(meta.labels), "output logits"),
    )
    for info, width, what in checks:
        dims = _dims(info)
        if len(dims) != 2 or (isinstance(dims[1], int) and dims[1] not in (0, width)):
            raise ModelError(f"{file}: {what}: expected shape (pairs, {width}), got {dims}")
        if info.type.tensor_type.elem_type != 1:  # onnx.TensorProto.FLOAT
            raise ModelError(
                f"{file}: {what}: expected float32, got ONNX element type {info.type.tensor_type.elem_type}"
            )


def _tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto of a graph, its subgraphs and node attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)


def check_external_data(file: Path, proto: Any) -> bool:
    """Check every external-data reference of ``proto`` (loaded from ``file``) before anything reads it.

    Returns True when some tensor lives in a side file.

    Raises:
        ModelError: a location outside ``file``'s folder (absolute, ``..``, a symlink out), a missing file,
            a FIFO / device / folder, a range past the file's end, or more data than
            :data:`pairedge.core.limits.MAX_MODEL_BYTES` in all.
    """
    folder = file.parent.resolve()
    found, total = False, 0
    for tensor in _tensors(proto.graph):
        if tensor.data_location != _EXTERNAL:
            continue
        found = True
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get("location", "")
        target = (folder / location).resolve()
        if not location or Path(location).is_absolute() or not target.is_relative_to(folder):
            raise ModelError(
                f"{file}: tensor {tensor.name!r} stores its data at {location!r}, outside the model folder "
                f"{folder}; refusing to read it. Keep external data files next to the .onnx file "
                "(onnx.save_model(..., location='<name>.data'))"
            )
        if not target.exists():
            raise ModelError(f"{file}: external data file {location!r} of tensor {tensor.name!r} is missing")
        total += _external_bytes(file, tensor, target, entries)
        if total > limits.MAX_MODEL_BYTES:
            raise ModelError(
                f"{file}: its tensors declare more than {limits.describe_size(limits.MAX_MODEL_BYTES)} of "
                "external data, the ceiling for a model (pairedge.core.limits.MAX_MODEL_BYTES); is it the "
                "right file?"
            )
    return found


def _external_bytes(file: Path, tensor: Any, target: Path, entries: dict[str, str]) -> int:
    """Bytes ``tensor`` reads from its external file ``target`` (checked regular and in range)."""
    try:
        size = limits.regular_file(
            target, f"the external data of tensor {tensor.name!r}", limits.MAX_MODEL_BYTES
        )
        offset, length = int(entries.get("offset") or 0), entries.get("length")
        count = size - offset if length is None or length == "" else int(length)
    except FormatError as exc:
        raise ModelError(f"{file}: {exc}") from None
    except ValueError:
        raise ModelError(
            f"{file}: tensor {tensor.name!r}: external data offset / length are not integers"
        ) from None
    if offset < 0 or count < 0 or offset + count > size:
        raise ModelError(
            f"{file}: tensor {tensor.name!r} reads bytes {offset}..{offset + count} of {target.name}, which "
            f"has {size}: the external data file is truncated or not this model's"
        )
    return count


_FLOAT_TYPES = frozenset({1, 10, 11, 16})  # onnx.TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16


def _check_finite(file: Path, proto: Any) -> None:
    """Refuse a model whose floating-point constants (initializers, Constant nodes) hold NaN or infinity."""
    from onnx import numpy_helper

    bad: list[str] = []
    for tensor in _tensors(proto.graph):
        if tensor.data_type not in _FLOAT_TYPES:
            continue
        try:
            values = np.asarray(numpy_helper.to_array(tensor, base_dir=str(file.parent)), dtype=np.float64)
        except Exception as exc:  # malformed tensor payloads raise ValueError / TypeError / OSError
            raise ModelError(
                f"{file}: tensor {tensor.name!r} cannot be read ({type(exc).__name__}: {exc})"
            ) from None
        count = int(values.size - np.count_nonzero(np.isfinite(values)))
        if count:
            bad.append(f"{tensor.name or '<unnamed>'} ({count} of {values.size})")
    if bad:
        raise ModelError(
            f"{file}: non-finite weights (NaN or infinity) in "
            f"{', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''}; "
            "the model would output NaN: re-export it from a finite checkpoint (`pairedge export` refuses "
            "non-finite weights)"
        )
