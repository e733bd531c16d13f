"""Pipeline.close releases the flow backend it built (a CUDA flow holds GPU memory), not one it was given."""

from __future__ import annotations

from pairedge.runtime import Pipeline
from pairedge.runtime.flow import get_flow_backend
from pairedge.runtime.run import resolve_model


class _Closable:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_close_releases_a_flow_backend_load_made_but_not_a_given_one(monkeypatch) -> None:
    model = resolve_model(None)
    with Pipeline.load(model) as pipe:
        assert pipe.flow is not None
        probe = _Closable()
        monkeypatch.setattr(pipe.flow, "close", probe.close, raising=False)
    assert probe.closed == 1
    given = get_flow_backend("dis", scale=0.5)
    probe = _Closable()
    monkeypatch.setattr(given, "close", probe.close, raising=False)
    with Pipeline.load(model, flow=given):
        pass
    assert probe.closed == 0
