"""``CudaFlow``: the robust pyramidal LK flow on an NVIDIA GPU, with the per-person pooling fused after it.

Per frame: the current frame (already resized by :class:`~pairedge.runtime.flow.FlowStream`) is copied
into pinned staging and uploaded once into a reused device buffer; its pyramid is built on the GPU and kept
for the next frame (the previous frame is never uploaded twice); the flow kernels run coarse to fine; then
either the pooling kernels reduce the field to per-box sums and the background grid (``compute_pooled``,
what the runtime uses) or the dense field is copied back (``compute``, for checks). Buffers are allocated
once per frame size; nothing is allocated per frame. Device time of the last call (CUDA events) is in
:attr:`CudaFlow.last_gpu_ms`.

Everything device-side goes through the one CUDA layer (:mod:`pairedge.gpu.cuda`): on a GPU through
cuda-python or pycuda, and on the emulated device (``api="hip-cpu"`` or ``PAIREDGE_CUDA_EMULATION=hip-cpu``)
the same kernel files run on the CPU through HIP-CPU, with the same launches: then :attr:`CudaFlow.emulated`
is True, its repr says so and :attr:`CudaFlow.last_gpu_ms` is emulated (host) time, which the pipeline does
not report as GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.errors import BackendError
from pairedge.core.features.egomotion import grid_axes
from pairedge.core.features.flowpool import PooledFlow, pool_rects
from pairedge.gpu.cuda import Device, Kernel, open_device, unavailable_reason
from pairedge.runtime.flow.base import FlowBackend, FlowOptions, PoolRequest, check_gray
from pairedge.runtime.flow.cuda import KERNEL_FILES
from pairedge.runtime.flow.cuda.kernels import FUNCTIONS, RULES, kernel_source
from pairedge.runtime.flow.lk_reference import LKParams, level_shapes

B2 = (16, 16)  # 2-D block
B1 = 256  # 1-D block (also the pooling block: a power of two <= 256, see pool.cu)


def _grid(w: int, h: int) -> tuple[int, int]:
    return (w + B2[0] - 1) // B2[0], (h + B2[1] - 1) // B2[1]


class _Level:
    """Device buffers of one pyramid level (float32 planes of h x w)."""

    def __init__(self, dev: Device, h: int, w: int) -> None:
        self.h, self.w, self.n = h, w, h * w
        f = 4 * self.n
        alloc = dev.alloc_device
        self.img = [alloc(f), alloc(f)]  # pyramids of the two frames (ping-pong)
        self.u, self.v, self.u2, self.v2 = (alloc(f) for _ in range(4))
        self.flow_buffers = (self.u, self.v, self.u2, self.v2)
        self.ix, self.iy, self.tmp = alloc(f), alloc(f), alloc(f)
        self.planes, self.sums = alloc(5 * f), alloc(10 * f)  # sums: double (box_h -> box_v)


class CudaFlow(FlowBackend):
    """CUDA flow with fused pooling.

    Args:
        options: :class:`CudaFlow.Options`, or None and its fields as keywords.

    Raises:
        BackendError: no GPU / driver, the kernels do not compile or load (a driver too old for them: the
            message says how to fix it). MissingDependencyError: neither cuda-python nor pycuda.
    """

    @dataclass(frozen=True, kw_only=True)
    class Options(FlowOptions):
        """CUDA flow options.

        Attributes:
            scale: resize factor in (0, 1] (default 0.5).
            params: algorithm parameters (those of the CPU reference; None: :class:`LKParams`' defaults).
            device: CUDA device ordinal.
            api: the CUDA layer's implementation (:mod:`pairedge.gpu.cuda`): "auto" (the emulated device when
                ``PAIREDGE_CUDA_EMULATION=hip-cpu`` is set, else cuda-python, else pycuda), "cuda-python",
                "pycuda" or "hip-cpu" (the emulated device: the kernels on the CPU through HIP-CPU).
            pooled: when True (default) the runtime asks for pooled statistics instead of the dense field.
            graphs: replay each frame's uploads and flow kernels as one CUDA graph (cuda-python; captured on
                the first frame of a size, about 130 launches become one; the emulated device records and
                replays them); falls back to one launch per kernel.
        """

        scale: float = 0.5
        params: LKParams | None = None
        device: int = 0
        api: str = "auto"
        pooled: bool = True
        graphs: bool = True

    name = "cuda"
    options: CudaFlow.Options

    def __init__(
        self,
        options: CudaFlow.Options | None = None,
        *,
        scale: float | None = None,
        params: LKParams | None = None,
        device: int | None = None,
        api: str | None = None,
        pooled: bool | None = None,
        graphs: bool | None = None,
    ) -> None:
        super().__init__(
            options, scale=scale, params=params, device=device, api=api, pooled=pooled, graphs=graphs
        )
        opts = self.options
        self.graphs = bool(opts.graphs)
        self._graphs: dict[tuple[int, bool], Any] = {}
        self.params = opts.params or LKParams()
        self.fuses_pooling = bool(opts.pooled)
        self.api = open_device(opts.api, opts.device)
        self.graphs = self.graphs and self.api.supports_graphs
        self._fn: dict[str, Kernel] = {}
        self.compile_info: dict[str, str] = {
            "device": self.api.kind + (" (emulated)" if self.emulated else "")
        }
        try:
            for name in KERNEL_FILES:
                module = self.api.load_module(name, kernel_source(name))
                self.compile_info["target"], self.compile_info[name] = module.target, module.how
                for fn in FUNCTIONS[name]:
                    self._fn[fn] = module.function(fn, RULES.get(fn))
            self._ev = (self.api.event(), self.api.event())
        except BaseException:  # no backend object is returned: release the context it opened
            self.api.close()
            raise
        self._arena = self.api.mark()  # per-frame-size buffers are allocated after this point
        #: Device time of the last call (CUDA events), ms; on the emulated device the CPU's emulation time.
        self.last_gpu_ms: float | None = None
        self._shape: tuple[int, int] | None = None
        self._levels: list[_Level] = []
        self._cur = 0  # which img slot holds the latest frame's pyramid
        self._last: np.ndarray | None = None  # host copy of the latest frame (to reuse its pyramid)
        self._rect_cap = 0

    @property
    def emulated(self) -> bool:
        """True on the HIP-CPU emulated device: the flow is computed on the CPU, timings are not GPU ones."""
        return bool(self.api.emulated)

    def gpu_ms(self) -> float | None:
        """:attr:`last_gpu_ms` on a GPU; None on the emulated device (its events time the CPU's emulation)."""
        return None if self.emulated or self.last_gpu_ms is None else float(self.last_gpu_ms)

    @classmethod
    def unavailable_reason(cls, options: FlowOptions | None = None) -> str | None:
        """None when a device of ``options.api`` can run the flow here (a GPU, or the emulated device's
        toolchain); None options: ``api="auto"``."""
        api = options.api if isinstance(options, CudaFlow.Options) else "auto"
        return unavailable_reason(api)

    # ------------------------------------------------------------------------------------------ buffers

    def _allocate(self, h: int, w: int) -> None:
        a = self.api
        a.release(self._arena)  # a new frame size: free the old size's buffers first
        self._levels = [_Level(a, lh, lw) for lh, lw in level_shapes(h, w, self.params)]
        self._u8 = [a.alloc_device(h * w), a.alloc_device(h * w)]
        self._stage = [a.alloc_pinned((h, w), np.uint8) for _ in range(2)]
        for graph in self._graphs.values():
            a.graph_destroy(graph)
        self._graphs = {}
        self._dense = a.alloc_device(8 * h * w)
        self._dense_host = a.alloc_pinned((h, w, 2), np.float32)
        gh = len(grid_axes(h, w, 1)[0])  # upper bound of any grid: step >= 1
        self._grid = a.alloc_device(8 * gh * w)
        self._grid_host = a.alloc_pinned((2 * gh * w,), np.float32)
        self._shape, self._last, self._rect_cap = (h, w), None, 0

    def _rects_capacity(self, n: int) -> None:
        if n > self._rect_cap:
            cap = max(64, 1 << (n - 1).bit_length())
            self._rects = self.api.alloc_device(16 * cap)
            self._rects_host = self.api.alloc_pinned((cap, 4), np.int32)
            self._moments = self.api.alloc_device(32 * cap)
            self._moments_host = self.api.alloc_pinned((cap, 4), np.float64)
            self._rect_cap = cap

    # ------------------------------------------------------------------------------------------ kernels

    def _k(self, name: str, grid: tuple[int, int], block: tuple[int, int], *args: tuple[str, Any]) -> None:
        self.api.launch(self._fn[name], grid, block, args)

    def _upload(self, slot: int) -> None:
        """Enqueue: staging[slot] (already filled) -> device -> level-0..L pyramid in image slot ``slot``."""
        h, w = self._shape or (0, 0)
        self.api.htod_async(self._u8[slot], self._stage[slot])
        l0 = self._levels[0]
        n = h * w
        self._k(
            "u8_to_float", ((n + B1 - 1) // B1, 1), (B1, 1), ("p", self._u8[slot]), ("p", l0.tmp), ("i", n)
        )
        self._smooth(l0.tmp, l0.planes, l0.img[slot], h, w, w, h, 1)
        for fine, coarse in zip(self._levels, self._levels[1:], strict=False):
            self._smooth(fine.img[slot], fine.planes, coarse.img[slot], fine.h, fine.w, coarse.w, coarse.h, 2)

    def _smooth(self, src: int, tmp: int, dst: int, h: int, w: int, wo: int, ho: int, step: int) -> None:
        self._k(
            "smooth_h", _grid(wo, h), B2, ("p", src), ("p", tmp), ("i", w), ("i", h), ("i", wo), ("i", step)
        )
        self._k(
            "smooth_v", _grid(wo, ho), B2, ("p", tmp), ("p", dst), ("i", wo), ("i", h), ("i", ho), ("i", step)
        )

    def _box(self, src: int, tmp: int, dst: int, lv: _Level, planes: int) -> None:
        r = self.params.radius
        g = _grid(lv.w, lv.h)
        self._k("box_h", g, B2, ("p", src), ("p", tmp), ("i", lv.w), ("i", lv.h), ("i", r), ("i", planes))
        self._k("box_v", g, B2, ("p", tmp), ("p", dst), ("i", lv.w), ("i", lv.h), ("i", r), ("i", planes))

    def _run_flow(self, prev_small: np.ndarray, small: np.ndarray) -> _Level:
        """Upload and compute the flow of one frame pair; the result is in the finest level's (u, v)."""
        for image, what in ((prev_small, "prev_gray"), (small, "gray")):
            check_gray(image, what)
        if prev_small.shape != small.shape:
            raise BackendError(f"CUDA flow: frames of different shapes {prev_small.shape} and {small.shape}")
        h, w = small.shape
        self.api.activate()
        if self._shape != (h, w):
            self._allocate(h, w)
        # the previous frame's pyramid is still on the GPU when ``prev_small`` is the last frame we got
        reuse = self._last is not None and np.array_equal(prev_small, self._last)
        prev_slot = self._cur
        cur = prev_slot ^ 1
        if not reuse:
            np.copyto(self._stage[prev_slot], prev_small)  # one pinned staging buffer per slot: no race
        np.copyto(self._stage[cur], small)
        self.api.record(self._ev[0])
        key = (prev_slot, not reuse)
        graph = self._graph(key) if self.graphs else None
        if graph is not None:
            self.api.graph_launch(graph)
        else:
            self._enqueue_flow(prev_slot, not reuse)
        self._cur = cur
        if self._last is None:
            self._last = np.empty_like(small)
        np.copyto(self._last, small)
        return self._levels[0]

    def _graph(self, key: tuple[int, bool]) -> Any:
        """The CUDA graph of one frame's uploads and flow kernels (captured once per frame size and slot
        layout), or None when graphs are not usable (then kernels are launched one by one)."""
        if key in self._graphs:
            return self._graphs[key]
        try:
            self.api.begin_capture()
            try:
                self._enqueue_flow(*key)
            finally:
                graph = self.api.end_capture()
        except BackendError as exc:  # capture unsupported or failed: eager launches from now on
            self.graphs = False
            self.compile_info["graphs"] = f"off ({exc})"
            return None
        self._graphs[key] = graph
        self.compile_info["graphs"] = "on"
        return graph

    def _enqueue_flow(self, prev_slot: int, upload_prev: bool) -> None:
        """Enqueue the uploads and every flow kernel of one frame pair (eagerly or into a capture)."""
        cur = prev_slot ^ 1
        if upload_prev:
            self._upload(prev_slot)
        self._upload(cur)
        for lv in self._levels:  # canonical buffer roles, so every graph ends with the flow in the same place
            lv.u, lv.v, lv.u2, lv.v2 = lv.flow_buffers
        p = self.params
        above: _Level | None = None
        for lv in reversed(self._levels):
            g = _grid(lv.w, lv.h)
            i0, i1 = lv.img[prev_slot], lv.img[cur]
            if above is None:
                self.api.memset_async(lv.u, 4 * lv.n)
                self.api.memset_async(lv.v, 4 * lv.n)
            else:
                self._k(
                    "upsample",
                    g,
                    B2,
                    ("p", above.u),
                    ("p", above.v),
                    ("i", above.w),
                    ("i", above.h),
                    ("p", lv.u),
                    ("p", lv.v),
                    ("i", lv.w),
                    ("i", lv.h),
                )
            dims = (("i", lv.w), ("i", lv.h))
            for d in p.propagation:
                self._k(
                    "prop_residual",
                    g,
                    B2,
                    ("p", i0),
                    ("p", i1),
                    ("p", lv.u),
                    ("p", lv.v),
                    *dims,
                    ("i", d),
                    ("p", lv.planes),
                )
                self._box(lv.planes, lv.sums, lv.planes, lv, 5)
                self._k(
                    "prop_select",
                    g,
                    B2,
                    ("p", lv.planes),
                    ("p", lv.u),
                    ("p", lv.v),
                    ("p", lv.u2),
                    ("p", lv.v2),
                    *dims,
                    ("i", d),
                )
                lv.u, lv.u2, lv.v, lv.v2 = lv.u2, lv.u, lv.v2, lv.v
            self._k("gradient", g, B2, ("p", i0), ("p", lv.ix), ("p", lv.iy), *dims)
            for _ in range(p.iterations):
                self._k(
                    "lk_terms",
                    g,
                    B2,
                    ("p", i0),
                    ("p", i1),
                    ("p", lv.ix),
                    ("p", lv.iy),
                    ("p", lv.u),
                    ("p", lv.v),
                    *dims,
                    ("f", float(np.float32(1.0 / p.sigma))),
                    ("p", lv.planes),
                )
                self._box(lv.planes, lv.sums, lv.planes, lv, 5)
                self._k(
                    "lk_solve",
                    ((lv.n + B1 - 1) // B1, 1),
                    (B1, 1),
                    ("p", lv.planes),
                    ("p", lv.u),
                    ("p", lv.v),
                    ("i", lv.n),
                    ("f", float(p.reg)),
                    ("f", float(p.max_step)),
                )
            self._k("median3", g, B2, ("p", lv.u), ("p", lv.u2), *dims)
            self._k("median3", g, B2, ("p", lv.v), ("p", lv.v2), *dims)
            lv.u, lv.u2, lv.v, lv.v2 = lv.u2, lv.u, lv.v2, lv.v
            above = lv

    def _finish_timing(self) -> None:
        self.api.record(self._ev[1])
        self.last_gpu_ms = self.api.elapsed_ms(*self._ev)

    # ------------------------------------------------------------------------------------------ public

    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        lv = self._run_flow(prev_small, small)
        self._k(
            "interleave",
            ((lv.n + B1 - 1) // B1, 1),
            (B1, 1),
            ("p", lv.u),
            ("p", lv.v),
            ("p", self._dense),
            ("i", lv.n),
        )
        self.api.dtoh_async(self._dense_host, self._dense)
        self._finish_timing()
        np.copyto(out, self._dense_host)

    def compute_pooled(self, prev_small: np.ndarray, small: np.ndarray, request: PoolRequest) -> PooledFlow:
        """Flow reduced on the GPU to ``request``'s per-box sums and background grid (see the module doc)."""
        lv = self._run_flow(prev_small, small)
        h, w = lv.h, lv.w
        boxes = np.asarray(request.boxes, np.float64).reshape(-1, 4)
        rects = pool_rects(boxes, self.scale, (h, w), request.inset)
        n = len(rects)
        if n:
            self._rects_capacity(n)
            self._rects_host[:n] = rects
            self.api.htod_async(self._rects, self._rects_host[:n])
            self._k(
                "box_moments",
                (n, 1),
                (B1, 1),
                ("p", lv.u),
                ("p", lv.v),
                ("i", w),
                ("p", self._rects),
                ("i", n),
                ("p", self._moments),
            )
            self.api.dtoh_async(self._moments_host[:n], self._moments)
        ys, xs = grid_axes(h, w, request.grid_step)
        gh, gw = len(ys), len(xs)
        if gh and gw:
            self._k(
                "grid_sample",
                _grid(gw, gh),
                B2,
                ("p", lv.u),
                ("p", lv.v),
                ("i", w),
                ("i", gh),
                ("i", gw),
                ("i", int(request.grid_step)),
                ("p", self._grid),
            )
            self.api.dtoh_async(self._grid_host[: 2 * gh * gw], self._grid)
        self._finish_timing()  # synchronises: the host buffers are complete
        moments = self._moments_host[:n].copy() if n else np.zeros((0, 4))
        grid = self._grid_host[: 2 * gh * gw].reshape(gh, gw, 2).copy()
        return PooledFlow((h, w), self.scale, boxes.copy(), rects, moments, int(request.grid_step), grid)

    def close(self) -> None:
        """Release the CUDA graphs, the device memory, the stream and the context. Idempotent."""
        for graph in self._graphs.values():
            self.api.graph_destroy(graph)
        self._graphs = {}
        self._shape, self._levels, self._last = None, [], None
        self.api.close()

    def __repr__(self) -> str:
        where = "EMULATED on the CPU (HIP-CPU)" if self.emulated else f"sm_{self.api.info.arch}"
        return f"CudaFlow(scale={self.scale}, api={self.api.kind!r}, device={self.api.info.name!r}, {where})"
