"""The compiled pair block (``_pairkernel.c``) against its definition, the numpy pair block.

Every value must equal the numpy one within 1e-5 relative (in practice bit for bit), the neighbour counts
exactly, on random crowds, boundary cases and degenerate boxes; bad buffers are refused, not read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
from pairedge.core.features import compiled, get_spec, pairkernel
from pairedge.core.features.base import pair_rows
from pairedge.core.features.neighbours import INLINE, NEAR
from pairedge.core.features.pairblock import scene_context
from pairedge.core.types import Detections


def _compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


def test_the_kernel_is_built_where_a_compiler_is():
    """`pip install` builds it (setup.py) wherever a C compiler is; only a machine without one runs numpy."""
    if _compiler() is None:
        pytest.skip("no C compiler on this machine: the numpy pair block is in use (and correct)")
    if compiled.forced_numpy():
        pytest.skip("PAIREDGE_PAIR_KERNEL=numpy: the numpy pair block is asked for")
    assert pairkernel.KERNEL is not None, "a C compiler is present but _pairkernel is not built: reinstall"
    assert pairkernel.implementation() == "compiled"


needs_kernel = pytest.mark.skipif(
    pairkernel.KERNEL is None, reason="_pairkernel is not built (no C compiler)"
)


def _crowd(rng: np.random.Generator, n: int, size: float = 640.0) -> Detections:
    boxes = np.column_stack([rng.uniform(0, size, n), rng.uniform(0, size * 0.75, n), rng.uniform(8, 60, n)])
    boxes = np.column_stack([boxes, boxes[:, 2] * rng.uniform(1.5, 3.5, n)])
    ids = rng.permutation(1000)[:n]
    orientation = np.where(rng.random(n) < 0.5, rng.uniform(-np.pi, np.pi, n), np.nan)
    return Detections.from_arrays(boxes, ids, orientation=orientation)


def _extractors(version: str = "2", **config):
    spec = get_spec("pairedge").for_version(version)
    compiled, numpy = spec.make_extractor(config or None), spec.make_extractor(config or None)
    numpy.kernel = None
    return compiled, numpy


def _assert_equal(a, b) -> None:
    np.testing.assert_array_equal(a.pairs, b.pairs)
    np.testing.assert_array_equal(a.index, b.index)
    for x, y in ((a.stage1, b.stage1), (a.stage2, b.stage2)):
        assert x.dtype == np.float32 and x.flags.c_contiguous and x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    near, line = pairkernel.NEAR_COLUMN, pairkernel.INLINE_COLUMN
    np.testing.assert_array_equal(a.stage1[:, near : line + 1], b.stage1[:, near : line + 1])


def _flow(rng: np.random.Generator, h: int = 240, w: int = 320) -> np.ndarray:
    base = rng.normal(0, 0.3, 2).astype(np.float32)
    return (base + rng.normal(0, 1.0, (h, w, 2))).astype(np.float32)


@needs_kernel
@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize("n", [2, 3, 12, 70])
def test_compiled_rows_equal_numpy_on_moving_crowds(version: str, n: int):
    rng = np.random.default_rng(n)
    compiled, numpy = _extractors(version, history=6)
    dets = _crowd(rng, n)
    for k in range(8):  # people move; some frames without flow (history motion), some with
        boxes = dets.boxes + rng.normal(0, 3, dets.boxes.shape) * [1, 1, 0, 0]
        dets = Detections.from_arrays(boxes, dets.track_ids, orientation=dets.orientation)
        flow = _flow(rng) if k % 3 else None
        _assert_equal(
            compiled.step(dets, k / 10, (640, 480), flow, 0.5),
            numpy.step(dets, k / 10, (640, 480), flow, 0.5),
        )


@needs_kernel
def test_compiled_rows_equal_numpy_on_boundaries_and_degenerate_boxes():
    """People exactly on the neighbour thresholds (the kernel flags them; the reference decides), coincident
    people, identical boxes, huge and tiny boxes, values beyond the clamp."""
    h = 100.0
    centres = [
        (200.0, 300.0),
        (300.0, 300.0),
        (250.0 + NEAR * h, 300.0),
        (300.0 + 0.25 * h, 300.0),
        (300.0 + 2.0 * h, 300.0),
        (200.0 - 0.25 * h, 300.0 + INLINE * h),
        (250.0, 300.0 + NEAR * h),
        (200.0, 300.0),
        (250.0, 300.0),
    ]
    boxes = np.array([[cx - 20, cy - h / 2, 40, h] for cx, cy in centres])
    boxes = np.vstack([boxes, boxes[:2], [[0, 0, 1e-3, 1e-3], [-5e4, -5e4, 1e5, 2e5], [1e6, 1e6, 3, 9]]])
    dets = Detections.from_arrays(boxes, np.arange(len(boxes)))
    compiled, numpy = _extractors()
    for k in range(3):
        _assert_equal(compiled.step(dets, k / 30, (640, 480)), numpy.step(dets, k / 30, (640, 480)))


@needs_kernel
def test_pairs_on_a_threshold_are_flagged_and_recomputed(monkeypatch):
    """Direct call: a person exactly NEAR mean heights from a pair's midpoint makes the pair ambiguous."""
    boxes = np.array([[180.0, 250, 40, 100], [280.0, 250, 40, 100], [230.0 + NEAR * 100, 250, 40, 100]])
    person = np.zeros((3, 15))
    ia, ib = pair_rows(3)
    calls = []
    real = pairkernel._exact_counts
    monkeypatch.setattr(pairkernel, "_exact_counts", lambda *a: calls.append(a[3].copy()) or real(*a))
    facing = (np.zeros((3, 2)), np.zeros(3))
    s1, _ = pairkernel.pair_rows_compiled(
        boxes, person, facing, ia, ib, (640, 480), scene_context(person, boxes), 0.05, 31
    )
    assert len(calls) == 1 and calls[0][0]  # pair (0, 1): person 2 on its near circle
    assert (
        s1[0, pairkernel.NEAR_COLUMN] == 0.0
    )  # "< NEAR": on the circle is not near (the reference's answer)


@needs_kernel
@pytest.mark.parametrize("offset", [-1e-6, 1e-6])
def test_float32_pass_defers_to_float64_near_a_threshold(monkeypatch, offset: float):
    """A person 1e-6 heights inside / outside a pair's near circle: the float32 pass cannot decide, the
    float64 pass can (no Python fallback), and the count is the definition's."""
    from pairedge.core.features.neighbours import neighbours_reference

    r = (NEAR + offset) * 100
    boxes = np.array([[180.0, 250, 40, 100], [280.0, 250, 40, 100], [230.0 + r, 250, 40, 100]])
    person = np.zeros((3, 15))
    ia, ib = pair_rows(3)
    calls = []
    monkeypatch.setattr(pairkernel, "_exact_counts", lambda *a: calls.append(a))
    facing = (np.zeros((3, 2)), np.zeros(3))
    s1, _ = pairkernel.pair_rows_compiled(
        boxes, person, facing, ia, ib, (640, 480), scene_context(person, boxes), 0.05, 31
    )
    assert calls == []
    centres = boxes[:, :2] + boxes[:, 2:] / 2
    near, _ = neighbours_reference(
        centres[ia], centres[ib] - centres[ia], np.full(len(ia), 100.0), centres, None
    )
    np.testing.assert_array_equal(s1[:, pairkernel.NEAR_COLUMN], near)
    assert s1[0, pairkernel.NEAR_COLUMN] == (1.0 if offset < 0 else 0.0)


@needs_kernel
def test_version_3_and_panoramas_use_numpy():
    assert not pairkernel.supports(45, False)  # layout 3: context columns
    assert not pairkernel.supports(31, True)  # panorama wrap
    assert pairkernel.supports(31, False) and pairkernel.supports(25, False)
    rng = np.random.default_rng(4)
    compiled, numpy = _extractors("2", wrap=True)
    dets = _crowd(rng, 9)
    _assert_equal(compiled.step(dets, 0.0, (640, 480)), numpy.step(dets, 0.0, (640, 480)))


@needs_kernel
def test_bad_buffers_are_refused():
    k = pairkernel.KERNEL
    n, m, fp, fq = 3, 3, 15, 31
    people = np.zeros((n, len(pairkernel.PERSON_COLUMNS)))
    params = np.zeros(len(pairkernel.PARAMS))
    person32 = np.zeros((n, fp), np.float32)
    s1, s2, amb = np.zeros((m, fq), np.float32), np.zeros((m, 2 * fp + fq), np.float32), np.zeros(m, np.uint8)
    ia, ib = (np.ascontiguousarray(a) for a in pair_rows(n))
    assert k.pair_block(people, ia, ib, params, person32, s1, s2, amb, n, m, fp, fq) == 0
    with pytest.raises(IndexError, match="outside"):
        k.pair_block(people, ia, ib + 5, params, person32, s1, s2, amb, n, m, fp, fq)
    with pytest.raises(ValueError, match="people"):
        k.pair_block(people[:2], ia, ib, params, person32, s1, s2, amb, n, m, fp, fq)
    with pytest.raises(ValueError, match="stage1"):
        k.pair_block(people, ia, ib, params, person32, s1[:2], s2, amb, n, m, fp, fq)
    with pytest.raises(ValueError, match="bad sizes"):
        k.pair_block(people, ia, ib, params, person32, s1, s2, amb, n, m, fp, 30)
    with pytest.raises(ValueError, match="contiguous"):
        k.pair_block(people, ia, ib, params, person32, s1[:, ::2], s2, amb, n, m, fp, fq)
    read_only = s1.copy()
    read_only.flags.writeable = False
    with pytest.raises((BufferError, ValueError, TypeError)):
        k.pair_block(people, ia, ib, params, person32, read_only, s2, amb, n, m, fp, fq)


def test_environment_forces_the_numpy_pair_block():
    code = "from pairedge.core.features import pairkernel; print(pairkernel.implementation())"
    env = {**os.environ, "PAIREDGE_PAIR_KERNEL": "numpy"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "numpy"


def _setup_flags() -> list[str]:
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).resolve().parents[3] / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "UNIX_FLAGS":
            return list(ast.literal_eval(node.value))
    raise AssertionError("setup.py defines no UNIX_FLAGS")


@pytest.mark.parametrize("compiler", ["host", "aarch64-linux-gnu-gcc"])
def test_the_kernel_compiles_without_warnings_and_without_fused_multiply_add(tmp_path, compiler):
    """setup.py's flags, -Wall -Wextra -Werror; for the Jetson's Arm cores (a cross compiler, where installed)
    no fused multiply-add instruction may appear (it would round differently from numpy)."""
    from pathlib import Path

    cc = _compiler() if compiler == "host" else shutil.which(compiler)
    if cc is None:
        pytest.skip(f"{compiler}: no such compiler here")
    source = Path(pairkernel.__file__).with_name("_pairkernel.c")
    obj = tmp_path / "k.o"
    include = sysconfig.get_paths()["include"]
    flags = [*_setup_flags(), "-fPIC", "-Wall", "-Wextra", "-Werror"]
    done = subprocess.run(
        [cc, *flags, f"-I{include}", "-c", str(source), "-o", str(obj)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    if compiler != "host":
        dump = subprocess.run(
            [compiler.replace("gcc", "objdump"), "-d", str(obj)], capture_output=True, text=True
        )
        fused = (
            "fmadd",
            "fmsub",
            "fnmadd",
            "fnmsub",
            "fmla",
            "fmls",
        )  # gcc emits them without -ffp-contract=off
        assert dump.returncode == 0 and not [op for op in fused if f"\t{op}" in dump.stdout]


def test_the_implementation_is_not_stream_state(monkeypatch):
    """A snapshot (parity pack) taken where one implementation runs restores where the other does."""
    from pairedge.core.features.edge import PairedgeExtractor
    from pairedge.runtime.streamstate import capture, restore

    spec = get_spec("pairedge")
    compiled = spec.make_extractor()
    dets = _crowd(np.random.default_rng(2), 6)
    for k in range(3):
        compiled.step(dets, k / 10, (640, 480))
    values, arrays = capture(compiled, "extractor")
    assert not [path for path in (*values, *arrays) if "kernel" in path]
    compiled.kernel = (
        pairkernel.KERNEL
    )  # this one stays compiled; new extractors (the "other machine") are numpy
    monkeypatch.setattr(PairedgeExtractor, "kernel", None)
    numpy = spec.make_extractor()
    restore(numpy, "extractor", values, arrays)
    _assert_equal(compiled.step(dets, 0.3, (640, 480)), numpy.step(dets, 0.3, (640, 480)))


@needs_kernel
def test_rect_moments_equal_the_direct_float64_sums():
    """The kernel's per-box flow sums are pooled_reference's (direct float64 sums), and within float64
    rounding of the two numpy / OpenCV methods flow_moments used before (per-box slicing, integral images)."""
    from pairedge.core.features import flowpool

    rng = np.random.default_rng(8)
    flow = rng.normal(0, 2, (240, 320, 2)).astype(np.float32)
    boxes = np.column_stack([rng.uniform(-50, 640, 60), rng.uniform(-50, 480, 60), rng.uniform(0, 200, 60)])
    boxes = np.column_stack([boxes, boxes[:, 2] * 2.5])
    rects = flowpool.pool_rects(boxes, 0.5, flow.shape[:2], (0.15, 0.05))
    got = flowpool.flow_moments(flow, rects)  # the kernel's rect_moments
    direct = flowpool.pooled_reference(flow, boxes, 0.5, (0.15, 0.05), 8).moments
    np.testing.assert_allclose(got, direct, rtol=1e-12, atol=1e-9)
    assert (
        rect_area := (rects[:, 2] - rects[:, 0]) * (rects[:, 3] - rects[:, 1])
    ).min() == 0  # empty ones too
    np.testing.assert_array_equal(got[rect_area == 0], 0.0)
    sums, squares = cv2_integrals(flow)
    x0, y0, x1, y1 = rects.T
    integral = np.concatenate(
        [t[y1, x1] - t[y0, x1] - t[y1, x0] + t[y0, x0] for t in (sums, squares)], axis=1
    )
    np.testing.assert_allclose(got, integral, rtol=1e-9, atol=1e-6)


def cv2_integrals(flow: np.ndarray):
    import cv2

    return cv2.integral2(np.ascontiguousarray(flow), sdepth=cv2.CV_64F, sqdepth=cv2.CV_64F)


@needs_kernel
def test_rect_moments_refuse_unclipped_rectangles_and_bad_buffers():
    flow = np.zeros((10, 20, 2), np.float32)
    out = np.empty((1, 4))
    k = pairkernel.KERNEL
    for bad in ([-1, 0, 5, 5], [0, 0, 21, 5], [6, 0, 5, 5], [0, 0, 5, 11]):
        with pytest.raises(IndexError, match="not clipped"):
            k.rect_moments(flow, np.array([bad], np.int64), out, 10, 20, 1)
    with pytest.raises(ValueError, match="flow"):
        k.rect_moments(flow[:5], np.zeros((1, 4), np.int64), out, 10, 20, 1)
    with pytest.raises(ValueError, match="out"):
        k.rect_moments(flow, np.zeros((1, 4), np.int64), np.empty((1, 3)), 10, 20, 1)
    with pytest.raises(ValueError, match="bad sizes"):
        k.rect_moments(flow, np.zeros((1, 4), np.int64), out, 0, 20, 1)


@needs_kernel
@pytest.mark.parametrize("length", [2, 8, 24])
def test_track_motion_equals_numpy(length: int):
    """The compiled TrackHistory.motion against motion_numpy: tracks of every age, repeated timestamps (no
    time step), tracks leaving and coming back, camera warps; within float64 rounding."""
    from pairedge.core.features.history import TrackHistory

    rng = np.random.default_rng(length)
    hist = TrackHistory(length, evict_after=3, capacity=2)
    t = 0.0
    for frame in range(40):
        t += 0.0 if frame % 7 == 3 else rng.uniform(0.02, 0.2)
        ids = np.sort(rng.choice(30, size=rng.integers(1, 20), replace=False))
        if frame % 5 == 2:
            hist.warp(np.array([[1.01, 0.02, 3.0], [-0.02, 1.01, -1.0]]))
        slots = hist.observe(
            ids, rng.uniform(0, 640, (len(ids), 2)), rng.uniform(20, 200, len(ids)), t, frame
        )
        got, want = hist.motion(slots), hist.motion_numpy(slots)
        for name in ("velocity", "step_velocity", "unsteadiness", "scale_rate", "fill"):
            np.testing.assert_allclose(
                getattr(got, name), getattr(want, name), rtol=1e-12, atol=1e-12, err_msg=name
            )
        hist.evict(frame)


@needs_kernel
def test_track_motion_refuses_slots_without_observations():
    from pairedge.core.features.history import TrackHistory

    hist = TrackHistory(4, evict_after=3)
    slots = hist.observe(np.array([5, 9]), np.zeros((2, 2)), np.ones(2) * 50, 0.0, 0)
    k = pairkernel.KERNEL
    out = np.empty((1, 7))
    for bad in (-1, len(hist.ids), int(np.flatnonzero(hist.ids < 0)[0])):
        with pytest.raises(IndexError, match="not an observed track"):
            k.track_motion(
                hist.pos, hist.height, hist.time, hist.count, np.array([bad]), out, 4, len(hist.ids), 1
            )
    with pytest.raises(ValueError, match="pos"):
        k.track_motion(hist.pos[:1], hist.height, hist.time, hist.count, slots[:1], out, 4, len(hist.ids), 1)
    with pytest.raises(ValueError, match="bad sizes"):
        k.track_motion(hist.pos, hist.height, hist.time, hist.count, slots[:1], out, 1, len(hist.ids), 1)


def test_doctor_says_which_feature_kernels_run():
    from pairedge.apps.probe import probe

    check = probe().get("feature kernels")
    assert check.ok == (compiled.KERNEL is not None)
    assert check.detail.startswith("compiled" if check.ok else "numpy")
