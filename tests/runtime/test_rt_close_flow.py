"""Pipeline.close releases the flow backend it built (a CUDA flow holds GPU memory), not one it was given."""

from __future__ import annotations

from pairedge.runtime import Pipeline
from pairedge.runtime.flow import get_flow_backend
from pairedge.runtime.runner.run import resolve_model


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


def test_a_failed_load_closes_the_flow_backend_it_made(monkeypatch) -> None:
    import pytest
    from pairedge.core.errors import InputError
    from pairedge.runtime import pipeline as pipeline_module

    made: list[_Closable] = []
    real = pipeline_module.make_flow_backend

    def make(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - wraps the real factory
        backend = real(*args, **kwargs)
        probe = _Closable()
        monkeypatch.setattr(backend, "close", probe.close, raising=False)
        made.append(probe)
        return backend

    monkeypatch.setattr(pipeline_module, "make_flow_backend", make)
    with pytest.raises(InputError, match="unknown classifier backend"):
        Pipeline.load(resolve_model(None), backend="no-such-backend")
    assert [p.closed for p in made] == [1]
