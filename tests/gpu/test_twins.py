"""Every kernel of ``lk.cu`` / ``pool.cu``, executed (HIP-CPU emulated device), against its numpy twin.

Random inputs at odd sizes: 1 x 1, one row, one column, widths and heights that are not multiples of the
16 x 16 block, and a frame large enough for several blocks and several loop rounds of the pooling; the
pooling meets the whole field, one pixel, empty rectangles and thin strips. The flow kernels equal their twins
bit for bit (float32, no fused multiply-add: NVRTC's ``--fmad=false`` and g++'s ``-ffp-contract=off``, the
operation order of the reference). ``box_moments`` differs only by float64 rounding: its block reduces in a
tree, numpy sums pairwise (relative difference below 1e-11; 1.9e-12 measured).
"""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.errors import BackendError
from pairedge.gpu.cuda.source import parse_kernels
from pairedge.runtime.flow.cuda import KERNEL_FILES
from pairedge.runtime.flow.cuda.kernels import FUNCTIONS, kernel_source
from pairedge.runtime.flow.cuda.twins import CASES, compare

SHAPES = [(1, 1), (1, 23), (19, 1), (17, 33), (37, 50), (120, 161)]
REDUCTIONS = {"box_moments", "box_moments block 32", "box_moments block 1"}


def test_every_launched_kernel_has_a_twin_case():
    launched = {fn for name in KERNEL_FILES for fn in FUNCTIONS[name]}
    covered = {part.split(" ")[0] for case in CASES for part in case.split("+")} | {"box_h", "box_v"}
    assert launched <= covered, sorted(launched - covered)
    declared = {fn for name in KERNEL_FILES for fn in parse_kernels(kernel_source(name))}
    assert declared == launched  # no kernel in the .cu files that nothing launches (and so nothing tests)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_equals_its_numpy_twin(runner, case, shape):
    result, got, want = compare(runner, case, *shape, seed=sum(shape))
    assert got.shape == want.shape and got.dtype == want.dtype
    if case in REDUCTIONS:
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-10)
    else:
        assert result.mismatches == 0, result
        np.testing.assert_array_equal(got, want)


def test_launches_a_gpu_would_refuse_are_refused(runner):
    """Block limits, a reduction block that is not a power of two or over 256, arguments that do not match
    the kernel, pointers that are not device memory: refused before anything runs, naming the fix."""
    n = 8
    u, v, rects, out = (runner.empty(64) for _ in range(4))
    args = (("p", u), ("p", v), ("i", 4), ("p", rects), ("i", n), ("p", out))
    for block, match in (
        ((200,), "power of two"),
        ((512,), "takes at most 256"),
        ((16, 16), "threadIdx.x only"),
        ((2048,), "at most 1024 per block"),
        ((0,), "at least 1"),
    ):
        with pytest.raises(BackendError, match=match):
            runner.launch("box_moments", (n,), block, *args)
    with pytest.raises(BackendError, match="7 arguments for the 6 parameters"):
        runner.launch("box_moments", (n,), (256,), *args, ("i", 1))
    with pytest.raises(BackendError, match=r"argument 2 \(int w\) takes kind 'i', got 'p'"):
        runner.launch("box_moments", (n,), (256,), args[0], args[1], ("p", u), *args[3:])
    with pytest.raises(BackendError, match="not inside a live device allocation"):
        host = np.zeros(16, np.float32)
        runner.launch("box_moments", (n,), (256,), ("p", host.ctypes.data), *args[1:])
    with pytest.raises(BackendError, match="at most 1024 per block"):
        runner.launch("median3", (1, 1), (32, 33), ("p", u), ("p", v), ("i", 1), ("i", 1))
    with pytest.raises(BackendError, match="grid dimension y is 70000"):
        runner.launch("median3", (1, 70000), (16, 16), ("p", u), ("p", v), ("i", 1), ("i", 1))
    with pytest.raises(
        BackendError, match="8192 bytes of static and 40961 of dynamic shared memory, the device allows 49152"
    ):
        runner.device.launch(runner.kernels["box_moments"], (n,), (256,), args, shared=48 * 1024 - 8191)
    assert runner.device.stream.ops == []  # nothing was queued
