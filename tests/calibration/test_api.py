"""calibrate's defaults are the ones bench_calibrate.py's selection rule picked on selection seeds (its
committed results), so a changed default without a rerun of the selection fails here."""

from __future__ import annotations

import json
from pathlib import Path

from pairedge.calibration.api import DEFAULT_HEADROOM, DEFAULT_METHOD, DEFAULT_PERCENTILE, CalibrateOptions
from pairedge.calibration.default_set import RESERVED_SEEDS
from pairedge.calibration.quantize import QuantConfig

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bench_calibrate.json"


def test_defaults_are_the_selected_candidate() -> None:
    d = json.loads(RESULTS.read_text())["default"]
    chosen = d["selection"][d["selected"]]["options"]
    assert chosen["method"] == DEFAULT_METHOD
    assert "copies" not in chosen and tuple(chosen["headroom"]) == DEFAULT_HEADROOM
    if DEFAULT_METHOD == "percentile":  # the percentile is part of the choice, not only the method
        assert chosen["percentile"] == DEFAULT_PERCENTILE
    assert d["default_is_selected"] is True


def test_selection_rows_are_reserved_and_never_reported() -> None:
    d = json.loads(RESULTS.read_text())["default"]
    seeds = [int(s) for rows in d["selection_rows"] for s in rows.split(":")[1].split("-")]
    assert all(any(lo <= s <= hi for lo, hi in RESERVED_SEEDS) for s in seeds)
    assert not set(d["test_seeds"]) & {rows.split(":")[1] for rows in d["selection_rows"]}


def test_quant_config_defaults_are_calibrates() -> None:
    q, o = QuantConfig(), CalibrateOptions()
    assert (q.method, q.percentile, (q.input_headroom, q.hidden_headroom)) == (
        o.method,
        o.percentile,
        o.headroom,
    )


def test_the_calibrate_help_names_the_default_method() -> None:
    from pathlib import Path

    source = (Path(__file__).resolve().parents[2] / "sdk" / "apps" / "cli" / "calibrate.py").read_text()
    assert f"{DEFAULT_METHOD} (default)" in source
