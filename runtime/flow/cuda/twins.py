"""Every kernel of ``lk.cu`` and ``pool.cu`` against its numpy twin, on any device of the CUDA layer.

The twins are the CPU reference's own steps (:mod:`pairedge.runtime.flow.lk_reference`; for the pooling
:func:`pairedge.core.features.flowpool.flow_moments`, the dense path's sums, and the background grid of
:func:`pairedge.core.features.flowpool.pooled_reference`); each case launches the kernels with the grid and
block sizes :class:`~pairedge.runtime.flow.cuda.backend.CudaFlow` uses and returns both results, so the tests,
the emulated-device benchmark and the GPU check compare the same things. Inputs are random: an image is a
random uint8 field smoothed once, a flow field is normal with a spread of 2 pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.features.flowpool import flow_moments, pooled_reference
from pairedge.gpu.cuda import Device, Kernel
from pairedge.runtime.flow import lk_reference as ref
from pairedge.runtime.flow.cuda import KERNEL_FILES
from pairedge.runtime.flow.cuda.kernels import FUNCTIONS, RULES, kernel_source

B2, B1 = (16, 16), 256
F32 = np.float32


def grid2(w: int, h: int) -> tuple[int, int]:
    return (w + B2[0] - 1) // B2[0], (h + B2[1] - 1) // B2[1]


def grid1(n: int) -> tuple[int]:
    return ((n + B1 - 1) // B1,)


def load_flow_kernels(device: Device) -> dict[str, Kernel]:
    """Every kernel the flow backend launches, loaded on ``device`` (with the block rules of their code)."""
    kernels: dict[str, Kernel] = {}
    for name in KERNEL_FILES:
        module = device.load_module(name, kernel_source(name))
        kernels.update({fn: module.function(fn, RULES.get(fn)) for fn in FUNCTIONS[name]})
    return kernels


@dataclass
class KernelRunner:
    """A device and its kernels, with helpers to move numpy arrays (shapes and dtypes as given)."""

    device: Device
    kernels: dict[str, Kernel]

    def upload(self, array: np.ndarray) -> int:
        """A device copy of ``array`` (through pinned staging); returns its address."""
        a = np.ascontiguousarray(array)
        staging = self.device.alloc_pinned(a.shape, a.dtype)
        staging[...] = a
        ptr = self.device.alloc_device(max(a.nbytes, 4))
        self.device.htod_async(ptr, staging)
        return ptr

    def empty(self, nbytes: int) -> int:
        return self.device.alloc_device(max(int(nbytes), 4))

    def download(self, ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        host = self.device.alloc_pinned(shape, dtype)
        self.device.dtoh_async(host, ptr)
        self.device.synchronize()
        return host.copy()

    def launch(
        self, name: str, grid: tuple[int, ...], block: tuple[int, ...], *args: tuple[str, Any]
    ) -> None:
        self.device.launch(self.kernels[name], grid, block, args)


@dataclass(frozen=True)
class TwinResult:
    """One comparison: kernel(s), input shape, largest absolute difference, differing elements, elements."""

    kernel: str
    shape: tuple[int, int]
    max_abs: float
    mismatches: int
    size: int


def _image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return ref.smooth(rng.integers(0, 256, (h, w)).astype(F32))


def _flow(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0, 2, (h, w)).astype(F32), rng.normal(0, 2, (h, w)).astype(F32)


def _box(k: KernelRunner, src: int, dst: int, h: int, w: int, r: int, planes: int) -> None:
    tmp = k.empty(8 * planes * h * w)
    k.launch("box_h", grid2(w, h), B2, ("p", src), ("p", tmp), ("i", w), ("i", h), ("i", r), ("i", planes))
    k.launch("box_v", grid2(w, h), B2, ("p", tmp), ("p", dst), ("i", w), ("i", h), ("i", r), ("i", planes))


def _u8_to_float(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, 256, (h, w), dtype=np.uint8)
    dst = k.empty(4 * h * w)
    k.launch("u8_to_float", grid1(h * w), (B1,), ("p", k.upload(a)), ("p", dst), ("i", h * w))
    return k.download(dst, (h, w), F32), a.astype(F32)


def _smooth(
    k: KernelRunner, rng: np.random.Generator, h: int, w: int, step: int
) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, 256, (h, w)).astype(F32)
    ho, wo = ((h + 1) // 2, (w + 1) // 2) if step == 2 else (h, w)
    tmp, dst = k.empty(4 * h * wo), k.empty(4 * ho * wo)
    k.launch(
        "smooth_h",
        grid2(wo, h),
        B2,
        ("p", k.upload(a)),
        ("p", tmp),
        ("i", w),
        ("i", h),
        ("i", wo),
        ("i", step),
    )
    k.launch(
        "smooth_v", grid2(wo, ho), B2, ("p", tmp), ("p", dst), ("i", wo), ("i", h), ("i", ho), ("i", step)
    )
    return k.download(dst, (ho, wo), F32), np.ascontiguousarray(ref.smooth(a)[::step, ::step])


def _gradient(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    a = _image(rng, h, w)
    ix, iy = k.empty(4 * h * w), k.empty(4 * h * w)
    k.launch("gradient", grid2(w, h), B2, ("p", k.upload(a)), ("p", ix), ("p", iy), ("i", w), ("i", h))
    got = np.stack([k.download(ix, (h, w), F32), k.download(iy, (h, w), F32)])
    return got, np.stack(ref.gradients(a))


def _upsample(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    hc, wc = (h + 1) // 2, (w + 1) // 2
    uc, vc = _flow(rng, hc, wc)
    u, v = k.empty(4 * h * w), k.empty(4 * h * w)
    k.launch(
        "upsample",
        grid2(w, h),
        B2,
        ("p", k.upload(uc)),
        ("p", k.upload(vc)),
        ("i", wc),
        ("i", hc),
        ("p", u),
        ("p", v),
        ("i", w),
        ("i", h),
    )
    got = np.stack([k.download(u, (h, w), F32), k.download(v, (h, w), F32)])
    return got, np.stack([ref.upsample(uc, h, w), ref.upsample(vc, h, w)])


def _propagate(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    i0, i1, (u, v) = _image(rng, h, w), _image(rng, h, w), _flow(rng, h, w)
    d, r, n = 3, 2, h * w
    di0, di1, du, dv = (k.upload(x) for x in (i0, i1, u, v))
    res, planes, uo, vo = k.empty(20 * n), k.empty(20 * n), k.empty(4 * n), k.empty(4 * n)
    dims = (("i", w), ("i", h))
    k.launch(
        "prop_residual",
        grid2(w, h),
        B2,
        ("p", di0),
        ("p", di1),
        ("p", du),
        ("p", dv),
        *dims,
        ("i", d),
        ("p", res),
    )
    _box(k, res, planes, h, w, r, 5)
    k.launch(
        "prop_select",
        grid2(w, h),
        B2,
        ("p", planes),
        ("p", du),
        ("p", dv),
        ("p", uo),
        ("p", vo),
        *dims,
        ("i", d),
    )
    got = np.stack([k.download(uo, (h, w), F32), k.download(vo, (h, w), F32)])
    return got, np.stack(ref.propagate(ref.Sampler(i1), i0, u, v, d, r))


def _box_sum(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    planes = rng.normal(0, 50, (5, h, w)).astype(F32)
    dst = k.empty(planes.nbytes)
    _box(k, k.upload(planes), dst, h, w, 7, 5)
    return k.download(dst, (5, h, w), F32), np.stack([ref.box_sum(p, 7) for p in planes])


def _lk_step(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    p = ref.LKParams()
    i0, i1, (u, v) = _image(rng, h, w), _image(rng, h, w), _flow(rng, h, w)
    ix, iy = ref.gradients(i0)
    n = h * w
    dix, diy, du, dv = (k.upload(x) for x in (ix, iy, u, v))
    t5, s5 = k.empty(20 * n), k.empty(20 * n)
    k.launch(
        "lk_terms",
        grid2(w, h),
        B2,
        ("p", k.upload(i0)),
        ("p", k.upload(i1)),
        ("p", dix),
        ("p", diy),
        ("p", du),
        ("p", dv),
        ("i", w),
        ("i", h),
        ("f", float(F32(1.0 / p.sigma))),
        ("p", t5),
    )
    _box(k, t5, s5, h, w, p.radius, 5)
    k.launch(
        "lk_solve",
        grid1(n),
        (B1,),
        ("p", s5),
        ("p", du),
        ("p", dv),
        ("i", n),
        ("f", float(p.reg)),
        ("f", float(p.max_step)),
    )
    got = np.stack([k.download(du, (h, w), F32), k.download(dv, (h, w), F32)])
    return got, np.stack(ref.lk_step(ref.Sampler(i1), i0, ix, iy, u, v, p))


def _median3(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.normal(0, 3, (h, w)).astype(F32)
    dst = k.empty(4 * h * w)
    k.launch("median3", grid2(w, h), B2, ("p", k.upload(a)), ("p", dst), ("i", w), ("i", h))
    return k.download(dst, (h, w), F32), ref.median3(a)


def _interleave(k: KernelRunner, rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    u, v = _flow(rng, h, w)
    out = k.empty(8 * h * w)
    k.launch(
        "interleave", grid1(h * w), (B1,), ("p", k.upload(u)), ("p", k.upload(v)), ("p", out), ("i", h * w)
    )
    return k.download(out, (h, w, 2), F32), np.stack([u, v], axis=2)


def pooling_rects(h: int, w: int) -> np.ndarray:
    """Rectangles ``x0 y0 x1 y1`` of every kind the pooling meets: the whole field, one pixel, empty ones
    (zero width, zero height), a thin row, a thin column, a corner."""
    return np.array(
        [
            [0, 0, w, h],
            [w // 2, h // 2, w // 2 + 1, h // 2 + 1],
            [0, 0, 0, h],
            [0, h, w, h],
            [0, h - 1, w, h],
            [w - 1, 0, w, h],
            [w // 3, h // 3, w, h],
        ],
        np.int32,
    )


def _box_moments(
    k: KernelRunner, rng: np.random.Generator, h: int, w: int, block: int = B1
) -> tuple[np.ndarray, np.ndarray]:
    u, v = _flow(rng, h, w)
    rects = pooling_rects(h, w)
    out = k.empty(32 * len(rects))
    k.launch(
        "box_moments",
        (len(rects),),
        (block,),
        ("p", k.upload(u)),
        ("p", k.upload(v)),
        ("i", w),
        ("p", k.upload(rects)),
        ("i", len(rects)),
        ("p", out),
    )
    want = flow_moments(np.stack([u, v], axis=2), rects.astype(np.int64))  # the dense path's sums
    return k.download(out, (len(rects), 4), np.float64), want


def _grid_sample(
    k: KernelRunner, rng: np.random.Generator, h: int, w: int, step: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    u, v = _flow(rng, h, w)
    want = pooled_reference(np.stack([u, v], axis=2), np.zeros((0, 4)), 1.0, (0.0, 0.0), step).grid
    gh, gw = want.shape[:2]
    if not gh or not gw:
        return np.zeros((gh, gw, 2), F32), want
    out = k.empty(8 * gh * gw)
    k.launch(
        "grid_sample",
        grid2(gw, gh),
        B2,
        ("p", k.upload(u)),
        ("p", k.upload(v)),
        ("i", w),
        ("i", gh),
        ("i", gw),
        ("i", step),
        ("p", out),
    )
    return k.download(out, (gh, gw, 2), F32), want


Case = Callable[[KernelRunner, np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]]

#: name of the comparison -> the case (kernels launched, twin computed).
CASES: dict[str, Case] = {
    "u8_to_float": _u8_to_float,
    "smooth_h+smooth_v": lambda k, rng, h, w: _smooth(k, rng, h, w, 1),
    "smooth_h+smooth_v step 2 (pyramid)": lambda k, rng, h, w: _smooth(k, rng, h, w, 2),
    "gradient": _gradient,
    "upsample": _upsample,
    "prop_residual+box+prop_select": _propagate,
    "box_h+box_v": _box_sum,
    "lk_terms+box+lk_solve": _lk_step,
    "median3": _median3,
    "interleave": _interleave,
    "box_moments": _box_moments,
    "box_moments block 32": lambda k, rng, h, w: _box_moments(k, rng, h, w, 32),
    "box_moments block 1": lambda k, rng, h, w: _box_moments(k, rng, h, w, 1),
    "grid_sample": _grid_sample,
    "grid_sample step 1": lambda k, rng, h, w: _grid_sample(k, rng, h, w, 1),
}


def compare(
    runner: KernelRunner, name: str, h: int, w: int, seed: int = 0
) -> tuple[TwinResult, np.ndarray, np.ndarray]:
    """Run case ``name`` on an (h, w) input: the result summary, the device's output and the twin's."""
    got, want = CASES[name](runner, np.random.default_rng(seed), h, w)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    summary = TwinResult(
        name, (h, w), float(diff.max()) if diff.size else 0.0, int((diff > 0).sum()), diff.size
    )
    return summary, got, want
