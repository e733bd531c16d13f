"""``pairedge score``: happy path, JSON output, dispatch to pcp / par, malformed files -> exit 1, one line."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pairedge.measure.metrics
import pytest
from pairedge.apps.cli import app
from pairedge.apps.cli import score as score_command
from pairedge.apps.cli.app import console
from pairedge.apps.cli.score import ParVariant, _par_settings, print_report
from pairedge.core.io.par import ParFrame, write_par
from pairedge.measure.metrics import par
from pairedge.measure.metrics.par import ParThresholds
from pairedge.measure.metrics.result import ScoreReport, Table
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
        module = types.ModuleType(f"pairedge.measure.metrics.{name}")

        def score_files(*args: Any, _name: str = name, **kwargs: Any) -> ScoreReport:
            calls.append((_name, args, kwargs))
            table = Table("per part", ("part", "pcp"), (("torso", 0.75),))
            return ScoreReport(_name, {"total": 0.5}, (table,), {}, ("a note",))

        module.score_files = score_files  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setattr(pairedge.measure.metrics, name, module, raising=False)
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


# -- cli_score_par_options: ``pairedge score --protocol par``: --par-variant and the --par-*-threshold options
# map onto the API.


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """Gold labels and raw-logit predictions where the variant and every threshold change the result.

    Gold: 2 groups; prediction: 1 group (so official and corrected social recall differ) with logits near
    each released threshold (actions 0.65 / 0.55, social 0.7 / 0.55, global 0.55).
    """
    gold = [
        ParFrame.from_labels(
            0, [(1, [0]), (2, [1]), (3, [2]), (4, [3])], [([1, 2], [5]), ([3, 4], [7])], (3,)
        )
    ]
    actions = np.full((4, 27), -3.0)
    actions[0, 0], actions[1, 1], actions[2, 2], actions[3, 3] = 0.65, 0.9, 0.9, 0.9
    actions[0, 4] = 0.55  # a wrong label, on only below 0.55
    social = np.full((1, 32), -3.0)
    social[0, 5], social[0, 9] = 0.7, 0.55  # 9 is wrong, on only below 0.55
    glob = np.full(7, -3.0)
    glob[3] = 0.55  # right, on at the released 0.5, off above 0.55
    pred = [ParFrame(0, np.array([1, 2, 3, 4]), actions, (np.array([1, 2]),), social, glob)]
    gold_path, pred_path = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    write_par(gold_path, gold)
    write_par(pred_path, pred)
    return pred_path, gold_path


def _cli(tmp_path: Path, *options: str) -> tuple[Any, dict[str, Any]]:
    pred, gold = _files(tmp_path)
    out = tmp_path / "report.json"
    args = ["score", "-p", "par", "--pred", str(pred), "--gold", str(gold), "--json", str(out), *options]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result, json.loads(out.read_text())


def _api(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    pred, gold = _files(tmp_path)
    return json.loads(json.dumps(par.score_files(pred, gold, **kwargs).to_dict()))


def _assert_one_line_error(result: Any, *needles: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for needle in needles:
        assert needle in lines[0]


def test_variant_choices_are_the_apis() -> None:
    assert tuple(v.value for v in ParVariant) == par.VARIANTS


def test_default_is_the_api_official_result_with_released_thresholds(tmp_path: Path) -> None:
    result, report = _cli(tmp_path)
    assert report == _api(tmp_path) == _api(tmp_path, variant="official", thresholds=ParThresholds())
    assert report["details"]["variant"] == "official"
    assert report["details"]["thresholds"] == {"actions": 0.6, "social": 0.6, "global": 0.5}
    assert "par variant: official; thresholds" in result.output
    assert "actions 0.6, social 0.6, global 0.5" in result.output
    _, explicit = _cli(
        tmp_path,
        "--par-variant",
        "official",
        "--par-actions-threshold",
        "0.6",
        "--par-social-threshold",
        "0.6",
        "--par-global-threshold",
        "0.5",
    )
    assert explicit == report


def test_corrected_variant_is_the_api_corrected_result(tmp_path: Path) -> None:
    result, report = _cli(tmp_path, "--par-variant", "corrected")
    assert report == _api(tmp_path, variant="corrected")
    assert report["details"]["variant"] == "corrected"
    assert "par variant: corrected" in result.output and "JRDB-PAR (corrected)" in result.output
    official = _api(tmp_path)
    assert report["summary"]["R_p"] == pytest.approx(0.5)  # 1 matched pair / 2 true groups
    assert official["summary"]["R_p"] == pytest.approx(1.0)  # / 1 predicted group (the official quirk)
    assert report["summary"] != official["summary"]


@pytest.mark.parametrize(
    ("options", "thresholds"),
    [
        (["--par-actions-threshold", "0.5"], ParThresholds(actions=0.5)),
        (["--par-social-threshold", "0.5"], ParThresholds(social=0.5)),
        (["--par-global-threshold", "0.6"], ParThresholds(global_activity=0.6)),
        (["--par-actions-threshold", "-1e9"], ParThresholds(actions=-1e9)),  # any finite logit
        (
            [
                "--par-actions-threshold",
                "0.7",
                "--par-social-threshold",
                "0.5",
                "--par-global-threshold",
                "0.6",
            ],
            ParThresholds(actions=0.7, social=0.5, global_activity=0.6),
        ),
    ],
)
@pytest.mark.parametrize("variant", ["official", "corrected"])
def test_thresholds_change_the_result_exactly_as_the_api(
    tmp_path: Path, options: list[str], thresholds: ParThresholds, variant: str
) -> None:
    result, report = _cli(tmp_path, "--par-variant", variant, *options)
    expected = _api(tmp_path, variant=variant, thresholds=thresholds)
    assert report == expected
    assert report["summary"] != _api(tmp_path, variant=variant)["summary"]  # the thresholds did matter
    th = report["details"]["thresholds"]
    assert th == {
        "actions": thresholds.actions,
        "social": thresholds.social,
        "global": thresholds.global_activity,
    }
    assert f"par variant: {variant}" in result.output
    assert f"actions {thresholds.actions}, social {thresholds.social}" in result.output


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--par-variant", "lenient"], "--par-variant"),
        (["--par-variant", ""], "--par-variant"),
        (["--par-actions-threshold", "nan"], "--par-actions-threshold"),
        (["--par-social-threshold", "inf"], "--par-social-threshold"),
        (["--par-global-threshold", "-inf"], "--par-global-threshold"),
        (["--par-global-threshold", "high"], "--par-global-threshold"),
        (["--par-social-threshold"], "--par-social-threshold"),
    ],
)
def test_bad_values_stop_with_one_line(tmp_path: Path, options: list[str], needle: str) -> None:
    pred, gold = _files(tmp_path)
    out = tmp_path / "report.json"
    args = ["score", "-p", "par", "--pred", str(pred), "--gold", str(gold), "--json", str(out), *options]
    result = runner.invoke(app, args)
    _assert_one_line_error(result, needle)
    assert result.exit_code == 2  # a usage error, like any other invalid option value
    assert not out.exists()


@pytest.mark.parametrize("protocol", ["pairwise", "pcp"])
@pytest.mark.parametrize(
    "options",
    [
        ["--par-variant", "official"],
        ["--par-variant", "corrected"],
        ["--par-actions-threshold", "0.6"],
        ["--par-social-threshold", "0.1"],
        ["--par-global-threshold", "0.5"],
        ["--par-variant", "corrected", "--par-global-threshold", "0.2"],
    ],
)
def test_par_options_with_another_protocol_are_refused(
    tmp_path: Path, protocol: str, options: list[str]
) -> None:
    out = tmp_path / "report.json"
    args = ["score", "-p", protocol, "--pred", "p.txt", "--gold", "g.txt", "--json", str(out), *options]
    result = runner.invoke(app, args)
    given = [o for o in options if o.startswith("--")]
    _assert_one_line_error(result, *given, "only for --protocol par", f"--protocol {protocol}")
    assert result.exit_code == 1
    assert not out.exists()


def test_settings_line_is_escaped_and_only_for_par() -> None:
    th = {"actions": 0.6, "social": 0.6, "global": 0.5}
    assert _par_settings(ScoreReport("pcp", {}, (), {"variant": "x", "thresholds": th}, ())) is None
    assert _par_settings(ScoreReport("par", {"total": 0.5}, (), {}, ())) is None  # no details: no line
    report = ScoreReport("par", {"F_a": 1.0}, (), {"variant": "[bold]x[/]", "thresholds": th}, ())
    with console.capture() as captured:
        print_report(report)
    assert "par variant: [bold]x[/]; thresholds" in captured.get()  # markup printed as text
