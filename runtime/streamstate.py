"""What a pipeline decided at each frame, and its state at a point of a stream: what an exact replay needs.

A parity pack (``pairedge parity pack``) records both, so ``parity check`` reproduces the reference run bit
for bit instead of deciding again on other boxes:

* :class:`FrameState`, per frame: the decisions of the stream's policies. Whether the box-shape columns
  were set to the model's training mean (``box_shape="ignore"``, or ``"auto"`` once the detector was judged
  fixed-ratio: :class:`~pairedge.runtime.boxshape.BoxShapePolicy`) and that ratio; the thresholds of the
  operating point in force (``operating_point="auto"`` switches them:
  :class:`~pairedge.runtime.operating_point.OperatingPointPolicy`). The monitors judge
  the raw detector boxes, which a replay does not see (the tracker removed duplicates and added coasted
  people), and over frames a clip cut from a longer stream does not hold; so the replay is *given* them.
* :class:`StreamSnapshot`, at the first frame of a clip that starts mid-stream: the stream clock, the
  feature extractor's per-track history, the smoothing state, and whether the flow has a previous frame
  (the frame itself travels beside the snapshot). Taken and restored by
  :meth:`~pairedge.runtime.pipeline.Pipeline.snapshot` / :meth:`~pairedge.runtime.pipeline.Pipeline.restore`.

Object state is captured generically (:func:`capture`): every numpy array, number, string, None, and
list / tuple / dict of those reachable through an object's attributes, a few levels deep. Frozen dataclasses
(configuration, judged by the model identity) and callables are not state and are left out. Values travel
as JSON (floats as exact hex, so NaN and infinities survive), arrays as arrays; :func:`restore` refuses state
whose attributes, dtypes or ranks do not match the object it is put into.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pairedge.core.errors import InputError

#: How deep :func:`capture` follows attributes (extractor -> history -> arrays is 2).
MAX_DEPTH = 4
#: Attribute paths: dotted Python names.
PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class FrameState:
    """The decisions in force at one frame of a stream.

    Attributes:
        box_shape_ignored: the stage-2 box-shape columns were set to the model's training mean.
        aspect: the detector's fixed width / height ratio when ``box_shape="auto"`` judged it fixed-ratio,
            else NaN.
        tau_interact: the stage-1 gate threshold. confirm_s: the link confirmation time, seconds.
    """

    box_shape_ignored: bool
    aspect: float
    tau_interact: float
    confirm_s: float


@dataclass(frozen=True)
class StreamSnapshot:
    """A pipeline's stream state between two frames.

    Attributes:
        values: dotted attribute path -> :func:`encode` d value (clock, counters, dict / list state).
        arrays: dotted attribute path -> array (track history, smoothing state, ...).
        flow_primed: the flow stream held a previous frame (it must be given again on restore).
    """

    values: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    flow_primed: bool = False


# -- values as JSON ----------------------------------------------------------------------------------------
def encode(value: Any) -> Any:
    """A JSON value for ``value`` (None, bool, int, float, str, list, tuple, dict of those), type kept.

    Floats become ``{"f": float.hex()}`` (exact; NaN and inf included), tuples ``{"tuple": [...]}``, dicts
    ``{"dict": [[key, value], ...]}`` (keys keep their type). numpy scalars become Python ones.

    Raises:
        TypeError: anything else.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return {"f": value.hex()}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    raise TypeError(f"not stream state: {type(value).__name__}")


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`.

    Raises:
        InputError: a value :func:`encode` does not make (a corrupt pack).
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == "f" and isinstance(inner, str):
            try:
                return float.fromhex(inner)
            except ValueError:
                pass
        elif tag == "tuple" and isinstance(inner, list):
            return tuple(decode(v) for v in inner)
        elif (
            tag == "dict"
            and isinstance(inner, list)
            and all(isinstance(p, list) and len(p) == 2 for p in inner)
        ):
            try:
                return {decode(k): decode(v) for k, v in inner}
            except TypeError:  # an unhashable key
                pass
    raise InputError(f"stream state: {str(value)[:80]!r} is not an encoded value")


# -- objects -------------------------------------------------------------------------------------------------
def _is_state(value: Any) -> bool:
    """Worth following: an object with attributes that is not configuration, a callable or a type."""
    return (
        hasattr(value, "__dict__")
        and not dataclasses.is_dataclass(value)
        and not callable(value)
        and not isinstance(value, type)
    )


def capture(obj: Any, prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The state of ``obj``: (path -> encoded value, path -> array copy), paths ``prefix.attr[.attr...]``.

    Raises:
        TypeError: an attribute holds an object array or a value :func:`encode` cannot keep.
    """
    values: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}

    def walk(o: Any, path: str, depth: int) -> None:
        for name, v in sorted(vars(o).items()):
            here = f"{path}.{name}"
            if isinstance(v, np.ndarray):
                if v.dtype.kind not in "biuf":
                    raise TypeError(f"{here}: a {v.dtype} array is not stream state")
                arrays[here] = v.copy()
            elif _is_state(v):
                if depth < MAX_DEPTH:
                    walk(v, here, depth + 1)
            elif not (callable(v) or dataclasses.is_dataclass(v)):
                values[here] = encode(v)

    walk(obj, prefix, 1)
    return values, arrays


def restore(obj: Any, prefix: str, values: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Put the state :func:`capture` took (``prefix`` entries of ``values`` / ``arrays``) back into ``obj``.

    The state must fit: the same attribute paths as ``obj``'s own state, each array with the dtype and rank
    ``obj`` holds there (sizes may differ: buffers grow), each value of the same kind.

    Raises:
        InputError: the state does not fit ``obj`` (another feature spec, another pairedge version, or a
            corrupt pack), naming the first attribute that differs.
    """
    have_values, have_arrays = capture(obj, prefix)
    want_values = {k: v for k, v in values.items() if k.startswith(prefix + ".")}
    want_arrays = {k: v for k, v in arrays.items() if k.startswith(prefix + ".")}
    for kind, have, want in (("values", have_values, want_values), ("arrays", have_arrays, want_arrays)):
        if set(have) != set(want):
            diff = sorted(set(have) ^ set(want))
            raise InputError(
                f"stream state of {prefix}: the recorded {kind} {sorted(want)[:6]} do not match this "
                f"pipeline's {sorted(have)[:6]} (first difference {diff[0]}); make the pack with this "
                "pairedge version and model"
            )
    for path, arr in want_arrays.items():
        cur = have_arrays[path]
        if arr.dtype != cur.dtype or arr.ndim != cur.ndim:
            raise InputError(
                f"stream state {path}: recorded {arr.dtype} with {arr.ndim} dimension(s), this pipeline "
                f"keeps {cur.dtype} with {cur.ndim}; make the pack with this pairedge version and model"
            )
        _set(obj, prefix, path, np.array(arr, copy=True))
    for path, enc in want_values.items():
        new, cur = decode(enc), decode(have_values[path])
        if not _same_kind(new, cur):
            raise InputError(
                f"stream state {path}: recorded {type(new).__name__}, this pipeline keeps "
                f"{type(cur).__name__}; make the pack with this pairedge version and model"
            )
        old = _get(obj, prefix, path)
        _set(obj, prefix, path, type(old)(new) if isinstance(old, np.generic) else new)


def _same_kind(a: Any, b: Any) -> bool:
    """Same JSON kind; None and float (an optional timestamp) may stand for each other."""
    kinds = [type(v) if not (v is None or isinstance(v, float)) else float for v in (a, b)]
    return kinds[0] is kinds[1]


def _resolve(obj: Any, prefix: str, path: str) -> tuple[Any, str]:
    names = path[len(prefix) + 1 :].split(".")
    for name in names[:-1]:
        obj = getattr(obj, name)
    return obj, names[-1]


def _get(obj: Any, prefix: str, path: str) -> Any:
    parent, name = _resolve(obj, prefix, path)
    return getattr(parent, name)


def _set(obj: Any, prefix: str, path: str, value: Any) -> None:
    parent, name = _resolve(obj, prefix, path)
    setattr(parent, name, value)


def check_paths(names: Any, what: str) -> None:
    """Every name a dotted attribute path (a pack's state keys), else :class:`InputError` naming ``what``."""
    for name in names:
        if not isinstance(name, str) or not PATH.match(name) or len(name) > 200:
            raise InputError(f"{what}: {str(name)[:80]!r} is not an attribute path")


def finite_or_none(value: float | None) -> bool:
    """A clock value: None (not started) or a finite number."""
    return value is None or (isinstance(value, float) and math.isfinite(value))
