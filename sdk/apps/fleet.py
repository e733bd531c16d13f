"""Running one function over many logs, serially or as one task per log on a Ray cluster.

``pairedge eval --executor ray`` uses it to score a fleet's logs in parallel. Each item's outcome (value or
error) comes back in input order, so a failed log is reported with its error while the others are still
scored, and the pooled result equals the serial run's. Ray is optional (``pip install '.[fleet]'``);
without an ``address`` a local Ray instance with ``workers`` CPUs is started for the call and shut down
after it, with an address the tasks go to that existing cluster (``ray://host:10001`` or ``auto``).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pairedge.core.errors import InputError, PairedgeError
from pairedge.core.optional import require

T = TypeVar("T")
R = TypeVar("R")
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """One item's result: ``value`` (None on failure), ``error`` (one line, None on success), seconds
    taken."""

    key: str
    value: R | None
    error: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None


def _guarded(fn: Callable[[T], R], key: str, item: T) -> Outcome[R]:
    """Run ``fn(item)`` and turn any exception into an error line (so workers never ship exceptions)."""
    start = time.perf_counter()
    try:
        value = fn(item)
    except PairedgeError as exc:
        return Outcome(key, None, str(exc), time.perf_counter() - start)
    except Exception as exc:  # a log that breaks anything else must not stop the fleet
        where = traceback.extract_tb(exc.__traceback__)[-1]
        error = f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
        return Outcome(key, None, error, time.perf_counter() - start)
    return Outcome(key, value, None, time.perf_counter() - start)


def run_tasks(
    fn: Callable[[T], R],
    items: Sequence[T],
    keys: Sequence[str],
    *,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    on_done: Callable[[Outcome[R]], None] | None = None,
) -> list[Outcome[R]]:
    """``fn`` over ``items``; outcomes in input order.

    Args:
        fn: a module-level function (Ray ships it to the workers by reference).
        items: its arguments, one per log (must pickle).
        keys: a name per item for reports (e.g. the log's path).
        executor: "local" (serial, in this process) or "ray" (one task per item).
        address: Ray cluster address; None starts a local instance for this call.
        workers: CPUs of the local Ray instance (None: all); ignored with an address.
        on_done: called as each item finishes (progress bars), in completion order.

    Raises:
        InputError: unknown executor, keys and items of different lengths, workers < 1.
        MissingDependencyError: ``executor="ray"`` without Ray installed (before any work is done).
    """
    if executor not in EXECUTORS:
        raise InputError(f"--executor: expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    if len(keys) != len(items):
        raise InputError(f"expected one key per item, got {len(keys)} keys for {len(items)} items")
    if workers is not None and workers < 1:
        raise InputError(f"--workers: expected at least 1, got {workers}")
    if executor == "local":
        outcomes = []
        for key, item in zip(keys, items, strict=True):
            outcomes.append(_guarded(fn, key, item))
            if on_done is not None:
                on_done(outcomes[-1])
        return outcomes
    return _run_ray(fn, items, keys, address, workers, on_done)


#: Seconds to wait for a TCP connection to a Ray cluster's address before saying it cannot be reached.
CONNECT_TIMEOUT_S = 5.0
#: Seconds a first trivial task may take to run on a Ray worker before the run fails: a worker that cannot
#: start (its object store cannot be mapped, no CPU resource) would otherwise leave ``ray.wait`` waiting
#: forever.
WORKER_START_TIMEOUT_S = 60.0
#: The object store of a local Ray: this share of the machine's memory, within [Ray's minimum, the cap], and
#: at most a quarter of an address-space limit (``ulimit -v``). Ray's own default (30 % of memory, ~7 GB on
#: a 24 GB machine) cannot be mapped under such a limit; pairedge's tasks pass file paths and small reports.
OBJECT_STORE_SHARE, OBJECT_STORE_MIN, OBJECT_STORE_CAP = 0.05, 80 << 20, 2 << 30


def _check_reachable(address: str) -> None:
    """Refuse a ``host:port`` Ray address nothing listens on, in seconds (Ray itself retries for minutes,
    printing a warning line every few seconds). ``auto`` and ``ray://`` addresses are left to Ray.

    Raises:
        InputError: the port is not a number, or the connection is refused or times out.
    """
    import socket

    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(
            f"--address {address}: expected HOST:PORT (e.g. 10.0.0.5:6379), ray://HOST:10001 or auto"
        )
    try:
        with socket.create_connection(
            (host.strip("[]") or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S
        ):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise InputError(
            f"cannot reach the Ray cluster at {address}: {reason}; start it with `ray start --head` or pass "
            "the address it printed (or drop --address to start a local one)"
        ) from None


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at a temporary file while Ray starts, runs and stops.

    Ray's C++ core writes straight to the process's stderr, below Python (``Failed to connect to GCS ...``
    every second while an address does not answer, native stack dumps of a crashing raylet): only the
    descriptor catches that. What Ray wrote is dropped; failures come back as exceptions and outcomes, and
    the CLI prints them as one ``error:`` line.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def object_store_bytes(total_memory: int | None = None, address_limit: int | None = None) -> int:
    """The object-store size of a local Ray (see :data:`OBJECT_STORE_SHARE`); both arguments default to this
    machine's (``sysconf`` physical memory; ``RLIMIT_AS``, None when unlimited)."""
    if total_memory is None:
        total_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if address_limit is None:
        address_limit = _address_limit()
    size = min(max(int(OBJECT_STORE_SHARE * total_memory), OBJECT_STORE_MIN), OBJECT_STORE_CAP)
    if address_limit is not None:
        size = min(size, address_limit // 4)
    return max(size, OBJECT_STORE_MIN)


def _address_limit() -> int | None:
    """The process's address-space limit in bytes (``ulimit -v``), or None when unlimited."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _init_ray(ray: Any, address: str | None, workers: int | None) -> None:
    """``ray.init`` quietly: no dashboard, no worker output relayed, Ray's own logger at ERROR (its banner
    and notices such as "Token authentication is enabled" are warnings that add stderr lines)."""
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": True,
        "logging_level": logging.ERROR,
    }
    if address:
        options["address"] = address
    else:
        options["object_store_memory"] = object_store_bytes()
        if workers is not None:
            options["num_cpus"] = workers
    try:
        ray.init(**options)
    except Exception as exc:  # connection refused, bad address, no resources
        where = f" at {address}" if address else ""
        raise InputError(
            f"cannot start or reach the Ray cluster{where}: {type(exc).__name__}: {exc}"
        ) from None


def _run_ray(
    fn: Callable[[T], R],
    items: Sequence[T],
    keys: Sequence[str],
    address: str | None,
    workers: int | None,
    on_done: Callable[[Outcome[R]], None] | None,
) -> list[Outcome[R]]:
    ray = require("ray", extra="fleet", purpose="--executor ray")
    if address:
        _check_reachable(address)  # seconds, where Ray would retry for minutes
    with _stderr_silenced():
        started = not ray.is_initialized()
        if started:
            _init_ray(ray, address, workers)
        try:
            _wait_for_a_worker(ray)
            return _ray_outcomes(ray, fn, items, keys, on_done)
        finally:
            if started:
                ray.shutdown()


def _worker_probe() -> int:
    """A task that only proves a worker runs (its process id)."""
    return os.getpid()


def _wait_for_a_worker(ray: Any, timeout_s: float | None = None) -> None:
    """Run one trivial task and wait at most ``timeout_s`` (:data:`WORKER_START_TIMEOUT_S`) for it.

    Raises:
        InputError: no worker ran it in time, naming the likely cause (an address-space limit that Ray's
            shared-memory store cannot live under, or a cluster without free CPUs).
    """
    timeout_s = WORKER_START_TIMEOUT_S if timeout_s is None else timeout_s
    ref = ray.remote(num_cpus=1, max_retries=0)(_worker_probe).remote()
    done, _ = ray.wait([ref], num_returns=1, timeout=timeout_s)
    if done:
        return
    ray.cancel(ref, force=True)
    limit = _address_limit()
    cause = (
        f"this process has an address-space limit (ulimit -v, {limit / 2**30:.1f} GiB) that Ray's workers "
        "and shared-memory object store cannot start under: raise it or use --executor local"
        if limit is not None
        else "the cluster may have no free CPU or its workers fail to start "
        "(`ray status`; Ray's logs under /tmp/ray/session_latest/logs)"
    )
    raise InputError(f"no Ray worker started within {timeout_s:g} s: {cause}")


def _ray_outcomes(
    ray: Any,
    fn: Callable[[T], R],
    items: Sequence[T],
    keys: Sequence[str],
    on_done: Callable[[Outcome[R]], None] | None,
) -> list[Outcome[R]]:
    """One Ray task per item; outcomes in input order, ``on_done`` in completion order."""
    task = ray.remote(num_cpus=1, max_retries=0)(_guarded)
    pending = {task.remote(fn, key, item): k for k, (key, item) in enumerate(zip(keys, items, strict=True))}
    results: list[Outcome[R] | None] = [None] * len(items)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            k = pending.pop(ref)
            try:
                results[k] = ray.get(ref)
            except Exception as exc:  # the worker died (out of memory, killed)
                results[k] = Outcome(keys[k], None, f"Ray task failed: {type(exc).__name__}: {exc}", 0.0)
            if on_done is not None:
                on_done(results[k])  # type: ignore[arg-type]
    return [r for r in results if r is not None]
