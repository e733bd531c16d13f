"""Issue 9: seeded mutation fuzz of every file reader and every ``pairedge score`` input. 0 tracebacks.

Valid seed files (one per format) are mutated by a seeded generator: truncation, garbage bytes, stray
brackets and quotes, numbers replaced by huge / NaN / infinite values or values of the wrong type, JSON
nested 100,000 deep, integers of 5,000 digits, byte-order marks, UTF-16, CRLF, NUL bytes, duplicated or
dropped lines. Three levels:

* every reader, in-process: it returns or raises a :class:`~pairedge.core.errors.PairedgeError`; anything
  else (and any warning, which would be a second line on the terminal) fails;
* ``pairedge score`` for every protocol and input format through Typer's ``CliRunner``: exit 0, or exit 1
  with exactly one stderr line that is a *specific* message (not the boundary's generic fallback);
* ``pairedge run`` over a few small frames with mutated MOT / JRDB / CVML detection files;
* a handful through a real subprocess (``python -m pairedge.apps.cli``): exit 1 (2 for usage), exactly one
  stderr line, no "Traceback".
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pairedge.apps.cli import app
from pairedge.apps.cli.app import DEBUG_ENV
from pairedge.core.errors import PairedgeError
from typer.testing import CliRunner

runner = CliRunner()

LABELS = ["walking_together", "standing_together", "sitting_together"]
PERSON = [
    [100, 90, 100, 190],
    [85, 100, 65, 150],
    [115, 100, 135, 150],
    [65, 150, 60, 200],
    [135, 150, 140, 200],
    [100, 50, 100, 90],
]


def _jsonl(records: list[Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _pairwise_frames(score: bool) -> list[dict[str, Any]]:
    extra: dict[str, Any] = {"p_interact": 0.875, "probs": [0.75, 0.125, 0.125]} if score else {}
    return [
        {
            "frame": f,
            "interactions": [
                {"ids": [1, 2], "label": "walking_together", **extra},
                {"ids": [4, 3], "label": "sitting_together"},
            ],
            "groups": [{"members": [1, 2], "activity": "walking_together"}, {"members": [3, 4]}],
        }
        for f in (1, 2)
    ]


def _par_frames(scores: bool) -> list[dict[str, Any]]:
    out = []
    for f in (10, 20):
        if scores:
            persons = [{"id": k, "action_scores": [0.5 + k / 10] * 27} for k in (1, 2, 3)]
            groups = [
                {"members": [1, 2], "activity_scores": [0.25] * 31 + [0.75]},
                {"members": [3], "activity_scores": [0.0] * 32},
            ]
            out.append({"frame": f, "persons": persons, "groups": groups, "global_scores": [0.125] * 7})
        else:
            persons = [{"id": k, "actions": [k, 5], "social": [k]} for k in (1, 2, 3)]
            groups = [{"members": [1, 2]}, {"members": [3]}]
            out.append({"frame": f, "persons": persons, "groups": groups, "global": [2]})
    return out


def _stickmen_text(official: bool) -> bytes:
    lines = [" ".join(str(v) for v in stick) for stick in PERSON]
    moved = [" ".join(str(v + 300) for v in stick) for stick in PERSON]
    if not official:
        return ("\n".join(lines + moved) + "\n").encode()
    return ("\n".join(["img1 2 6", *lines, *moved, "img2 1", *lines]) + "\n").encode()


def _stickmen_json() -> bytes:
    images = [
        {
            "name": "img1",
            "stickmen": [PERSON, [[v + 300 for v in s] for s in PERSON]],
            "windows": [None, [370.0, 350.0, 430.0, 440.0]],
        },
        {"name": "img2", "stickmen": [PERSON]},
    ]
    return json.dumps({"images": images}).encode()


def _jrdb() -> bytes:
    def person(k: int, other: int) -> dict[str, Any]:
        return {
            "label_id": f"pedestrian:{k}",
            "box": [10.5 * k, 20, 30, 60.25],
            "attributes": {"occlusion": "Fully_visible"},
            "action_label": {"walking": 1},
            "social_group": {"cluster_ID": 1, "cluster_stat": 1},
            "social_activity": {"walking": 1},
            "H-interaction": [{"pair": f"pedestrian:{other}", "inter_labels": {"walking together": 1}}],
        }

    return json.dumps({"labels": {f"{f:06d}.jpg": [person(1, 2), person(2, 1)] for f in (0, 1)}}).encode()


def _cvml() -> bytes:
    frames = "".join(
        f'<frame number="{f}"><objectlist><object id="1"><box xc="50.5" yc="60" w="20" h="40"/></object>'
        f'<object id="2"><box xc="150" yc="60" w="22" h="41"/></object></objectlist></frame>'
        for f in (0, 1)
    )
    return f'<?xml version="1.0" encoding="utf-8"?><dataset>{frames}</dataset>'.encode()


def _mot() -> bytes:
    rows = [f"{f},{k},{10 * k}.5,20,30,60,1,-1,-1,-1" for f in (1, 2) for k in (1, 2)]
    return ("\n".join(rows) + "\n").encode()


def _cad() -> bytes:
    return b"1\t10\t20\t30\t60\t2\t1\n1\t100\t20\t30\t60\t2\t3\n11\t12\t20\t30\t60\t2\t1\n"


PAIRWISE_GOLD = _jsonl([{"labels": LABELS}, *_pairwise_frames(False)])
PAIRWISE_PRED = _jsonl(_pairwise_frames(True))
PAIRWISE_CSV = b'frame,id_a,id_b,label,p_interact\n1,1,2,walking_together,0.875\n1,3,4,"sitting_together",1\n'
PAR_GOLD = _jsonl(_par_frames(False))
PAR_PRED = _jsonl(_par_frames(True))


# ----------------------------------------------------------------------------------------------- mutations

_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_HUGE = [
    b"1" + b"0" * 400,
    b"9" * 5000,
    b"1e999",
    b"-1e400",
    b"18446744073709551616",
    b"1e300",
    b"-0",
    b"9223372036854775808",
    b"1e-400",
    b"3.5e38",
]
_NONFINITE = [b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf", b"-inf"]
_WRONG = [b'"x"', b"null", b"true", b"[]", b"{}", b"[[1]]", b'""', b'"[/x]"', b'{"a": 1}']
_DEEP = b"[" * 100_000 + b"]" * 100_000


def _replace_number(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    spans = [m.span() for m in _NUMBER.finditer(data)]
    if not spans:
        return data + rng.choice(pool)
    start, end = rng.choice(spans)
    return data[:start] + rng.choice(pool) + data[end:]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _dup_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    k = rng.randrange(len(lines))
    return b"\n".join(lines[: k + 1] + lines[k:])


def _drop_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def _insert(rng: random.Random, data: bytes, piece: bytes) -> bytes:
    k = rng.randrange(len(data) + 1)
    return data[:k] + piece + data[k:]


MUTATORS: list[Callable[[random.Random, bytes], bytes]] = [
    lambda rng, d: d[: rng.randrange(len(d) + 1)],  # truncate
    lambda rng, d: _insert(rng, d, rng.randbytes(rng.randint(1, 8))),  # garbage bytes
    lambda rng, d: _insert(
        rng, d, rng.choice([b"[", b"]", b"{", b"}", b'"', b",", b"\n", b"<", b">", b"\t"])
    ),
    lambda rng, d: _replace_number(rng, d, _HUGE),
    lambda rng, d: _replace_number(rng, d, _NONFINITE),
    lambda rng, d: _replace_number(rng, d, _WRONG),
    lambda rng, d: _replace_number(rng, d, [_DEEP]),
    lambda rng, d: b"\xef\xbb\xbf" + d,  # byte-order mark
    lambda rng, d: d.decode("utf-8", "replace").encode("utf-16"),
    lambda rng, d: d.replace(b"\n", b"\r\n"),
    lambda rng, d: _insert(rng, d, b"\x00"),
    lambda rng, d: _insert(rng, d, b"\xe9"),  # latin-1, not UTF-8
    _dup_line,
    _drop_line,
    lambda rng, d: b"",
    lambda rng, d: d[: (k := rng.randrange(len(d) + 1))] + d[k + rng.randint(1, 40) :],  # delete a span
]


def mutate(rng: random.Random, data: bytes) -> bytes:
    """1 to 3 random mutations of ``data``."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        data = rng.choice(MUTATORS)(rng, data)
    return data


# ----------------------------------------------------------------------------------------------- readers


def _readers() -> dict[str, tuple[str, bytes, Callable[[Path], object]]]:
    from pairedge.core.io.cad import read_cad_annotations
    from pairedge.core.io.cvml import read_cvml
    from pairedge.core.io.jrdb import read_jrdb
    from pairedge.core.io.mot import read_mot
    from pairedge.core.io.par import read_par
    from pairedge.core.io.stickmen import read_stickmen_images
    from pairedge.core.io.stickmen_json import read_stickmen_json
    from pairedge.measure.metrics.pairwise.files import read_label_header, read_pairwise_file
    from pairedge.runtime.runner.inputs import read_detections

    def pairwise(path: Path) -> object:
        read_label_header(path)
        return read_pairwise_file(path, LABELS)

    return {
        "pairwise_gold": (".jsonl", PAIRWISE_GOLD, pairwise),
        "pairwise_pred": (".jsonl", PAIRWISE_PRED, pairwise),
        "pairwise_csv": (".csv", PAIRWISE_CSV, pairwise),
        "par_gold": (".jsonl", PAR_GOLD, read_par),
        "par_pred": (".jsonl", PAR_PRED, read_par),
        "stickmen_official": (".txt", _stickmen_text(True), read_stickmen_images),
        "stickmen_bare": (".txt", _stickmen_text(False), read_stickmen_images),
        "stickmen_json": (".json", _stickmen_json(), read_stickmen_json),
        "jrdb": (".json", _jrdb(), read_jrdb),
        "cvml": (".xml", _cvml(), read_cvml),
        "mot": (".txt", _mot(), read_mot),
        "detections_mot": (".txt", _mot(), read_detections),
        "detections_jrdb": (".json", _jrdb(), read_detections),
        "detections_cvml": (".xml", _cvml(), read_detections),
        "cad_annotations": (".txt", _cad(), read_cad_annotations),
    }


READERS = list(_readers())
CASES_PER_READER = 60


@pytest.mark.parametrize("name", READERS)
def test_reader_fuzz_raises_only_pairedge_errors(name: str, tmp_path: Path) -> None:
    suffix, seed, read = _readers()[name]
    path = tmp_path / f"input{suffix}"
    path.write_bytes(seed)
    read(path)  # the seed itself is valid
    rng = random.Random(f"issue9-{name}")
    failures = []
    for case in range(CASES_PER_READER):
        data = mutate(rng, seed)
        path.write_bytes(data)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a warning would be a stray line on the terminal
                read(path)
        except PairedgeError as exc:
            assert "\n" not in str(exc), str(exc)
        except BaseException as exc:  # noqa: BLE001 - collecting what the fuzz found
            failures.append(f"case {case}: {type(exc).__name__}: {str(exc)[:200]} <- {data[:120]!r}")
    assert not failures, f"{name}: {len(failures)} non-pairedge errors:\n" + "\n".join(failures[:10])


# ----------------------------------------------------------------------------------------------- score


SCORE_INPUTS = {
    "pairwise": (".jsonl", PAIRWISE_PRED, PAIRWISE_GOLD, []),
    "pairwise_csv": (".csv", PAIRWISE_CSV, PAIRWISE_CSV, ["--labels", ",".join(LABELS)]),
    "par": (".jsonl", PAR_PRED, PAR_GOLD, []),
    "pcp_txt": (".txt", _stickmen_text(True), _stickmen_text(True), []),
    "pcp_json": (".json", _stickmen_json(), _stickmen_json(), ["--mode", "strict"]),
}
CASES_PER_PROTOCOL = 50


def _score_args(kind: str, pred: Path, gold: Path, extra: list[str]) -> list[str]:
    protocol = kind.split("_")[0]
    return ["score", "--protocol", protocol, "--pred", str(pred), "--gold", str(gold), *extra]


@pytest.mark.parametrize("kind", list(SCORE_INPUTS))
def test_score_fuzz_one_specific_line_or_success(kind: str, tmp_path: Path) -> None:
    suffix, pred_seed, gold_seed, extra = SCORE_INPUTS[kind]
    pred, gold = tmp_path / f"pred{suffix}", tmp_path / f"gold{suffix}"
    pred.write_bytes(pred_seed)
    gold.write_bytes(gold_seed)
    args = _score_args(kind, pred, gold, extra)
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output  # the seeds score
    rng = random.Random(f"issue9-score-{kind}")
    codes = {0: 0, 1: 0}
    for case in range(CASES_PER_PROTOCOL):
        target, seed = (pred, pred_seed) if rng.random() < 0.5 else (gold, gold_seed)
        data = mutate(rng, seed)
        target.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning would be a stray stderr line: the boundary reports it
            result = runner.invoke(app, args)
        where = f"case {case} ({target.name} <- {data[:150]!r})"
        assert result.exit_code in codes, (where, result.exit_code, result.output, result.exception)
        codes[result.exit_code] += 1
        assert "Traceback" not in result.output, where
        if result.exit_code == 1:
            lines = result.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), (where, result.stderr)
            assert DEBUG_ENV not in lines[0], (where, lines[0])  # a typed error, not the generic fallback
        else:
            assert result.stderr == "", (where, result.stderr)
        target.write_bytes(seed)
    assert codes[1] > CASES_PER_PROTOCOL // 3, codes  # the fuzz does reach the error paths


# ----------------------------------------------------------------------------------------------- run


@pytest.mark.parametrize("kind", ["mot", "jrdb", "cvml"])
def test_run_fuzz_detection_files(kind: str, tmp_path: Path) -> None:
    """``pairedge run`` over three small frames with mutated detection files: success or one specific line."""
    import cv2
    import numpy as np

    suffix, seed = {"mot": (".txt", _mot()), "jrdb": (".json", _jrdb()), "cvml": (".xml", _cvml())}[kind]
    images = tmp_path / "frames"
    images.mkdir()
    pixels = np.random.default_rng(0).integers(0, 255, (3, 120, 160, 3), dtype=np.uint8)
    for k, image in enumerate(pixels):
        cv2.imwrite(str(images / f"{k:06d}.png"), image)
    det = tmp_path / f"det{suffix}"
    args = ["run", str(images), "--detections", str(det), "--no-video", "--out", str(tmp_path / "out")]
    rng = random.Random(f"issue9-run-{kind}")
    for case in range(12):
        data = seed if case == 0 else mutate(rng, seed)
        det.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = runner.invoke(app, args)
        where = f"case {case} ({data[:150]!r})"
        assert result.exit_code in (0, 1) and "Traceback" not in result.output, (where, result.output)
        lines = result.stderr.splitlines()
        if result.exit_code == 1:
            assert len(lines) == 1 and lines[0].startswith("error: "), (where, result.stderr)
            assert DEBUG_ENV not in lines[0], (where, lines[0])
        else:
            assert all(line.startswith("warning:") for line in lines), (where, result.stderr)
        assert case or result.exit_code == 0, result.output  # the seed runs


# ----------------------------------------------------------------------------------------------- subprocess


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pairedge.apps.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_subprocess_errors_are_one_stderr_line(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes(PAIRWISE_GOLD)
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(_DEEP + b"\n")
    huge = tmp_path / "huge.jsonl"
    huge.write_bytes(_replace_number(random.Random(3), PAR_GOLD, [b"1" + b"0" * 400]))
    sticks = tmp_path / "s.txt"
    sticks.write_bytes(_stickmen_text(True).replace(b"img1", b"[/x]").replace(b"img2", b"[/x]"))
    cases = [
        (1, ["score", "-p", "pairwise", "--pred", str(deep), "--gold", str(gold)]),
        (1, ["score", "-p", "par", "--pred", str(huge), "--gold", str(huge)]),
        (1, ["score", "-p", "pcp", "--pred", str(sticks), "--gold", str(sticks)]),
        (1, ["score", "-p", "pairwise", "--pred", str(tmp_path), "--gold", str(gold)]),
        (
            1,
            [
                "score",
                "-p",
                "pairwise",
                "--pred",
                str(gold),
                "--gold",
                str(gold),
                "--json",
                "/nonexistent/x.json",
            ],
        ),
        (2, ["score", "-p", "pairwise", "--pred", str(gold)]),
    ]
    stderr = []
    for code, args in cases:
        proc = _cli(*args)
        assert proc.returncode == code, (args, proc.returncode, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, proc.stderr)
        assert "Traceback" not in proc.stderr + proc.stdout
        stderr.append(proc.stderr)
    assert "duplicate image '[/x]'" in stderr[2]  # markup printed literally
    assert "nested too deeply" in stderr[0] and "int64" in stderr[1] and "cannot write" in stderr[4]
