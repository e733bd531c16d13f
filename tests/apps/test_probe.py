"""The Jetson rows of ``pairedge doctor`` on a fake file system (a temp folder as root) and fake commands:
L4T / JetPack, power mode, clocks, where OpenCV / numpy come from, rosbags and ray. Absent = not a Jetson;
a command that hangs, fails or is missing gives a row that says so."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pairedge.apps import probe as pj

ORIN_RELEASE = (
    "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8\n"
)
NVPMODEL_OUT = "NV Power Mode: MAXN\n0\n"


class FakeRunner:
    """Answers ``dpkg-query`` and ``nvpmodel`` like a Jetson; records every call and its keyword arguments."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, argv: list[str], **kw: Any) -> SimpleNamespace:
        self.calls.append((argv, kw))
        answer = self.answers.get(argv[0])
        if isinstance(answer, BaseException):
            raise answer
        if answer is None:
            raise FileNotFoundError(argv[0])
        code, out, err = answer
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture()
def orin(tmp_path: Path) -> Path:
    """An Orin's files: L4T 36.4.3, 6 cores (two clocks), the GPU's devfreq under bus@0."""
    write(tmp_path, "etc/nv_tegra_release", ORIN_RELEASE)
    for k, khz in enumerate([729600, 729600, 1510400, 1510400, 1984000, 1984000]):
        write(tmp_path, f"sys/devices/system/cpu/cpu{k}/cpufreq/scaling_cur_freq", f"{khz}\n")
    write(tmp_path, "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu/cur_freq", "612000000\n")
    return tmp_path


def jetson_runner() -> FakeRunner:
    return FakeRunner({"dpkg-query": (0, "6.2+b77", ""), "nvpmodel": (0, NVPMODEL_OUT, "")})


def rows(root: Path, runner: FakeRunner) -> dict[str, pj.Check]:
    return {c.name: c for c in pj.jetson_checks(root, runner)}


def test_an_orin_gives_l4t_jetpack_power_mode_and_clocks(orin: Path) -> None:
    runner = jetson_runner()
    found = rows(orin, runner)
    assert found["Jetson L4T / JetPack"] == pj.Check("Jetson L4T / JetPack", True, "L4T 36.4.3, JetPack 6.2")
    assert found["Jetson power mode"] == pj.Check("Jetson power mode", True, "MAXN (mode 0)")
    assert found["clocks"] == pj.Check("clocks", True, "CPU 6 cores 730-1984 MHz, GPU 612 MHz")
    # never sudo, always bounded, never raising on a non-zero exit
    assert [argv for argv, _ in runner.calls] == [
        ["dpkg-query", "-W", "-f=${Version}", "nvidia-jetpack"],
        ["nvpmodel", "-q"],
    ]
    for _, kw in runner.calls:
        assert kw["timeout"] == pj.TIMEOUT_S and kw["check"] is False and kw["capture_output"] is True


def test_no_release_file_means_not_a_jetson_and_nothing_is_run(tmp_path: Path) -> None:
    runner = jetson_runner()
    found = rows(tmp_path, runner)
    for name in ("Jetson L4T / JetPack", "Jetson power mode"):
        assert found[name] == pj.Check(name, False, "not a Jetson (no /etc/nv_tegra_release)")
    assert found["clocks"] == pj.Check("clocks", False, "CPU clock not readable")
    assert runner.calls == []


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (None, "dpkg-query not found"),
        (
            (1, "", "dpkg-query: no packages found matching nvidia-jetpack\n"),
            "dpkg-query -W -f=${Version} nvidia-jetpack exited 1: dpkg-query: no packages found matching "
            "nvidia-jetpack",
        ),
        (subprocess.TimeoutExpired("dpkg-query", 5), "dpkg-query took more than 5 s"),
    ],
)
def test_jetpack_meta_package_missing_keeps_the_l4t_version(orin: Path, answer: Any, why: str) -> None:
    runner = FakeRunner({"dpkg-query": answer, "nvpmodel": (0, NVPMODEL_OUT, "")})
    check = rows(orin, runner)["Jetson L4T / JetPack"]
    assert check == pj.Check(
        "Jetson L4T / JetPack", True, f"L4T 36.4.3, JetPack meta-package not found ({why})"
    )


def test_power_mode_when_nvpmodel_is_missing_hangs_or_prints_nonsense(orin: Path) -> None:
    def mode(answer: Any) -> pj.Check:
        return rows(orin, FakeRunner({"dpkg-query": (0, "6.2", ""), "nvpmodel": answer}))["Jetson power mode"]

    assert mode(None) == pj.Check("Jetson power mode", False, "nvpmodel not found")
    assert mode(subprocess.TimeoutExpired("nvpmodel", 5)).detail == "nvpmodel took more than 5 s"
    assert mode(PermissionError(13, "denied")).detail.startswith("nvpmodel does not run (")
    assert mode((0, "something else\n", "")) == pj.Check(
        "Jetson power mode", False, "nvpmodel -q printed no power mode: 'something else'"
    )
    assert mode((0, "NV Power Mode: 15W\n", "")) == pj.Check("Jetson power mode", True, "15W")


def test_unreadable_or_odd_release_file(tmp_path: Path) -> None:
    write(tmp_path, "etc/nv_tegra_release", "garbage\n")
    check = rows(tmp_path, jetson_runner())["Jetson L4T / JetPack"]
    assert not check.ok and check.detail.startswith("L4T release file not understood: 'garbage'")
    (tmp_path / "etc/nv_tegra_release").unlink()
    os.mkfifo(
        tmp_path / "etc/nv_tegra_release"
    )  # never opened: the bounded reader refuses a FIFO by its type
    start = time.monotonic()
    check = rows(tmp_path, jetson_runner())["Jetson L4T / JetPack"]
    assert time.monotonic() - start < 5 and check == pj.Check("Jetson L4T / JetPack", False, pj.NOT_A_JETSON)


def test_a_huge_sysfs_file_is_not_read_whole(orin: Path) -> None:
    write(orin, "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1" * (pj.SMALL_FILE_BYTES + 1))
    assert rows(orin, jetson_runner())["clocks"].detail == "CPU 5 cores 730-1984 MHz, GPU 612 MHz"


def test_gpu_clock_on_other_jetsons_and_unreadable_gpu_clock(orin: Path) -> None:
    gpu = orin / "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu/cur_freq"
    gpu.unlink()
    assert (
        rows(orin, jetson_runner())["clocks"].detail == "CPU 6 cores 730-1984 MHz, GPU devfreq not readable"
    )
    write(orin, "sys/class/devfreq/17000000.ga10b/cur_freq", "306000000\n")
    assert rows(orin, jetson_runner())["clocks"].detail.endswith("GPU 306 MHz")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (ORIN_RELEASE, "36.4.3"),
        ("# R38 (release), REVISION: 2.0, GCID", "38.2.0"),
        ("# R35 (release), REVISION: 4", "35.4"),
        ("R36 (beta)", None),
    ],
)
def test_parse_tegra_release(text: str, want: str | None) -> None:
    assert pj.parse_tegra_release(text) == want


def test_optional_packages_from_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {"rosbags": "0.11.9"}

    def version(name: str) -> str:
        if name not in versions:
            raise pj.md.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(pj.md, "version", version)
    assert pj.package_check("rosbags", "ros", "reading ROS 2 bags") == pj.Check("rosbags", True, "0.11.9")
    assert pj.package_check("ray", "fleet", "pairedge eval --executor ray") == pj.Check(
        "ray", False, "not installed (pairedge eval --executor ray: pip install -e '.[fleet]' in the clone)"
    )


def test_pip_opencv_on_a_jetson_is_a_problem_and_system_opencv_is_fine(
    orin: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = {"opencv-contrib-python-headless": "4.10.0.84"}

    def version(name: str) -> str:
        if name not in installed:
            raise pj.md.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(pj.md, "version", version)
    check = pj.opencv_origin_check(orin)
    assert not check.ok and "pip opencv-contrib-python-headless 4.10.0.84" in check.detail
    assert "pip uninstall -y opencv-contrib-python-headless" in check.detail
    assert pj.opencv_origin_check(
        tmp_path_factory.mktemp("x86")
    ).ok  # off a Jetson pip's OpenCV is the normal one
    installed.clear()  # JetPack's cv2 has no pip metadata
    check = pj.opencv_origin_check(orin)
    assert check.ok and check.detail.startswith("system build, no pip package (")


def test_numpy_2_on_a_jetson_is_a_problem(orin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pj, "_dist_version", lambda name: "2.1.0" if name == "numpy" else None)
    check = pj.numpy_origin_check(orin)
    assert not check.ok and check.detail.startswith("2.1.0 (") and "numpy 1.x" in check.detail
    monkeypatch.setattr(pj, "_dist_version", lambda name: "1.26.4" if name == "numpy" else None)
    assert pj.numpy_origin_check(orin).ok


def test_real_probe_has_the_rows_and_never_raises() -> None:
    """On this machine (whatever it is): every row present, in order, each a (bool, str)."""
    names = [c.name for c in pj.jetson_checks()]
    assert names == [
        "Jetson L4T / JetPack",
        "Jetson power mode",
        "clocks",
        "OpenCV build",
        "numpy build",
        "rosbags",
        "ray",
        "trackers",
    ]


def test_trackers_row_names_the_two_step_install(monkeypatch) -> None:
    """The library trackers go in without their dependencies: the row says both commands when missing."""
    monkeypatch.setattr(pj, "_dist_version", lambda name: None)
    row = [c for c in pj.jetson_checks(Path("/nonexistent-root")) if c.name == "trackers"][0]
    assert (
        not row.ok
        and "pip install -e '.[trackers]' && pip install --no-deps 'trackers>=2.6,<2.7'" in row.detail
    )
    monkeypatch.setattr(pj, "_dist_version", lambda name: "2.6.1")
    assert pj.package_check("trackers", "trackers", "x", "y") == pj.Check("trackers", True, "2.6.1")
