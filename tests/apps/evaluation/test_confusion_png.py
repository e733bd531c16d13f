"""confusion.png of ``pairedge eval``: drawn with OpenCV + numpy, so a plain install (no matplotlib) writes
it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.apps.evaluation.confusion_png import ascii_text, fit, render, shade, write_png
from pairedge.apps.evaluation.evaluate import EvalReport
from pairedge.apps.evaluation.files import confusion_png, write_eval
from pairedge.core.errors import InputError
from pairedge.core.labels import SIM7


def _report(
    confusion: np.ndarray,
    labels: tuple[str, ...],
    *,
    has_truth: bool = True,
    missing: np.ndarray | None = None,
    model: str = "models/default",
) -> EvalReport:
    c = len(labels)
    return EvalReport(
        model=model,
        precision="fp32",
        backend="onnxruntime",
        flow="none",
        labels=labels,
        sources=("sim:static:1",),
        frames=4,
        pairs=10,
        confusion=np.asarray(confusion, np.int64),
        missing=np.zeros(c, np.int64) if missing is None else np.asarray(missing, np.int64),
        stage1={"tp": 5, "fp": 1, "fn": 2},
        group_activity=None,
        group_detection=None,
        latency_ms={"total": 1.0},
        has_truth=has_truth,
    )


def _read(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert image is not None and image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    return image


def _no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("matplotlib", "matplotlib.pyplot"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError):
        import matplotlib  # noqa: F401


def test_write_eval_writes_a_png_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_matplotlib(monkeypatch)
    c = len(SIM7.classes)
    conf = np.diag(np.arange(10, 10 + c)) + 1
    files = write_eval(_report(conf, SIM7.classes, missing=np.arange(c)), tmp_path)
    assert "png_skipped" not in files and Path(files["png"]) == tmp_path / "confusion.png"
    image = _read(tmp_path / "confusion.png")
    assert 300 <= image.shape[0] <= 1000 and 400 <= image.shape[1] <= 1200
    notes = json.loads((tmp_path / "eval.json").read_text())["notes"]
    assert not any("matplotlib" in n or "confusion.png" in n for n in notes)
    assert "confusion.png" not in (tmp_path / "eval.md").read_text()


def test_ten_classes_sensible_size(tmp_path: Path) -> None:
    labels = tuple(f"interaction_class_{k}_with_a_rather_long_name" for k in range(10))
    conf = np.random.default_rng(0).integers(0, 100_000, (10, 10))
    drawn = render(conf, labels, title="model fp32: MPCA 0.1234")
    assert 500 <= drawn.image.shape[0] <= 1400 and 700 <= drawn.image.shape[1] <= 1600
    x0, y0, x1, y1 = drawn.cell_box(9, 9)
    assert x1 <= drawn.image.shape[1] and y1 <= drawn.image.shape[0]


def test_two_classes(tmp_path: Path) -> None:
    assert confusion_png(_report(np.array([[7, 1], [2, 5]]), ("yes", "no")), tmp_path / "c.png") is None
    image = _read(tmp_path / "c.png")
    assert 120 <= image.shape[0] <= 600 and 300 <= image.shape[1] <= 800


def test_all_zero_matrix(tmp_path: Path) -> None:
    files = write_eval(_report(np.zeros((3, 3)), ("a", "b", "c")), tmp_path)
    image = _read(Path(files["png"]))
    drawn = render(np.zeros((3, 3)), ("a", "b", "c"), title="default fp32: MPCA -")
    assert image.shape == drawn.image.shape and np.array_equal(image, drawn.image)
    x0, y0, _, _ = drawn.cell_box(1, 1)
    assert tuple(int(v) for v in image[y0 + 4, x0 + 4]) == shade(0.0)  # empty rows: the colour of share 0


def test_colour_darkens_with_row_share(tmp_path: Path) -> None:
    """Every channel (so any intensity) falls as a cell's share of its row grows; read back from the PNG."""
    # row shares: 0.1 / 0.9, 0.4 / 0.6, 0.7 / 0.3, 1.0 (and 0.0 off the blocks)
    conf = np.array([[1, 9, 0, 0], [4, 6, 0, 0], [0, 0, 7, 3], [0, 0, 0, 10]])
    drawn = render(conf, ("a", "b", "c", "d"))
    write_png(drawn.image, tmp_path / "c.png")
    image = _read(tmp_path / "c.png").astype(int)

    def pixel(i: int, j: int) -> np.ndarray:  # a corner of the cell, away from its text and the grid lines
        x0, y0, _, _ = drawn.cell_box(i, j)
        return image[y0 + 4, x0 + 4]

    by_share = [
        (0.0, pixel(0, 2)),
        (0.1, pixel(0, 0)),
        (0.3, pixel(2, 3)),
        (0.4, pixel(1, 0)),
        (0.6, pixel(1, 1)),
        (0.7, pixel(2, 2)),
        (0.9, pixel(0, 1)),
        (1.0, pixel(3, 3)),
    ]
    for (_, lo), (_, hi) in zip(by_share, by_share[1:], strict=False):
        assert np.all(hi <= lo) and hi.sum() < lo.sum()
        assert (
            cv2.cvtColor(hi[None, None].astype(np.uint8), cv2.COLOR_BGR2GRAY)[0, 0]
            < cv2.cvtColor(lo[None, None].astype(np.uint8), cv2.COLOR_BGR2GRAY)[0, 0]
        )
    grey = [int(sum(shade(s))) for s in np.linspace(0, 1, 101)]
    assert grey == sorted(grey, reverse=True) and len(set(grey)) > 50


@pytest.mark.parametrize(
    "labels",
    [
        ("händeschütteln", "握手 🤝", "line\nbreak\ttab", "\x00\x1b[31mred"),
        ("", "   ", "%s {0} {} \\ / <>&\"'", "x" * 400),
        ("a.b", "a..b", "Ω≈ç√", "\u200b\u202e rtl"),
    ],
)
def test_unusual_class_names_do_not_crash(tmp_path: Path, labels: tuple[str, ...]) -> None:
    conf = np.arange(16).reshape(4, 4)
    report = _report(conf, labels, model="mödel/ünïcode 模型 " + "y" * 300)
    files = write_eval(report, tmp_path)
    image = _read(Path(files["png"]))
    assert image.shape[1] <= 1600 and image.shape[0] <= 1400  # long names and titles are shortened


def test_text_helpers() -> None:
    assert ascii_text("händeschütteln") == "handeschutteln"
    assert ascii_text("握手 ok") == "?? ok"
    assert ascii_text("a\n\tb") == "a b" and ascii_text("") == "?"
    short = fit("walking_together_with_a_very_long_suffix", 100)
    assert ".." in short and short.startswith("walk") and short.endswith("ix")
    assert cv2.getTextSize(short, cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1)[0][0] <= 100
    assert fit("ok", 100) == "ok"


def test_deterministic(tmp_path: Path) -> None:
    conf = np.array([[5, 2, 0], [1, 8, 1], [0, 3, 9]])
    for k in (1, 2):
        write_eval(_report(conf, ("walking_together", "leaving", "no_interaction")), tmp_path / str(k))
    assert (tmp_path / "1" / "confusion.png").read_bytes() == (tmp_path / "2" / "confusion.png").read_bytes()


def test_unwritable_path_raises_oserror(tmp_path: Path) -> None:
    """Like eval.json and eval.md: an OSError, which the CLI turns into one line."""
    (tmp_path / "confusion.png").mkdir()
    with pytest.raises(OSError):
        write_eval(_report(np.eye(2), ("a", "b")), tmp_path)
    with pytest.raises(OSError):
        write_png(np.zeros((4, 4, 3), np.uint8), tmp_path / "absent" / "c.png")


def test_eval_cli_reports_an_unwritable_png_as_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pairedge.apps.cli import app
    from pairedge.apps.cli import eval as cli_eval
    from pairedge.apps.evaluation.fleet_eval import FleetResult
    from typer.testing import CliRunner

    report = _report(np.eye(2), ("a", "b"))
    monkeypatch.setattr(cli_eval, "evaluate_many", lambda *a, **k: FleetResult(report, ()))
    (tmp_path / "confusion.png").mkdir()
    from pairedge.core.bundled import default_model_dir

    res = CliRunner().invoke(
        app,
        ["eval", str(default_model_dir()), "--data", "sim:static:seeds=1:frames=2", "--out", str(tmp_path)],
    )
    assert res.exit_code == 1 and "confusion.png" in res.output and "Traceback" not in res.output


def test_no_truth_still_skipped_with_a_note(tmp_path: Path) -> None:
    files = write_eval(_report(np.zeros((2, 2)), ("a", "b"), has_truth=False), tmp_path)
    assert files["png_skipped"] == "no ground truth: no confusion matrix"
    assert not (tmp_path / "confusion.png").exists()


def test_bad_shapes_raise_input_error() -> None:
    with pytest.raises(InputError, match=r"\(3, 3\)"):
        render(np.zeros((2, 2)), ("a", "b", "c"))
    with pytest.raises(InputError, match="missing"):
        render(np.zeros((2, 2)), ("a", "b"), missing=np.zeros(3))
