"""Hostile inputs through the command line: every one ends in seconds, well under 1 GB, with one line.

Builds the inputs of issue 22 (hardening, third round) in a temporary folder — files that claim far more
than they hold, non-regular files, huge counts on the command line — and runs the ``pairedge`` command a
user would type on each, in a fresh process. For each case it records the exit code, the wall time, the
peak resident memory of that process (``wait4``'s ``ru_maxrss``), the number of stderr lines and the first
one. A case passes when the exit code is the expected one, stderr is at most one line, the command took
less than ``--max-seconds`` (default 20) and less than ``--max-mib`` (default 1024) of resident memory.
Each process runs under a 4 GiB address-space limit, so a regression fails its case instead of exhausting
the machine.

The ceilings come from :mod:`pairedge.core.limits` (documented in ``docs/formats.md#ceilings``).

Writes ``benchmarks/results/bench_hostile.json`` and ``.md``::

    python benchmarks/bench_hostile.py                 # every case, about a minute
    python benchmarks/bench_hostile.py --cases mot     # the cases whose name contains "mot"
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import RESULTS, write

MiB = 1 << 20
GiB = 1 << 30


@dataclass
class Case:
    """One hostile input and the command run on it."""

    name: str
    what: str
    build: Callable[[Path], list[str]]  # builds the input under a folder, returns the pairedge arguments
    exit_code: int = 1  # what a correct pairedge returns


@dataclass
class Outcome:
    name: str
    what: str
    command: str
    exit_code: int
    expected_exit: int
    seconds: float
    peak_mib: float
    stderr_lines: int
    first_line: str
    passed: bool


#: Address-space limit of each case's process: a regression fails its case (MemoryError) instead of
#: exhausting the machine. Far above the 1 GiB resident target; normal commands run in under 2 GiB of it.
SAFETY_AS_BYTES = 4 * GiB


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (SAFETY_AS_BYTES, SAFETY_AS_BYTES))


def run_measured(args: list[str], cwd: Path, timeout: float) -> tuple[int, float, float, str]:
    """Run ``pairedge ARGS`` in ``cwd``: (exit code, seconds, peak RSS MiB, stderr); killed after
    ``timeout``."""
    env = {**os.environ, "COLUMNS": "80", "PAIREDGE_DEBUG": "0"}
    cmd = [sys.executable, "-m", "pairedge.apps.cli", *args]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, env=env, preexec_fn=_limit_memory
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    return proc.returncode, seconds, usage.ru_maxrss / 1024, stderr


# -- inputs
# ---------------------------------------------------------------------------------------------------


def tiny_video(folder: Path, frames: int = 6) -> Path:
    """A 64 x 48 MJPG video."""
    path = folder / "tiny.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 30, (64, 48))
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    return path


def tiny_mot(folder: Path, frames: int = 6) -> Path:
    path = folder / "det.txt"
    rows = [f"{k},{i},{5 + 20 * i},10,12,30,1" for k in range(1, frames + 1) for i in (1, 2)]
    path.write_text("\n".join(rows) + "\n")
    return path


def one_line_mot(mib: int) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        path = folder / "big.txt"
        block = b"1," * (MiB // 2)
        with open(path, "wb") as fh:
            for _ in range(mib):
                fh.write(block)
        return ["run", str(tiny_video(folder)), "--detections", str(path), "--no-video", "--out", "out"]

    return build


def png_declaring(width: int, height: int) -> bytes:
    """A PNG of a few hundred kB that decodes to ``width`` x ``height`` gray pixels (all zero)."""
    ok, buf = cv2.imencode(".png", np.zeros((height, width), np.uint8), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    assert ok
    return buf.tobytes()


def image_folder_bomb(first: bool) -> Callable[[Path], list[str]]:
    def build(folder: Path) -> list[str]:
        images = folder / "frames"
        images.mkdir()
        rng = np.random.default_rng(0)
        for k in range(5):
            cv2.imwrite(str(images / f"{k:04d}.png"), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
        (images / ("0000.png" if first else "0002.png")).write_bytes(png_declaring(20_000, 20_000))
        return ["run", str(images), "--detections", str(tiny_mot(folder, 5)), "--no-video", "--out", "out"]

    return build


def mcap_record(op: int, body: bytes) -> bytes:
    return struct.pack("<BQ", op, len(body)) + body


def mcap_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def mcap_zstd_bomb(folder: Path) -> list[str]:
    """An MCAP file of ~100 kB whose one zstd chunk inflates to 3 GiB (and says so in its header)."""
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        from backports import zstd  # type: ignore[import-not-found,no-redef]
    comp = zstd.ZstdCompressor(level=19)
    block = bytes(64 * MiB)
    parts = [comp.compress(block) for _ in range(3 * GiB // len(block))]
    parts.append(comp.flush())
    compressed = b"".join(parts)
    header = mcap_record(0x01, mcap_string("ros2") + mcap_string("bench_hostile"))
    chunk = mcap_record(
        0x06,
        struct.pack("<QQQI", 0, 1, 3 * GiB, 0)
        + mcap_string("zstd")
        + struct.pack("<Q", len(compressed))
        + compressed,
    )
    magic = b"\x89MCAP0\r\n"
    data_end = mcap_record(0x0F, struct.pack("<I", 0))
    footer = mcap_record(0x02, struct.pack("<QQI", 0, 0, 0))
    path = folder / "bomb.mcap"
    path.write_bytes(magic + header + chunk + data_end + footer + magic)
    return ["run", str(path), "--list-topics"]


def compressed_image_bag(folder: Path) -> list[str]:
    """An MCAP log of 6 CompressedImage frames (one a PNG of 20,000 x 20,000 px) with their detections."""
    from pairedge.core.io.ros.messages import build, detections_to_msg, header
    from pairedge.core.io.ros.msgdefs import COMPRESSED_IMAGE, DETECTION_ARRAY, make_typestore
    from pairedge.core.types import Detections
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = make_typestore()
    rng = np.random.default_rng(0)
    bomb = np.frombuffer(png_declaring(20_000, 20_000), np.uint8)
    boxes = np.array([[30, 10, 12, 30], [50, 10, 12, 30]], np.float32)
    dets = Detections(boxes, np.array([1, 2]), np.full(2, 0.9, np.float32))
    path = folder / "log"
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        images = writer.add_connection("/camera/image/compressed", COMPRESSED_IMAGE, typestore=store)
        detections = writer.add_connection("/detections", DETECTION_ARRAY, typestore=store)
        for k in range(6):
            ns = 1_700_000_000_000_000_000 + k * 33_333_333
            if k == 3:
                data, fmt = bomb, "png"
            else:
                ok, buf = cv2.imencode(".jpg", rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
                data, fmt = buf.ravel(), "jpeg"
            msg = build(store, COMPRESSED_IMAGE, header=header(store, ns, "camera"), format=fmt, data=data)
            writer.write(images, ns, store.serialize_cdr(msg, COMPRESSED_IMAGE))
            det_msg = detections_to_msg(store, dets, ns, "camera")
            writer.write(detections, ns + 1_000_000, store.serialize_cdr(det_msg, DETECTION_ARRAY))
    return [
        "run",
        str(path),
        "--image-topic",
        "/camera/image/compressed",
        "--detections-topic",
        "/detections",
        "--no-video",
        "--out",
        "out",
    ]


def dev_zero_onnx(folder: Path) -> list[str]:
    link = folder / "model.onnx"
    link.symlink_to("/dev/zero")
    return ["check", str(link)]


def fifo_onnx(folder: Path) -> list[str]:
    fifo = folder / "model.onnx"
    os.mkfifo(fifo)
    return ["check", str(fifo)]


def doctor_dev_zero(folder: Path) -> list[str]:
    from pairedge.core.bundled import default_model_dir

    model = folder / "model"
    shutil.copytree(default_model_dir(), model)
    (model / "stage1.onnx").unlink()
    (model / "stage1.onnx").symlink_to("/dev/zero")
    return ["doctor", "--model", str(model)]


def npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    """A version 1.0 ``.npy`` header for an array of ``shape`` (what numpy would write)."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text) + pad + 1) + text + b" " * pad + b"\n"


def zip_of_zeros(path: Path, member: str, shape: tuple[int, ...], level: int) -> None:
    """An ``.npz`` whose one member is a float32 array of ``shape``, all zeros, deflated (a zip bomb)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as z:
        with z.open(member, "w", force_zip64=True) as fh:
            fh.write(npy_header(shape))
            block = bytes(64 * MiB)
            for _ in range(int(np.prod(shape)) * 4 // len(block)):
                fh.write(block)


def parity_pack_bomb(folder: Path) -> list[str]:
    """A ~5 MB parity pack whose first array inflates to 2 GiB (a valid .npy header, zeros)."""
    path = folder / "pack.npz"
    zip_of_zeros(path, "stage1.npy", (2 * GiB // (4 * 64), 64), level=9)
    return ["parity", "check", str(path), "default"]


def detections_dev_zero(folder: Path) -> list[str]:
    link = folder / "det.txt"
    link.symlink_to("/dev/zero")
    return ["run", str(tiny_video(folder)), "--detections", str(link), "--no-video", "--out", "out"]


def billion_laughs(folder: Path) -> list[str]:
    """A CVML file of 1 kB whose nested entities expand to gigabytes."""
    entities = ['<!ENTITY lol "lol">'] + [
        f'<!ENTITY lol{k} "{("&lol" + (str(k - 1) if k > 1 else "") + ";") * 10}">' for k in range(1, 10)
    ]
    path = folder / "det.xml"
    path.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE dataset [' + "".join(entities) + "]>\n"
        '<dataset><frame number="0"><objectlist><object id="1"><box xc="10" yc="10" w="5" h="9"/>'
        "<name>&lol9;</name></object></objectlist></frame></dataset>\n"
    )
    return ["run", str(tiny_video(folder)), "--detections", str(path), "--no-video", "--out", "out"]


def features_npz_bomb(folder: Path) -> list[str]:
    """A features .npz of a few MB whose X member inflates to 4.5 GiB."""
    path = folder / "features.npz"
    zip_of_zeros(path, "X.npy", ((4 * GiB + GiB // 2) // (4 * 64), 64), level=1)
    return ["train", "--data", str(path), "--spec", "pairedge", "--stage", "1", "--out", str(folder / "run")]


CASES: tuple[Case, ...] = (
    Case("mot_one_line_60mb", "a MOT file that is one 60 MB line", one_line_mot(60)),
    Case("detections_dev_zero", "a detection file that is a symlink to /dev/zero", detections_dev_zero),
    Case("cvml_billion_laughs", "a 1 kB CVML file whose entities expand to gigabytes", billion_laughs),
    Case(
        "features_npz_bomb", "train --data on a features .npz whose X inflates to 4.5 GiB", features_npz_bomb
    ),
    Case("mot_one_line_200mb", "a MOT file that is one 200 MB line", one_line_mot(200)),
    Case(
        "image_folder_bomb_first",
        "an image folder whose first PNG decodes to 20,000 x 20,000 px",
        image_folder_bomb(True),
    ),
    Case(
        "image_folder_bomb_middle",
        "the same PNG as frame 2 of 5 (dropped; the others are scored)",
        image_folder_bomb(False),
        exit_code=0,
    ),
    Case("mcap_zstd_bomb", "a 100 kB MCAP whose zstd chunk inflates to 3 GiB: --list-topics", mcap_zstd_bomb),
    Case(
        "bag_compressed_image_bomb",
        "an MCAP log with one CompressedImage of 20,000 x 20,000 px among 6",
        compressed_image_bag,
        exit_code=0,
    ),
    Case("check_dev_zero", "pairedge check on a symlink to /dev/zero", dev_zero_onnx),
    Case("check_fifo", "pairedge check on a FIFO", fifo_onnx),
    Case("doctor_dev_zero", "doctor --model with stage1.onnx a symlink to /dev/zero", doctor_dev_zero),
    Case("parity_pack_bomb", "parity check of a 5 MB pack that inflates to 2 GiB", parity_pack_bomb),
    Case(
        "calibrate_scenes_1e8",
        "calibrate --scenes static:0-100000000",
        lambda f: ["calibrate", "default", "--out", str(f / "cal"), "--scenes", "static:0-100000000"],
    ),
    Case(
        "calibrate_frames_1e8",
        "calibrate --frames 100000000",
        lambda f: [
            "calibrate",
            "default",
            "--out",
            str(f / "cal"),
            "--scenes",
            "static:0",
            "--frames",
            "100000000",
        ],
    ),
    Case(
        "eval_seeds_1e8",
        "eval --data sim:static:seeds=0-100000000:frames=2",
        lambda f: [
            "eval",
            "default",
            "--data",
            "sim:static:seeds=0-100000000:frames=2",
            "--out",
            str(f / "ev"),
        ],
    ),
    Case(
        "parity_pack_frames_1e8",
        "parity pack --frames 100000000",
        lambda f: ["parity", "pack", "default", "--out", str(f / "p.npz"), "--frames", "100000000"],
    ),
)


def run_cases(cases: list[Case], max_seconds: float, max_mib: float, timeout: float) -> list[Outcome]:
    out = []
    for case in cases:
        with tempfile.TemporaryDirectory(prefix=f"hostile-{case.name}-") as tmp:
            folder = Path(tmp)
            args = case.build(folder)
            code, seconds, peak, stderr = run_measured(args, folder, timeout)
        lines = [line for line in stderr.splitlines() if line.strip()]
        passed = code == case.exit_code and len(lines) <= 1 and seconds < max_seconds and peak < max_mib
        outcome = Outcome(
            case.name,
            case.what,
            "pairedge " + " ".join(a.replace(str(folder), "DIR") for a in args),
            code,
            case.exit_code,
            round(seconds, 2),
            round(peak, 1),
            len(lines),
            lines[0].replace(str(folder), "DIR")[:300] if lines else "",
            passed,
        )
        print(
            f"{'PASS' if passed else 'FAIL'} {case.name}: exit {code}, {seconds:.1f} s, {peak:.0f} MiB, "
            f"{len(lines)} stderr line(s) {outcome.first_line[:100]!r}",
            flush=True,
        )
        out.append(outcome)
    return out


def markdown(outcomes: list[Outcome], env: dict[str, Any], max_seconds: float, max_mib: float) -> str:
    passed = sum(o.passed for o in outcomes)
    lines = [
        "# Hostile inputs through the command line (`benchmarks/bench_hostile.py`)",
        "",
        f"{passed} of {len(outcomes)} cases pass: the expected exit code, at most one stderr line, under "
        f"{max_seconds:g} s and {max_mib:g} MiB peak resident memory of the `pairedge` process. Machine: "
        f"{env['cpu']}, Python {env['python']}; the ceilings are `pairedge.core.limits` "
        "(docs/formats.md#ceilings).",
        "",
        "| case | exit (expected) | seconds | peak MiB | stderr lines | pass |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.name} | {o.exit_code} ({o.expected_exit}) | {o.seconds:.2f} | {o.peak_mib:.0f} | "
            f"{o.stderr_lines} | {'yes' if o.passed else '**no**'} |"
        )
    lines += ["", "What each case is and what pairedge said:", ""]
    for o in outcomes:
        said = o.first_line.replace("|", "\\|") or "(nothing on stderr)"
        lines.append(f"- **{o.name}**: {o.what}. `{o.command}` -> {said}")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    from pairedge.apps.bench.env import cpu_model

    return {"cpu": cpu_model(), "python": sys.version.split()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="run only cases whose name contains this text")
    parser.add_argument("--max-seconds", type=float, default=20.0)
    parser.add_argument("--max-mib", type=float, default=1024.0)
    parser.add_argument("--timeout", type=float, default=120.0, help="kill a case after this many seconds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.cases in c.name]
    outcomes = run_cases(cases, args.max_seconds, args.max_mib, args.timeout)
    env = environment()
    payload = {
        "environment": env,
        "max_seconds": args.max_seconds,
        "max_mib": args.max_mib,
        "cases": [asdict(o) for o in outcomes],
    }
    if not args.cases:
        write("bench_hostile", payload, markdown(outcomes, env, args.max_seconds, args.max_mib), args.out)
    else:
        print(json.dumps(payload["cases"], indent=1))
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
