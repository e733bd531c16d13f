"""``pairedge doctor`` on a (fake) Jetson: the JetPack / L4T, power mode, clocks, OpenCV / numpy origin,
rosbags and ray rows in the table and in ``--json``; off a Jetson the same rows say so."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pairedge.apps import probe as probe_jetson
from pairedge.apps.cli import app
from typer.testing import CliRunner

runner = CliRunner()
JETSON_ROWS = (
    "Jetson L4T / JetPack",
    "Jetson power mode",
    "clocks",
    "OpenCV build",
    "numpy build",
    "rosbags",
    "ray",
    "trackers",
)


def fake_orin(root: Path) -> None:
    (root / "etc").mkdir()
    (root / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.3, GCID: 1, BOARD: generic\n")
    for k in range(4):
        f = root / f"sys/devices/system/cpu/cpu{k}/cpufreq/scaling_cur_freq"
        f.parent.mkdir(parents=True)
        f.write_text("1728000\n")


def commands(argv: list[str], **kw: Any) -> SimpleNamespace:
    out = {"dpkg-query": "6.2.1+b38", "nvpmodel": "NV Power Mode: 25W\n1\n"}[argv[0]]
    return SimpleNamespace(returncode=0, stdout=out, stderr="")


@pytest.fixture()
def on_orin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_orin(tmp_path)
    real = probe_jetson.jetson_checks
    monkeypatch.setattr(probe_jetson, "jetson_checks", lambda: real(tmp_path, commands))


def test_json_has_the_jetson_rows(on_orin: None) -> None:
    res = runner.invoke(app, ["doctor", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(JETSON_ROWS) <= set(data)
    assert data["Jetson L4T / JetPack"] == {"ok": True, "detail": "L4T 36.4.3, JetPack 6.2.1"}
    assert data["Jetson power mode"] == {"ok": True, "detail": "25W (mode 1)"}
    assert data["clocks"] == {"ok": True, "detail": "CPU 4 cores 1728 MHz, GPU devfreq not readable"}
    assert list(data)[-len(JETSON_ROWS) :] == list(JETSON_ROWS)  # after the machine's rows, in this order


def test_table_shows_them_in_80_columns(on_orin: None) -> None:
    res = runner.invoke(app, ["doctor"], terminal_width=80)
    assert res.exit_code == 0, res.output
    assert all(len(ln) <= 80 for ln in res.output.splitlines())
    table = {ln.split("│")[1].strip(): ln for ln in res.output.splitlines() if ln.startswith("│")}
    assert "L4T 36.4.3, JetPack 6.2.1" in table["Jetson L4T / JetPack"]
    assert "25W (mode 1)" in table["Jetson power mode"]


def test_off_a_jetson_the_rows_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = probe_jetson.jetson_checks
    monkeypatch.setattr(probe_jetson, "jetson_checks", lambda: real(tmp_path, commands))
    data = json.loads(runner.invoke(app, ["doctor", "--json"]).output)
    assert data["Jetson L4T / JetPack"] == {"ok": False, "detail": probe_jetson.NOT_A_JETSON}
    assert data["Jetson power mode"] == {"ok": False, "detail": probe_jetson.NOT_A_JETSON}
