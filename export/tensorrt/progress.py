"""Build progress: TensorRT's ``IProgressMonitor`` -> a small sink interface (a Rich bar in the CLI).

TensorRT calls ``phase_start(phase, parent, steps)``, ``step_complete(phase, step) -> bool`` (False cancels
the build) and ``phase_finish(phase)`` from its build thread. :func:`make_progress_monitor` defines the
subclass inside the function, so importing this module needs no TensorRT.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol


class ProgressSink(Protocol):
    """Receives build phases. Phases nest (``parent`` is None for a top-level phase)."""

    def start(self, phase: str, parent: str | None, steps: int) -> None: ...

    def step(self, phase: str, step: int) -> None: ...

    def finish(self, phase: str) -> None: ...


class RecordingSink:
    """A sink that keeps the events, for logs and tests: ``("start", phase, parent, steps)`` etc."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def start(self, phase: str, parent: str | None, steps: int) -> None:
        self.events.append(("start", phase, parent, steps))

    def step(self, phase: str, step: int) -> None:
        self.events.append(("step", phase, step))

    def finish(self, phase: str) -> None:
        self.events.append(("finish", phase))


def make_progress_monitor(trt: Any, sink: ProgressSink, cancel: threading.Event | None = None) -> Any:
    """A ``trt.IProgressMonitor`` forwarding to ``sink``; setting ``cancel`` stops the build at the next
    step."""

    class _Monitor(trt.IProgressMonitor):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            sink.start(str(phase_name), str(parent_phase) if parent_phase else None, int(num_steps))

        def step_complete(self, phase_name: str, step: int) -> bool:
            sink.step(str(phase_name), int(step))
            return not (cancel is not None and cancel.is_set())

        def phase_finish(self, phase_name: str) -> None:
            sink.finish(str(phase_name))

    return _Monitor()
