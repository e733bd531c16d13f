"""The deployment artefacts of a model folder, in one table: every reader and writer of a folder asks it.

One record per (stage, precision)::

    precision  stage  ONNX file         manifest role  engine file (engines/<tag>/)  made by
    fp32       1      stage1.onnx       stage1         stage1.fp32.engine            pairedge export
    fp32       2      stage2.onnx       stage2         stage2.fp32.engine            pairedge export
    fp16       1      stage1.fp16.onnx  stage1.fp16    stage1.fp16.engine            pairedge calibrate
    fp16       2      stage2.fp16.onnx  stage2.fp16    stage2.fp16.engine            pairedge calibrate
    int8       1      stage1.int8.onnx  stage1.int8    stage1.int8.engine            pairedge calibrate
    int8       2      stage2.int8.onnx  stage2.int8    stage2.int8.engine            pairedge calibrate

Which classifier backends take it (the names of :mod:`pairedge.runtime.backends.registry`): the ONNX file of
every precision runs on ``onnxruntime``, ``onnxruntime-cuda`` and ``onnxruntime-tensorrt`` (Q/DQ int8
included); ``tensorrt`` runs the engine ``pairedge build`` made from that ONNX file on the device. Every
engine ``X.engine`` has its engine manifest ``X.engine.json`` beside it; in the folder's ``manifest.json``
the two carry the roles ``engine`` and ``engine-manifest``. The other files of a folder: ``calibration.json``
(role ``calibration``) and ``calibration.md`` (``calibration.report``) from ``pairedge calibrate``,
``recipe.json`` (``recipe``) of a recipe-built model. The layout of ``manifest.json`` itself is
:mod:`pairedge.core.modelfolder`'s.

>>> artefact(2, "int8").onnx, artefact(2, "int8").engine
('stage2.int8.onnx', 'stage2.int8.engine')
>>> precision_of("stage1.onnx"), stage_files("fp16")
('fp32', ('stage1.fp16.onnx', 'stage2.fp16.onnx'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from types import MappingProxyType

from pairedge.core.errors import InputError

#: Every precision a model folder can hold, in the order reports list them.
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "int8")
#: The precision a deployment and an engine build use unless told otherwise.
DEFAULT_PRECISION = PRECISIONS[0]
#: The two classifier stages (1: interaction gate, 2: interaction class).
STAGES: tuple[int, ...] = (1, 2)
#: Classifier backends that run an artefact's ONNX file (every precision).
ONNX_BACKENDS: tuple[str, ...] = ("onnxruntime", "onnxruntime-cuda", "onnxruntime-tensorrt")
#: Classifier backends that run an artefact's serialized engine.
ENGINE_BACKENDS: tuple[str, ...] = ("tensorrt",)

#: Folder of a model folder holding one subfolder of engines per device tag (``<device>-sm<cc>-trt<ver>``).
ENGINES_DIR = "engines"
#: What an engine's manifest adds to the engine's file name.
ENGINE_MANIFEST_SUFFIX = ".json"
ENGINE_ROLE = "engine"
ENGINE_MANIFEST_ROLE = "engine-manifest"
CALIBRATION_FILE = "calibration.json"
CALIBRATION_ROLE = "calibration"
CALIBRATION_REPORT_FILE = "calibration.md"
CALIBRATION_REPORT_ROLE = "calibration.report"
RECIPE_FILE = "recipe.json"
RECIPE_ROLE = "recipe"

#: The command that writes the ONNX files of a precision.
_MADE_BY = {"fp32": "pairedge export", "fp16": "pairedge calibrate", "int8": "pairedge calibrate"}


class UnknownArtefactError(InputError):
    """A file name that is no artefact of the table (the message lists the names it knows)."""


@dataclass(frozen=True)
class Artefact:
    """One (stage, precision) of a model folder.

    Attributes:
        stage: 1 or 2.
        precision: "fp32", "fp16" or "int8".
        onnx: the ONNX file, relative to the model folder (``stage1.fp16.onnx``).
        role: its role in ``manifest.json`` (``stage1.fp16``).
        engine: the engine's file name inside ``engines/<device tag>/`` (``stage1.fp16.engine``).
        made_by: the command that writes the ONNX file.
        onnx_backends, engine_backends: classifier backends that run the ONNX file / the engine.
    """

    stage: int
    precision: str
    onnx: str
    role: str
    engine: str
    made_by: str
    onnx_backends: tuple[str, ...] = ONNX_BACKENDS
    engine_backends: tuple[str, ...] = ENGINE_BACKENDS

    @property
    def engine_manifest(self) -> str:
        """The engine manifest's file name beside the engine (``stage1.fp16.engine.json``)."""
        return self.engine + ENGINE_MANIFEST_SUFFIX

    def engine_path(self, tag: str) -> str:
        """The engine's POSIX path relative to the model folder: ``engines/<tag>/stage1.fp16.engine``."""
        return f"{ENGINES_DIR}/{tag}/{self.engine}"

    def accepts(self, backend: str) -> bool:
        """Whether the classifier backend ``backend`` (a registry name) runs this artefact."""
        return backend in self.onnx_backends or backend in self.engine_backends


def _record(stage: int, precision: str) -> Artefact:
    # the fp32 ONNX file keeps the plain name `pairedge export` has always written; engines always say it
    infix = "" if precision == "fp32" else f".{precision}"
    return Artefact(
        stage=stage,
        precision=precision,
        onnx=f"stage{stage}{infix}.onnx",
        role=f"stage{stage}{infix}",
        engine=f"stage{stage}.{precision}.engine",
        made_by=_MADE_BY[precision],
    )


#: (stage, precision) -> :class:`Artefact`, for every stage and precision. Read-only.
ARTEFACTS: Mapping[tuple[int, str], Artefact] = MappingProxyType(
    {(s, p): _record(s, p) for p in PRECISIONS for s in STAGES}
)
_BY_FILE: Mapping[str, Artefact] = MappingProxyType(
    {name: a for a in ARTEFACTS.values() for name in (a.onnx, a.engine)}
)
_BY_ROLE: Mapping[str, Artefact] = MappingProxyType({a.role: a for a in ARTEFACTS.values()})


def check_precision(precision: str) -> str:
    """``precision`` when it is one of :data:`PRECISIONS`.

    Raises:
        InputError: naming the accepted precisions.
    """
    if precision not in PRECISIONS:
        raise InputError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def artefact(stage: int, precision: str) -> Artefact:
    """The record of ``stage`` (1 or 2) at ``precision``.

    Raises:
        InputError: an unknown stage or precision.
    """
    check_precision(precision)
    if stage not in STAGES:
        raise InputError(f"stage: expected 1 or 2, got {stage!r}")
    return ARTEFACTS[(stage, precision)]


def stage_artefacts(precision: str = "fp32") -> tuple[Artefact, Artefact]:
    """The stage-1 and stage-2 records of ``precision``."""
    return artefact(1, precision), artefact(2, precision)


def stage_files(precision: str = "fp32") -> tuple[str, str]:
    """The two ONNX files of ``precision``: ``("stage1.onnx", "stage2.onnx")`` for fp32,
    ``("stage1.int8.onnx", "stage2.int8.onnx")`` for int8.

    Raises:
        InputError: an unknown precision.
    """
    one, two = stage_artefacts(precision)
    return one.onnx, two.onnx


def find(file_name: str | PurePath) -> Artefact | None:
    """The record whose ONNX or engine file is named ``file_name`` (a name or a path: its last part), or
    None."""
    return _BY_FILE.get(PurePath(file_name).name)


def by_role(role: str) -> Artefact | None:
    """The record whose ONNX file carries manifest role ``role`` (``"stage2.fp16"``), or None."""
    return _BY_ROLE.get(role)


def precision_of(file_name: str | PurePath) -> str:
    """The precision of an artefact's ONNX or engine file (``stage1.int8.onnx`` -> "int8",
    ``stage2.onnx`` -> "fp32", ``engines/x/stage1.fp16.engine`` -> "fp16").

    Raises:
        UnknownArtefactError: a name the table does not hold.
    """
    found = find(file_name)
    if found is None:
        known = ", ".join(sorted(_BY_FILE))
        raise UnknownArtefactError(
            f"{PurePath(file_name).name!r} is not a model folder artefact; expected one of: {known}"
        )
    return found.precision
