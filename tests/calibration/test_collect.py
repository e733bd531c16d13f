"""``pairedge calibrate --cad``: Collective Activity sequences through the model's own pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from cal_data import model_dir
from pairedge.calibration.collect import collect_cad
from pairedge.core.io.cad import read_cad_mat
from pairedge.core.labels import CAD8, CAD_TOGETHER


def test_every_scored_pair_is_a_row_and_the_labels_are_the_annotations(shared_data: Path) -> None:
    path = shared_data / "cad_choi" / "annotations" / "anno01.mat"
    seq = read_cad_mat(path)
    got = collect_cad(model_dir(), path, stride=10)
    s1 = got.stage1
    assert got.sources == ("cad01",) and set(s1.group.tolist()) == {"cad01"}
    kept = range(1, seq.num_frames + 1, 10)  # stride 10 keeps frames 1, 11, 21, ...
    labelled = sum(len(seq.pair_labels(f)[0]) for f in kept)
    present = [int(seq.present[f - 1].sum()) for f in kept]
    scored = sum(n * (n - 1) // 2 for n in present)
    # every pair the runtime scores is a row (CAD labels every pair of present people) ...
    assert labelled <= len(s1.X) <= scored
    # ... and the annotated ones carry their truth: stage-1 positive exactly for the "together" labels
    together = {CAD8.classes.index(n) for n in CAD_TOGETHER}
    truth = np.concatenate([seq.pair_labels(f)[1] for f in kept])
    known = s1.truth[s1.truth >= 0]
    assert len(known) == labelled
    assert int(known.sum()) == sum(int(k) in together for k in truth.tolist()) > 0
    assert np.isfinite(s1.X).all() and s1.X.shape[1] == len(got.stage1.X[0])


def test_calibrate_cli_reads_a_folder_of_sequences(tmp_path: Path, shared_data: Path) -> None:
    import json

    from pairedge.apps.cli import app
    from typer.testing import CliRunner

    folder = tmp_path / "sequences"
    folder.mkdir()
    for n in ("01", "02", "03", "04"):
        (folder / f"anno{n}.mat").symlink_to(shared_data / "cad_choi" / "annotations" / f"anno{n}.mat")
    out = tmp_path / "model"
    result = CliRunner().invoke(app, ["calibrate", str(model_dir()), "--out", str(out), "--cad", str(folder)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "calibration.json").read_text())
    assert report["sources"] == ["cad01", "cad02", "cad03", "cad04"]
    assert (out / "stage1.int8.onnx").is_file() and (out / "stage2.int8.onnx").is_file()
