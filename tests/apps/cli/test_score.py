"""``pairedge score``: happy path, JSON output, dispatch to pcp / par, malformed files -> exit 1, one line."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pairedge.core.metrics
import pytest
from pairedge.apps.cli import app
from pairedge.apps.cli import score as score_command
from pairedge.core.metrics.result import ScoreReport, Table
from typer.testing import CliRunner

runner = CliRunner()

GOLD = [
    {"label_set": "paper3"},
    {
        "frame": 1,
        "interactions": [
            {"ids": [1, 2], "label": "walking_together"},
            {"ids": [3, 4], "label": "sitting_together"},
        ],
        "groups": [{"members": [1, 2], "activity": "walking_together"}],
    },
]
PRED = [
    {
        "frame": 1,
        "interactions": [
            {"ids": [1, 2], "label": "walking_together", "p_interact": 0.9},
            {"ids": [3, 4], "label": "standing_together", "p_interact": 0.7},
        ],
        "groups": [{"members": [1, 2], "activity": "walking_together"}],
    }
]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_pairwise_happy_path_prints_tables_and_writes_json(tmp_path: Path) -> None:
    gold, pred = _write(tmp_path / "gold.jsonl", GOLD), _write(tmp_path / "pred.jsonl", PRED)
    out = tmp_path / "report.json"
    result = runner.invoke(
        app, ["score", "--protocol", "pairwise", "--pred", str(pred), "--gold", str(gold), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    for text in (
        "accuracy",
        "0.5000",
        "macro_f1",
        "per class",
        "confusion matrix",
        "group detection by size",
    ):
        assert text in result.output
    data = json.loads(out.read_text())
    assert data["protocol"] == "pairwise"
    assert data["summary"]["accuracy"] == 0.5
    assert data["summary"]["pair_precision"] == 1.0
    assert data["details"]["confusion"] == [[1, 0, 0], [0, 0, 0], [0, 1, 0]]


def test_labels_option_for_headerless_csv(tmp_path: Path) -> None:
    csv = tmp_path / "g.csv"
    csv.write_text("frame,id_a,id_b,label\n1,1,2,b\n")
    args = ["score", "-p", "pairwise", "--pred", str(csv), "--gold", str(csv)]
    assert runner.invoke(app, [*args, "--labels", "a,b"]).exit_code == 0
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "no label set" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"frame": 1, "interactions": [{"ids": [1, 2], "label": "dancing"}]}', "unknown label 'dancing'"),
        ('{"frame": 1, "interactions": [{"ids": [1, 2], "p_interact": NaN}]}', "p_interact"),
        ('{"frame": 1, "interactions": [', "invalid JSON"),
    ],
)
def test_malformed_file_exits_one_without_traceback(tmp_path: Path, line: str, expected: str) -> None:
    gold = _write(tmp_path / "gold.jsonl", GOLD)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line + "\n")
    result = runner.invoke(app, ["score", "-p", "pairwise", "--pred", str(bad), "--gold", str(gold)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "bad.jsonl, record line 1" in result.output and expected in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_unknown_protocol_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["score", "-p", "nope", "--pred", "a", "--gold", "b"])
    assert result.exit_code == 2


@pytest.fixture
def fake_protocols(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Replace pcp / par with recorders so dispatch is tested independently of their implementations."""
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    for name in ("pcp", "par"):
        module = types.ModuleType(f"pairedge.core.metrics.{name}")

        def score_files(*args: Any, _name: str = name, **kwargs: Any) -> ScoreReport:
            calls.append((_name, args, kwargs))
            table = Table("per part", ("part", "pcp"), (("torso", 0.75),))
            return ScoreReport(_name, {"total": 0.5}, (table,), {}, ("a note",))

        module.score_files = score_files  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setattr(pairedge.core.metrics, name, module, raising=False)
        monkeypatch.setattr(score_command, name, module)  # the command's own reference to the protocol
    return calls


def test_dispatches_pcp_and_par_with_their_options(tmp_path: Path, fake_protocols: list[Any]) -> None:
    args = ["--pred", "p.txt", "--gold", "g.txt"]
    result = runner.invoke(app, ["score", "-p", "pcp", *args, "--mode", "strict", "--threshold", "0.2"])
    assert result.exit_code == 0, result.output
    assert "per part" in result.output and "0.7500" in result.output and "a note" in result.output
    result = runner.invoke(app, ["score", "-p", "par", *args, "--json", str(tmp_path / "par.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "par.json").read_text())["summary"] == {"total": 0.5}
    (n1, a1, k1), (n2, a2, k2) = fake_protocols
    assert (
        n1 == "pcp"
        and [str(a) for a in a1] == ["p.txt", "g.txt"]
        and k1 == {"mode": "strict", "threshold": 0.2}
    )
    assert n2 == "par" and [str(a) for a in a2] == ["p.txt", "g.txt"] and k2 == {}
