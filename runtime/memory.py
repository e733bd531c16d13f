"""Process-wide allocator tuning for streaming applications (opt-in; the pipeline never calls it).

With glibc's default ``malloc``, every array above the dynamic mmap threshold (128 KiB at start) is mapped
fresh from the kernel and unmapped when freed, and free memory at the top of the heap is returned to the
kernel. A per-frame pipeline that creates a few megabytes of temporaries (a 320 x 240 flow field is 600 KiB;
integral images of it in float64 are 2.5 MiB) then pays for page faults and zero-filling on every frame.
Measured on the development VM (640 x 480, 10 people): with the ``pairedge`` features pooling the flow by
integral images, the feature stage took 3.2 ms with the default allocator and 1.2 ms after
:func:`tune_allocator` (whole step 4.8 vs 2.7 ms); since the features slice small boxes directly they
allocate far less and the difference is about 0.1 ms (``benchmarks/bench_runtime.py`` reports it).

:func:`tune_allocator` raises the mmap threshold and the trim threshold with ``mallopt`` so freed blocks
stay in the heap and are reused by the next frame. Resident memory then stays at its peak (flat over a long
stream) instead of shrinking between frames. It changes the whole process: applications call it once at
start (``pairedge run`` and ``pairedge demo`` do); libraries embedding the pipeline may leave it to their
application. The same effect without code: ``MALLOC_MMAP_THRESHOLD_=33554432
MALLOC_TRIM_THRESHOLD_=134217728`` in the environment. Other C libraries (musl, macOS, Windows) are left
alone.
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc caps the mmap threshold at 32 MiB on 64-bit systems.
DEFAULT_MMAP_THRESHOLD = 32 << 20
DEFAULT_TRIM_THRESHOLD = 128 << 20


def tune_allocator(
    mmap_threshold: int = DEFAULT_MMAP_THRESHOLD, trim_threshold: int = DEFAULT_TRIM_THRESHOLD
) -> bool:
    """Keep freed memory for reuse (glibc ``mallopt``); returns True when applied, False elsewhere.

    Args:
        mmap_threshold: allocations at least this large (bytes) are still mapped individually.
        trim_threshold: free memory at the top of the heap beyond this (bytes) is returned to the kernel.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok_mmap = mallopt(M_MMAP_THRESHOLD, int(mmap_threshold)) == 1
    ok_trim = mallopt(M_TRIM_THRESHOLD, int(trim_threshold)) == 1
    return ok_mmap and ok_trim
