"""Fixtures of the CUDA tests: the emulated device with the flow's kernels, built once per session.

The kernels are compiled with HIP-CPU and g++ at most once per session (not at all when the disk cache,
``$XDG_CACHE_HOME/pairedge/hip-cpu``, already holds this build); how long it took is printed in the test
summary. Tests that need the emulated device skip with the reason of the ``CUDA emulation`` row of
``pairedge doctor`` when HIP-CPU, g++ or TBB is missing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pairedge.apps.probe import emulation_skip_reason
from pairedge.runtime.flow.cuda.twins import KernelRunner, load_flow_kernels

_BUILD: list[str] = []  # how the session fixture got its kernels


@pytest.fixture(scope="session")
def emulated() -> Iterator[KernelRunner]:
    """The emulated device with every kernel of ``lk.cu`` and ``pool.cu`` loaded (skips with the probe's
    reason where the emulated device cannot be built)."""
    reason = emulation_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    from pairedge.gpu.cuda.emulated.device import EmulatedDevice

    device = EmulatedDevice()
    start = time.perf_counter()
    kernels = load_flow_kernels(device)
    _BUILD.append(
        f"built in {device.build_seconds:.1f} s of g++ ({time.perf_counter() - start:.1f} s to load)"
        if device.build_seconds
        else f"from the disk cache in {time.perf_counter() - start:.2f} s"
    )
    yield KernelRunner(device, kernels)
    device.close()


@pytest.fixture()
def runner(emulated: KernelRunner) -> Iterator[KernelRunner]:
    """The session's kernels; this test's allocations are released afterwards."""
    mark = emulated.device.mark()
    yield emulated
    emulated.device.synchronize()
    emulated.device.release(mark)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from pairedge.gpu.cuda.emulated.build import BUILDS

    if _BUILD or BUILDS:
        built = (
            ", ".join(f"{name} {seconds:.1f} s" for name, seconds in BUILDS)
            or "none (all from the disk cache)"
        )
        terminalreporter.write_line(f"emulated CUDA device (HIP-CPU): g++ builds this session: {built}")
