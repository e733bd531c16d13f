"""The guard against silently wrong detectors: phantoms and NaN outputs stop a run before any result."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.runtime.detectors.guard import (
    MIN_SIDE,
    DetectorGuard,
    DetectorOutputError,
    FrameCheck,
    GuardOptions,
    frame_check,
    guarded,
)


def test_frame_check_counts() -> None:
    xyxy = np.array([[10, 10, 40, 90], [0, 0, 3, 3], [700, 10, 760, 90], [np.nan, 0, 1, 1]], np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.6], np.float32)
    check = frame_check(xyxy, scores, np.array([0, 1, 2]), (100, 720))
    assert check == FrameCheck(candidates=4, nonfinite=1, boxes=3, small=1, outside=1)


def guard_of(*checks: FrameCheck, **options) -> DetectorGuard:
    guard = DetectorGuard("det.onnx, layout yolox (test)", GuardOptions(**options))
    for c in checks:
        guard.observe(c)
    return guard


def test_phantoms_fail_in_one_line() -> None:
    guard = guard_of(FrameCheck(3549, 0, 20, 18, 0), FrameCheck(3549, 0, 22, 21, 1))
    with pytest.raises(DetectorOutputError) as info:
        guard.judge()
    message = str(info.value)
    assert "\n" not in message and "det.onnx, layout yolox" in message and "--detector-layout" in message
    assert f"39 narrower or shorter than {MIN_SIDE:g} px" in message
    guard.judge()  # judged once


def test_plausible_and_empty_scenes_pass() -> None:
    guard_of(
        FrameCheck(3549, 0, 10, 1, 1), FrameCheck(3549, 0, 12, 0, 0)
    ).judge()  # 2 of 22 odd boxes: a scene
    guard_of(FrameCheck(3549, 0, 0, 0, 0), FrameCheck(3549, 0, 0, 0, 0)).judge()  # nobody in view
    guard_of().judge()  # no frame at all
    guard_of(FrameCheck(10, 0, 10, 10, 0), enabled=False).judge()


def test_a_detector_of_nan_and_inf_fails() -> None:
    with pytest.raises(DetectorOutputError, match="NaN or inf"):
        guard_of(FrameCheck(100, 100, 0, 0, 0), FrameCheck(100, 100, 0, 0, 0)).judge()
    partly = guard_of(FrameCheck(100, 40, 3, 0, 0))
    partly.judge()
    assert partly.notes() == [
        "detector: 40 of 100 raw candidates were NaN or inf, on 1 of 1 frames (dropped)"
    ]


def test_guarded_holds_frames_until_judged() -> None:
    produced: list[int] = []
    checks = {0: FrameCheck(5, 0, 2, 2, 0), 1: FrameCheck(5, 0, 2, 2, 0), 2: FrameCheck(5, 0, 2, 2, 0)}

    def items():
        for i in range(3):
            produced.append(i)
            yield i

    guard = DetectorGuard("x", GuardOptions(frames=3))
    stream = guarded(items(), guard, lambda: checks[produced[-1]], lambda item: 10)
    with pytest.raises(DetectorOutputError):
        next(stream)  # nothing was handed on: the error comes before the first item
    assert produced == [0, 1, 2]


def test_guarded_passes_everything_through_and_bounds_memory() -> None:
    guard = DetectorGuard("x", GuardOptions(frames=50, max_bytes=30))
    seen = []

    def items():
        for i in range(10):
            seen.append(("made", i))
            yield i

    out = []
    for item in guarded(items(), guard, lambda: FrameCheck(5, 0, 1, 0, 0), lambda item: 10):
        out.append(item)
        seen.append(("used", item))
    assert out == list(range(10)) and guard.judged
    assert (
        seen.index(("used", 0)) == 3
    )  # three items of 10 bytes reached max_bytes 30: judged, then handed on
    assert guard.frames == 10


def test_options_are_checked() -> None:
    from pairedge.core.errors import InputError

    with pytest.raises(InputError):
        GuardOptions(frames=0)
    with pytest.raises(InputError):
        GuardOptions(max_implausible=0.0)
