"""pairedge.apps.fleet: one function over many items, serially or on a local Ray cluster, outcomes in
order."""

from __future__ import annotations

import math

import pytest
from pairedge.apps.fleet import Outcome, run_tasks
from pairedge.core.errors import InputError


def test_local_outcomes_in_order_and_failures_reported() -> None:
    seen: list[Outcome[float]] = []
    out = run_tasks(math.sqrt, [4.0, -1.0, 9.0], ["a", "b", "c"], on_done=seen.append)
    assert [o.key for o in out] == ["a", "b", "c"] and [o.key for o in seen] == ["a", "b", "c"]
    assert out[0].value == 2.0 and out[2].value == 3.0 and out[0].ok
    assert not out[1].ok and out[1].value is None and out[1].error.startswith("ValueError: math domain error")


def test_bad_arguments() -> None:
    with pytest.raises(InputError, match="executor"):
        run_tasks(math.sqrt, [1.0], ["a"], executor="dask")
    with pytest.raises(InputError, match="one key per item"):
        run_tasks(math.sqrt, [1.0], [])
    with pytest.raises(InputError, match="workers"):
        run_tasks(math.sqrt, [1.0], ["a"], executor="ray", workers=0)


@pytest.mark.slow
def test_ray_equals_local_with_two_workers() -> None:
    pytest.importorskip("ray")
    items = [float(k * k) for k in range(8)] + [-1.0]
    keys = [f"log{k}" for k in range(len(items))]
    local = run_tasks(math.sqrt, items, keys)
    done: list[str] = []
    remote = run_tasks(
        math.sqrt, items, keys, executor="ray", workers=2, on_done=lambda o: done.append(o.key)
    )
    assert [(o.key, o.value, o.error) for o in remote] == [(o.key, o.value, o.error) for o in local]
    assert sorted(done) == sorted(keys)


class _StuckRay:
    """A Ray whose tasks never start (what a worker that cannot map its object store looks like)."""

    def __init__(self) -> None:
        self.cancelled: list[object] = []

    def remote(self, **options):
        def wrap(fn):
            class Task:
                @staticmethod
                def remote(*args):
                    return ("ref", fn.__name__)

            return Task

        return wrap

    def wait(self, refs, num_returns=1, timeout=None):
        assert timeout is not None, "an unbounded wait"
        return [], list(refs)

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)


def test_no_ray_worker_is_one_bounded_error_naming_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``eval --executor ray`` no longer waits forever when no worker starts (issue 40, case 8)."""
    from pairedge.apps import fleet

    ray = _StuckRay()
    monkeypatch.setattr(fleet, "_address_limit", lambda: 3 << 30)
    with pytest.raises(InputError, match=r"no Ray worker started within 0.5 s: .*ulimit -v, 3.0 GiB"):
        fleet._wait_for_a_worker(ray, timeout_s=0.5)
    assert ray.cancelled == [("ref", "_worker_probe")]
    monkeypatch.setattr(fleet, "_address_limit", lambda: None)
    with pytest.raises(InputError, match="no free CPU"):
        fleet._wait_for_a_worker(ray, timeout_s=0.5)


def test_the_local_object_store_is_sized_to_the_machine() -> None:
    from pairedge.apps.fleet import OBJECT_STORE_CAP, OBJECT_STORE_MIN, object_store_bytes

    gib = 1 << 30
    assert object_store_bytes(24 * gib, None) == int(0.05 * 24 * gib)  # 1.2 GiB, not Ray's 7 GB
    assert object_store_bytes(512 * gib, None) == OBJECT_STORE_CAP
    assert object_store_bytes(24 * gib, 2 * gib) == gib // 2  # a quarter of ulimit -v
    assert object_store_bytes(gib, 100 << 20) == OBJECT_STORE_MIN  # never below Ray's minimum
