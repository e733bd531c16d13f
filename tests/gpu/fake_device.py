"""A numpy stand-in for the GPU, to test the CUDA backend's orchestration on machines without one.

:class:`FakeDevice` implements the launch layer's interface (:class:`pairedge.runtime.flow.cuda.api.GpuApi`)
over host memory: device pointers are keys into a dict of byte buffers, and each kernel of ``lk.cu`` /
``pool.cu`` is re-implemented in numpy from its CUDA C text (whole grid at once). It checks what the real GPU
cannot be asked here: that ``CudaFlow`` wires buffers, levels, ping-pong slots, the reused pyramid, size
changes and the pooling launches so that the kernels compute the reference algorithm. The kernels' own
arithmetic is checked on a real GPU (``test_cuda_flow.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _clamp(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(a, lo, hi)


def _bilinear(img: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    h, w = img.shape
    x = np.minimum(np.maximum(x, np.float32(0)), np.float32(w - 1))
    y = np.minimum(np.maximum(y, np.float32(0)), np.float32(h - 1))
    x0, y0 = np.floor(x), np.floor(y)
    ax, ay = x - x0, y - y0
    i0, j0 = x0.astype(np.int64), y0.astype(np.int64)
    i1, j1 = np.minimum(i0 + 1, w - 1), np.minimum(j0 + 1, h - 1)
    one = np.float32(1)
    top = (one - ax) * img[j0, i0] + ax * img[j0, i1]
    bottom = (one - ax) * img[j1, i0] + ax * img[j1, i1]
    return (one - ay) * top + ay * bottom


class FakeDevice:
    """Host-memory GpuApi; ``launches`` counts kernel launches by name."""

    name = "fake"
    device_name = "numpy stand-in"
    arch = 90
    driver_version = 13000

    def __init__(self) -> None:
        self.mem: dict[int, np.ndarray] = {}
        self.order: list[int] = []
        self.next = 1 << 20
        self.launches: dict[str, int] = {}

    # memory ---------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        ptr = self.next
        self.mem[ptr] = np.zeros(max(int(nbytes), 4), np.uint8)
        self.order.append(ptr)
        self.next += (max(int(nbytes), 4) + 255) // 256 * 256 + 256
        return ptr

    def f32(self, ptr: int, n: int | None = None) -> np.ndarray:
        buf = self.mem[ptr].view(np.float32)
        return buf if n is None else buf[:n]

    def host(self, nbytes: int) -> np.ndarray:
        return np.zeros(max(int(nbytes), 4), np.uint8)

    def htod(self, dst: int, src: np.ndarray) -> None:
        def op() -> None:
            raw = np.ascontiguousarray(src).view(np.uint8).ravel()
            self.mem[dst][: raw.size] = raw

        self._run(op)

    def dtoh(self, dst: np.ndarray, src: int) -> None:
        raw = dst.view(np.uint8).reshape(-1)
        raw[:] = self.mem[src][: raw.size]

    def memset0(self, dst: int, nbytes: int) -> None:
        def op() -> None:
            self.mem[dst][:nbytes] = 0

        self._run(op)

    def mark(self) -> tuple[int, int]:
        return len(self.order), 0

    def release(self, mark: tuple[int, int]) -> None:
        for ptr in self.order[mark[0] :]:
            del self.mem[ptr]
        del self.order[mark[0] :]

    # modules, timing --------------------------------------------------------------------------------
    def load(self, code: bytes, target: str) -> str:
        return target

    def function(self, module: Any, name: str) -> str:
        return name

    def event(self) -> None:
        return None

    def record(self, ev: Any) -> None:
        pass

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return 0.001

    def synchronize(self) -> None:
        pass

    def activate(self) -> None:
        pass

    def close(self) -> None:
        self.release((0, 0))

    # kernels ------------------------------------------------------------------------------------------
    def launch(
        self, fn: str, grid: tuple[int, int], block: tuple[int, int], args: Sequence[tuple[str, Any]]
    ) -> None:
        self.launches[fn] = self.launches.get(fn, 0) + 1
        values = [v for _, v in args]
        self._run(lambda: getattr(self, "k_" + fn)(*values))

    # graphs: a capture records the operations (a copy reads its pinned source when replayed, as on a GPU)
    supports_graphs = True
    capturing: list | None = None
    replays = 0

    def begin_capture(self) -> None:
        self.capturing = []

    def end_capture(self) -> list:
        ops, self.capturing = self.capturing, None
        return ops

    def graph_launch(self, graph: list) -> None:
        self.replays += 1
        for op in graph:
            op()

    def graph_destroy(self, graph: list) -> None:
        pass

    def _run(self, op: Any) -> None:
        if self.capturing is not None:
            self.capturing.append(op)
        else:
            op()

    def _plane(self, ptr: int, h: int, w: int, k: int = 0) -> np.ndarray:
        return self.f32(ptr)[k * h * w : (k + 1) * h * w].reshape(h, w)

    def k_u8_to_float(self, src: int, dst: int, n: int) -> None:
        self.f32(dst, n)[:] = self.mem[src][:n]

    def k_smooth_h(self, src: int, dst: int, w: int, h: int, wo: int, step: int) -> None:
        a = self._plane(src, h, w)
        x = np.arange(wo) * step
        c = [a[:, _clamp(x + o, 0, w - 1)] for o in (-2, -1, 0, 1, 2)]
        t = c[0] + np.float32(4) * c[1]
        t = t + np.float32(6) * c[2]
        t = t + np.float32(4) * c[3]
        t = t + c[4]
        self._plane(dst, h, wo)[:] = t * np.float32(0.0625)

    def k_smooth_v(self, src: int, dst: int, w: int, h: int, ho: int, step: int) -> None:
        a = self._plane(src, h, w)
        y = np.arange(ho) * step
        c = [a[_clamp(y + o, 0, h - 1)] for o in (-2, -1, 0, 1, 2)]
        t = c[0] + np.float32(4) * c[1]
        t = t + np.float32(6) * c[2]
        t = t + np.float32(4) * c[3]
        t = t + c[4]
        self._plane(dst, ho, w)[:] = t * np.float32(0.0625)

    def k_gradient(self, a: int, ix: int, iy: int, w: int, h: int) -> None:
        img = self._plane(a, h, w)
        x, y = np.arange(w), np.arange(h)
        half = np.float32(0.5)
        self._plane(ix, h, w)[:] = half * (img[:, np.minimum(x + 1, w - 1)] - img[:, np.maximum(x - 1, 0)])
        self._plane(iy, h, w)[:] = half * (img[np.minimum(y + 1, h - 1)] - img[np.maximum(y - 1, 0)])

    def k_upsample(self, uc: int, vc: int, wc: int, hc: int, u: int, v: int, w: int, h: int) -> None:
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
        half = np.float32(0.5)
        sx, sy = (xs + half) * half - half, (ys + half) * half - half
        self._plane(u, h, w)[:] = np.float32(2) * _bilinear(self._plane(uc, hc, wc), sx, sy)
        self._plane(v, h, w)[:] = np.float32(2) * _bilinear(self._plane(vc, hc, wc), sx, sy)

    def _neighbour(self, a: np.ndarray, dy: int, dx: int) -> np.ndarray:
        h, w = a.shape
        return a[_clamp(np.arange(h) + dy, 0, h - 1)][:, _clamp(np.arange(w) + dx, 0, w - 1)]

    def k_prop_residual(self, i0: int, i1: int, u: int, v: int, w: int, h: int, d: int, res5: int) -> None:
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
        a, b = self._plane(i0, h, w), self._plane(i1, h, w)
        uu, vv = self._plane(u, h, w), self._plane(v, h, w)
        for k, (dy, dx) in enumerate(((0, 0), (0, d), (0, -d), (d, 0), (-d, 0))):
            r = _bilinear(b, xs + self._neighbour(uu, dy, dx), ys + self._neighbour(vv, dy, dx)) - a
            self._plane(res5, h, w, k)[:] = r * r

    def k_prop_select(self, cost5: int, u: int, v: int, uo: int, vo: int, w: int, h: int, d: int) -> None:
        costs = np.stack([self._plane(cost5, h, w, k) for k in range(5)])
        best = np.zeros((h, w), np.int64)
        c = costs[0].copy()
        for k in range(1, 5):
            better = costs[k] < c
            c = np.where(better, costs[k], c)
            best = np.where(better, k, best)
        offs = ((0, 0), (0, d), (0, -d), (d, 0), (-d, 0))
        uu, vv = self._plane(u, h, w), self._plane(v, h, w)
        nu = np.stack([self._neighbour(uu, dy, dx) for dy, dx in offs])
        nv = np.stack([self._neighbour(vv, dy, dx) for dy, dx in offs])
        self._plane(uo, h, w)[:] = np.take_along_axis(nu, best[None], 0)[0]
        self._plane(vo, h, w)[:] = np.take_along_axis(nv, best[None], 0)[0]

    def _plane64(self, ptr: int, h: int, w: int, k: int = 0) -> np.ndarray:
        return self.mem[ptr].view(np.float64)[k * h * w : (k + 1) * h * w].reshape(h, w)

    def k_box_h(self, src: int, dst: int, w: int, h: int, r: int, planes: int) -> None:
        for p in range(planes):  # float in, double out (as lk.cu)
            a = self._plane(src, h, w, p).astype(np.float64)
            c = np.cumsum(np.pad(a, ((0, 0), (r + 1, r))), axis=1)
            self._plane64(dst, h, w, p)[:] = c[:, 2 * r + 1 :] - c[:, :w]

    def k_box_v(self, src: int, dst: int, w: int, h: int, r: int, planes: int) -> None:
        for p in range(planes):  # double in, float out
            c = np.cumsum(np.pad(self._plane64(src, h, w, p), ((r + 1, r), (0, 0))), axis=0)
            self._plane(dst, h, w, p)[:] = (c[2 * r + 1 :] - c[:h]).astype(np.float32)

    def k_lk_terms(
        self, i0: int, i1: int, ix: int, iy: int, u: int, v: int, w: int, h: int, inv_sigma: float, t5: int
    ) -> None:
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
        r = _bilinear(
            self._plane(i1, h, w), xs + self._plane(u, h, w), ys + self._plane(v, h, w)
        ) - self._plane(i0, h, w)
        e = r * np.float32(inv_sigma)
        wt = np.float32(1) / (np.float32(1) + e * e)
        gx, gy = wt * self._plane(ix, h, w), wt * self._plane(iy, h, w)
        for k, term in enumerate(
            (
                gx * self._plane(ix, h, w),
                gx * self._plane(iy, h, w),
                gy * self._plane(iy, h, w),
                gx * r,
                gy * r,
            )
        ):
            self._plane(t5, h, w, k)[:] = term

    def k_lk_solve(self, s5: int, u: int, v: int, n: int, reg: float, max_step: float) -> None:
        s = self.f32(s5)[: 5 * n].reshape(5, n)
        a, b, c = s[0] + np.float32(reg), s[1], s[2] + np.float32(reg)
        det = a * c - b * b
        m = np.float32(max_step)
        self.f32(u, n)[:] += np.clip(-(c * s[3] - b * s[4]) / det, -m, m)
        self.f32(v, n)[:] += np.clip(-(a * s[4] - b * s[3]) / det, -m, m)

    def k_median3(self, src: int, dst: int, w: int, h: int) -> None:
        a = self._plane(src, h, w)
        stack = np.stack([self._neighbour(a, dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
        self._plane(dst, h, w)[:] = np.sort(stack, axis=0)[4]

    def k_interleave(self, u: int, v: int, out: int, n: int) -> None:
        o = self.f32(out)[: 2 * n].reshape(n, 2)
        o[:, 0], o[:, 1] = self.f32(u, n), self.f32(v, n)

    def k_box_moments(self, u: int, v: int, w: int, rects: int, n: int, out: int) -> None:
        rr = self.mem[rects].view(np.int32)[: 4 * n].reshape(n, 4)
        res = self.mem[out].view(np.float64)[: 4 * n].reshape(n, 4)
        uu, vv = self.f32(u).reshape(-1), self.f32(v).reshape(-1)
        for i, (x0, y0, x1, y1) in enumerate(rr.tolist()):
            ys, xs = np.mgrid[y0:y1, x0:x1]
            idx = (ys * w + xs).ravel()
            fx, fy = uu[idx].astype(np.float64), vv[idx].astype(np.float64)
            res[i] = (fx.sum(), fy.sum(), (fx * fx).sum(), (fy * fy).sum())

    def k_grid_sample(self, u: int, v: int, w: int, gh: int, gw: int, step: int, out: int) -> None:
        ys = step // 2 + np.arange(gh) * step
        xs = step // 2 + np.arange(gw) * step
        idx = (ys[:, None] * w + xs[None, :]).ravel()
        o = self.f32(out)[: 2 * gh * gw].reshape(-1, 2)
        o[:, 0], o[:, 1] = self.f32(u).reshape(-1)[idx], self.f32(v).reshape(-1)[idx]
