"""pairedge.apps.fleet: one function over many items, serially or on a local Ray cluster, outcomes in order."""

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
    remote = run_tasks(math.sqrt, items, keys, executor="ray", workers=2, on_done=lambda o: done.append(o.key))
    assert [(o.key, o.value, o.error) for o in remote] == [(o.key, o.value, o.error) for o in local]
    assert sorted(done) == sorted(keys)
