"""The CUDA flow's kernel files, the kernels the backend takes from each, and what their code needs of a
launch beyond the device's limits (checked by :func:`pairedge.gpu.cuda.base.check_launch` on every device)."""

from __future__ import annotations

from importlib import resources

from pairedge.core.errors import BackendError
from pairedge.gpu.cuda import BlockRule
from pairedge.runtime.flow.cuda import KERNEL_FILES

#: kernel file -> the ``__global__`` kernels the backend launches from it.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "lk.cu": (
        "u8_to_float",
        "smooth_h",
        "smooth_v",
        "gradient",
        "upsample",
        "prop_residual",
        "prop_select",
        "box_h",
        "box_v",
        "lk_terms",
        "lk_solve",
        "median3",
        "interleave",
    ),
    "pool.cu": ("box_moments", "grid_sample"),
}

#: ``box_moments`` reduces ``blockDim.x`` partial sums in a ``__shared__ double s[4][256]`` tree.
RULES: dict[str, BlockRule] = {
    "box_moments": BlockRule(max_threads=256, power_of_two=True, one_dimensional=True)
}


def kernel_source(name: str) -> str:
    """Text of one packaged kernel file (``lk.cu`` or ``pool.cu``)."""
    if name not in KERNEL_FILES:
        raise BackendError(f"CUDA flow: unknown kernel file {name!r}; expected one of {KERNEL_FILES}")
    return resources.files("pairedge.runtime.flow.cuda").joinpath("kernels").joinpath(name).read_text("utf-8")
