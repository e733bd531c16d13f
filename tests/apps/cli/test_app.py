"""Issue 9, CLI part: every error is one escaped stderr line with the right exit code, never a traceback.

One test per case of the issue: Rich markup in messages and data, non-pairedge exceptions at the boundary,
unwritable outputs, usage errors, ``--version``, numbers beyond int64 / float range, deep JSON, empty
inputs, CSV quotes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import pytest
import typer
from pairedge.apps.cli import app
from pairedge.apps.cli.app import DEBUG_ENV, handle_errors
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.jrdb import read_jrdb
from pairedge.core.io.par import read_par
from pairedge.core.io.stickmen import read_stickmen_images
from pairedge.core.io.stickmen_json import read_stickmen_json
from pairedge.measure.metrics.pairwise.files import read_pairwise_file
from typer.testing import CliRunner

runner = CliRunner()

GOLD = [
    {"labels": ["walking_together", "standing_together"]},
    {"frame": 1, "interactions": [{"ids": [1, 2], "label": "walking_together"}]},
]
PERSON = [
    [100, 90, 100, 190],
    [85, 100, 65, 150],
    [115, 100, 135, 150],
    [65, 150, 60, 200],
    [135, 150, 140, 200],
    [100, 50, 100, 90],
]


def _jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def assert_one_error_line(result: Any, code: int = 1, *needles: str) -> str:
    """Exit ``code``, exactly one stderr line starting 'error:', no traceback; returns that line."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ------------------------------------------------------------------------------------ command line itself


def test_version_prints_the_version() -> None:
    from pairedge.core.version import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == __version__


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["score", "--protocol", "pcp"], "Missing option '--pred'"),
        (["score", "--protocol", "nope", "--pred", "a", "--gold", "b"], "'nope' is not one of"),
        (["score", "--bogus"], "No such option: --bogus"),
        (["nosuchcommand"], "No such command 'nosuchcommand'"),
        (["simulate", "--out", "x", "--frames", "0"], "--frames"),
    ],
)
def test_usage_errors_are_one_line_exit_two(args: list[str], needle: str) -> None:
    line = assert_one_error_line(runner.invoke(app, args), 2, needle)
    assert "--help" in line  # says where to look


def test_no_arguments_prints_help() -> None:
    result = runner.invoke(app, [])
    assert "score" in result.stdout and "Traceback" not in result.output


# ------------------------------------------------------------------------------------ Rich markup


@pytest.mark.parametrize(
    "message",
    [
        "pip install 'pairedge[train]'",
        "expected [x1, y1, x2, y2], got [1, 2]",
        "label [/x] and [bold]b[/bold]",
        "trailing backslash \\",
    ],
)
def test_error_messages_print_intact(message: str) -> None:
    demo = typer.Typer()

    @demo.command()
    @handle_errors
    def boom() -> None:
        raise InputError(message)

    assert_one_error_line(runner.invoke(demo, []), 1, message)


def test_markup_in_paths_and_data_prints_intact(tmp_path: Path) -> None:
    names = ["[/x]", "pairedge[train]", "[bold]b"]
    gold = _jsonl(
        tmp_path / "gold.jsonl",
        [
            {"labels": names},
            {
                "frame": 1,
                "interactions": [
                    {"ids": [1, 2], "label": "[/x]"},
                    {"ids": [3, 4], "label": "pairedge[train]"},
                ],
            },
        ],
    )
    result = runner.invoke(app, ["score", "-p", "pairwise", "--pred", str(gold), "--gold", str(gold)])
    assert result.exit_code == 0, result.output
    for name in names:
        assert name in result.stdout
    # a PCP image named [/x] in the message
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"images": [{"name": "[/x]", "stickmen": [PERSON]}]}))
    gold_pcp = tmp_path / "gold.json"
    gold_pcp.write_text(json.dumps({"images": [{"name": "a", "stickmen": [PERSON]}]}))
    args = ["score", "-p", "pcp", "--pred", str(pred), "--gold", str(gold_pcp)]
    assert_one_error_line(runner.invoke(app, args), 1, "image '[/x]' is not in the ground truth")
    # a video path with markup
    weird = tmp_path / "x[/]y.mp4"
    args = ["run", str(weird), "--detections", str(gold), "--out", str(tmp_path / "o")]
    assert_one_error_line(runner.invoke(app, args), 1, "x[/]y.mp4")


# ------------------------------------------------------------------------------------ the boundary


@pytest.mark.parametrize(
    ("exc", "needle"),
    [
        (PermissionError(13, "Permission denied", "/data/in"), "/data/in: Permission denied"),
        (NotADirectoryError(20, "Not a directory", "/dev/null/x"), "/dev/null/x: Not a directory"),
        (FileNotFoundError(2, "No such file or directory", "/nonexistent/x.json"), "/nonexistent/x.json"),
        (OSError("disk on fire"), "OSError: disk on fire"),
        (ValueError("Out of range float values are not JSON compliant"), "ValueError: Out of range"),
        (OverflowError("int too large to convert to float"), "OverflowError"),
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
        (KeyError("classifier.0.weight"), "KeyError: 'classifier.0.weight'"),
        (TypeError("'int' object is not iterable"), "TypeError"),
        (AttributeError("'list' object has no attribute 'get'"), "AttributeError"),
        (MemoryError(), "out of memory"),
        (json.JSONDecodeError("Expecting value", "x", 0), "JSONDecodeError"),
        (cv2.error("OpenCV(4) error: (-215:Assertion failed)\n in function 'calc'\n"), "Assertion failed"),
    ],
)
def test_any_exception_is_one_line_naming_the_inputs(exc: BaseException, needle: str) -> None:
    demo = typer.Typer()

    @demo.command()
    @handle_errors
    def boom(source: Path = typer.Argument(...)) -> None:
        raise exc

    line = assert_one_error_line(runner.invoke(demo, ["in[1].mp4"]), 1, needle, "source=in[1].mp4")
    assert DEBUG_ENV in line  # says how to get the traceback


def test_debug_reraises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["score", "-p", "pcp", "--pred", str(tmp_path), "--gold", str(tmp_path)]
    assert_one_error_line(runner.invoke(app, args), 1, "not a regular file")
    result = runner.invoke(app, ["--debug", *args])
    assert isinstance(result.exception, FormatError)
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert isinstance(runner.invoke(app, args).exception, FormatError)


def test_unwritable_json_and_out_paths(tmp_path: Path) -> None:
    gold = _jsonl(tmp_path / "gold.jsonl", GOLD)
    base = ["score", "-p", "pairwise", "--pred", str(gold), "--gold", str(gold)]
    bad = "/nonexistent/dir/x.json"
    assert_one_error_line(runner.invoke(app, [*base, "--json", bad]), 1, f"--json {bad}: cannot write")
    assert_one_error_line(
        runner.invoke(app, ["simulate", "--frames", "1", "--out", "/dev/null/x"]), 1, "/dev/null/x"
    )


def test_json_report_is_written_before_printing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pairedge.apps.cli.score as score_cli

    def broken_terminal(report: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(score_cli, "print_report", broken_terminal)
    gold, out = _jsonl(tmp_path / "gold.jsonl", GOLD), tmp_path / "r.json"
    args = ["score", "-p", "pairwise", "--pred", str(gold), "--gold", str(gold), "--json", str(out)]
    assert_one_error_line(runner.invoke(app, args), 1, "Input/output error")
    assert json.loads(out.read_text())["summary"]["accuracy"] == 1.0


def test_a_folder_as_input_file(tmp_path: Path) -> None:
    for protocol in ("pairwise", "pcp", "par"):
        args = [
            "score",
            "-p",
            protocol,
            "--pred",
            str(tmp_path),
            "--gold",
            str(tmp_path),
            "--labels",
            "paper3",
        ]
        if protocol != "pairwise":
            args = args[:-2]
        assert_one_error_line(runner.invoke(app, args), 1, str(tmp_path), "not a regular file")


# ------------------------------------------------------------------------------------ readers: range, depth


def _par_line(**person: Any) -> dict[str, Any]:
    return {"frame": 1, "persons": [{"id": 1, **(person or {"actions": [0]})}], "global": [0]}


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        ({"frame": 10**30, "persons": []}, "int64"),
        ({"frame": 1, "persons": [{"id": 10**30}]}, "int64"),
        ({"frame": 1, "persons": [{"id": 1}], "groups": [{"members": [1, 10**19]}]}, "person ids"),
        (_par_line(action_scores=[10**400] + [0] * 26), "float64 range"),
        (_par_line(action_scores=[float("inf")] + [0] * 26), "holds inf; expected finite"),
    ],
)
def test_par_numbers_beyond_range(tmp_path: Path, record: dict[str, Any], needle: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(FormatError, match=needle) as info:
        read_par(path)
    assert "record line 1" in str(info.value)


def test_pairwise_probs_and_pcp_coordinates_beyond_float_range(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "p.jsonl",
        [{"frame": 1, "interactions": [{"ids": [1, 2], "label": "walking_together", "probs": [10**400, 0]}]}],
    )
    with pytest.raises(FormatError, match=r"line 1, interactions\[0\]: probs: .*float64 range"):
        read_pairwise_file(path, ("walking_together", "standing_together"))
    sticks = tmp_path / "s.json"
    sticks.write_text(
        json.dumps({"images": [{"name": "a", "stickmen": [[[10**400, 0, 1, 1]] + PERSON[1:]]}]})
    )
    with pytest.raises(FormatError, match=r"images\[0\]: stickmen\[0\]\[0\]: .* beyond the float64 range"):
        read_stickmen_json(sticks)
    text = tmp_path / "s.txt"
    text.write_text("1e400 0 1 1\n" + "\n".join(" ".join(map(str, s)) for s in PERSON[1:]) + "\n")
    with pytest.raises(FormatError, match="record line 1: expected 4 finite coordinates"):
        read_stickmen_images(text)


def test_jrdb_boxes_and_ids_beyond_range(tmp_path: Path) -> None:
    def frame(person: dict[str, Any]) -> Path:
        path = tmp_path / "j.json"
        path.write_text(
            json.dumps(
                {"labels": {"000001.jpg": [{"label_id": "pedestrian:1", "box": [1, 2, 3, 4], **person}]}}
            )
        )
        return path

    with pytest.raises(FormatError, match="float32 range"):
        read_jrdb(frame({"box": [1, 2, 1e300, 4]}))
    with pytest.raises(FormatError, match="float32 range"):
        read_jrdb(frame({"box": [10**400, 2, 3, 4]}))
    with pytest.raises(FormatError, match="id < 10"):
        read_jrdb(frame({"label_id": "pedestrian:" + "9" * 30}))
    with pytest.raises(FormatError, match="cluster_ID"):
        read_jrdb(frame({"social_group": {"cluster_ID": 1e300}}))
    with pytest.raises(FormatError, match="numeric level"):
        read_jrdb(frame({"action_label": {"walking": 10**400}}))


def test_cvml_values_beyond_range(tmp_path: Path) -> None:
    from pairedge.core.io.cvml import read_cvml

    def xml(frame: str, oid: str, w: str) -> Path:
        path = tmp_path / "c.xml"
        path.write_text(
            f'<dataset><frame number="{frame}"><objectlist><object id="{oid}">'
            f'<box xc="10" yc="10" w="{w}" h="5"/></object></objectlist></frame></dataset>'
        )
        return path

    with pytest.raises(FormatError, match="int64"):
        read_cvml(xml("1" + "0" * 25, "1", "5"))
    with pytest.raises(FormatError, match="int64"):
        read_cvml(xml("1", "9" * 5000, "5"))
    with pytest.raises(FormatError, match="float32 range"):
        read_cvml(xml("1", "1", "1e300"))


@pytest.mark.parametrize("reader", ["pairwise", "par", "stickmen_json", "jrdb"])
def test_deep_and_huge_json_is_a_format_error(tmp_path: Path, reader: str) -> None:
    read = {
        "pairwise": lambda p: read_pairwise_file(p, ("a", "b")),
        "par": read_par,
        "stickmen_json": read_stickmen_json,
        "jrdb": read_jrdb,
    }[reader]
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(FormatError, match="nested too deeply"):
        read(path)
    path.write_text('{"frame": ' + "9" * 5000 + "}\n")
    with pytest.raises(FormatError, match="invalid JSON value"):
        read(path)


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text("\ufeff" + "".join(json.dumps(r) + "\n" for r in GOLD), encoding="utf-8")
    assert len(read_pairwise_file(path, ("walking_together", "standing_together")).pairs.frame) == 1
    par = tmp_path / "par.jsonl"
    par.write_text("\ufeff" + json.dumps(_par_line()) + "\n", encoding="utf-8")
    assert read_par(par)[0].frame == 1


def test_csv_unterminated_quote_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text('frame,id_a,id_b,label\n1,1,2,walking_together\n2,1,2,"walking_together\n')
    with pytest.raises(FormatError, match=r"p.csv, record line 3: malformed CSV"):
        read_pairwise_file(path, ("walking_together",))


# ------------------------------------------------------------------------------------ empty inputs


def test_empty_ground_truth_is_an_error_in_every_protocol(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    header_only = _jsonl(tmp_path / "header.jsonl", GOLD[:1])
    no_pairs = _jsonl(tmp_path / "nopairs.jsonl", [GOLD[0], {"frame": 1, "interactions": []}])
    for gold, needle in (
        (empty, "no frame to score"),
        (header_only, "no frame to score"),
        (no_pairs, "no interacting pair and no group"),
    ):
        args = ["score", "-p", "pairwise", "--pred", str(gold), "--gold", str(gold)]
        args += ["--labels", "walking_together,standing_together"] if gold is empty else []
        assert_one_error_line(runner.invoke(app, args), 1, str(gold), needle)
    nobody = _jsonl(tmp_path / "nobody.jsonl", [{"frame": 1, "persons": [], "global": [0]}])
    for gold, needle in ((empty, "no frame to score"), (nobody, "no person in any of its 1 frames")):
        args = ["score", "-p", "par", "--pred", str(gold), "--gold", str(gold)]
        assert_one_error_line(runner.invoke(app, args), 1, str(gold), needle)
    sticks = tmp_path / "empty.txt"
    sticks.write_text("")
    for mode in ("loose", "strict"):
        args = ["score", "-p", "pcp", "--pred", str(sticks), "--gold", str(sticks), "--mode", mode]
        assert_one_error_line(runner.invoke(app, args), 1, str(sticks), "no ground-truth stickman")


def test_empty_prediction_is_scored_with_a_note(tmp_path: Path) -> None:
    gold = _jsonl(tmp_path / "gold.jsonl", GOLD)
    pred = tmp_path / "pred.jsonl"
    pred.write_text("")
    result = runner.invoke(app, ["score", "-p", "pairwise", "--pred", str(pred), "--gold", str(gold)])
    assert result.exit_code == 0, result.output
    assert "holds no predicted pair or group" in result.stdout


# ------------------------------------------------------------------------------------ other commands


def test_export_of_garbage_checkpoints_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    junk = tmp_path / "t.pth"
    junk.write_text("hello\n")
    args = ["export", str(junk), "--paper-stage1", "--out", str(tmp_path / "x.onnx")]
    assert_one_error_line(runner.invoke(app, args), 1, str(junk))
    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "model.json").write_text("[]")
    (folder / "model.pt").write_text("x")
    args = ["export", str(folder), "--out", str(tmp_path / "y.onnx")]
    assert_one_error_line(runner.invoke(app, args), 1, "model.json")


def test_run_with_infinite_fps_is_one_line(tmp_path: Path) -> None:
    from pairedge.measure.sim.output import write_scene

    scene = write_scene("static", 0, 3, tmp_path / "scene")
    video, mot = Path(scene.out) / scene.video, Path(scene.out) / "gt" / "gt.txt"
    args = ["run", str(video), "-d", str(mot), "--fps", "inf", "--no-video", "--out", str(tmp_path / "o")]
    assert_one_error_line(runner.invoke(app, args), 2, "--fps")  # a usage error: --fps is bounded


def test_cad_annotations_values_beyond_range(tmp_path: Path) -> None:
    from pairedge.core.io.cad import read_cad_annotations

    path = tmp_path / "annotations.txt"
    for line in ("1\t10\t20\t30\t60\t9223372036854775808\t1\n", "1\t10\t1e300\t30\t60\t2\t1\n"):
        path.write_text(line)
        with pytest.raises(FormatError, match="record line 1: expected frame, action, pose within int64"):
            read_cad_annotations(path)
