"""The Jetson install (README "Deploying to a Jetson", docs/jetson.md, install/jetson/*.txt) is consistent
and does what it says.

Consistency: every file the steps name exists, every ``pairedge`` command and flag exists in the CLI,
every extra exists in pyproject.toml, the requirements files are pyproject's dependencies less OpenCV plus
the CUDA major's gpu extra, the constraints agree with them. Behaviour: pip itself resolves the files
against local fake wheels (no network) whose numpy / OpenCV requirements are those of the real releases
(as published on 2026-12-01) over a fake "system" site folder: numpy stays 1.x, no pip OpenCV comes in,
and pip OpenCV / numpy 2 / pairedge with its dependencies are refused once the constraints are set the way
the steps set them (``pip config --site set install.constraint``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from install_docs import (
    EXTRAS,
    GPU_EXTRA,
    JETSON,
    OPENCV,
    PYPROJECT,
    ROOT,
    all_commands,
    bash_blocks,
    command_of,
    commands,
    docs_text,
    read_reqs,
    readme_section,
)
from packaging.requirements import Requirement
from packaging.version import Version


# -- the steps name only what exists ----------------------------------------------------------------------
def test_never_a_pypi_install_of_pairedge() -> None:
    for text in (readme_section(), docs_text()):
        assert not re.search(r"pip install\s+['\"]?pairedge\b", text)


def test_every_repository_path_named_exists() -> None:
    named = set()
    for text in (readme_section(), docs_text()):
        named |= set(
            re.findall(r"(?<![\w/.])((?:install|docker|docs|tests|benchmarks)/[\w.*/-]+[\w*])", text)
        )
    assert {
        "install/jetson/constraints-jp6.txt",
        "install/jetson/requirements-jp7.txt",
        "docker/Dockerfile.jetson",
    } <= named
    missing = [p for p in sorted(named) if not list(ROOT.glob(p))]
    assert missing == []


def test_every_pairedge_command_and_flag_exists() -> None:
    seen = 0
    for argv in all_commands():
        if argv[0] != "pairedge":
            continue
        cmd, words = command_of(argv)
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        flags = [w.split("=")[0] for w in words if w.startswith("--")]
        assert set(flags) <= opts, f"{' '.join(argv)}: {set(flags) - opts} not options of pairedge {cmd.name}"
        seen += 1
    assert seen >= 10


def test_pip_steps_name_existing_files_and_extras() -> None:
    pip_lines = [argv for argv in all_commands() if argv[:1] == ["pip"]]
    files = [argv[argv.index(flag) + 1] for argv in pip_lines for flag in ("-r", "-c") if flag in argv]
    files += [argv[-1] for argv in pip_lines if argv[1:4] == ["config", "--site", "set"]]
    files = [f.replace("$PWD/", "") for f in files]
    assert files and all((ROOT / f).is_file() for f in files), files
    for argv in pip_lines:
        for word in argv:
            if m := re.fullmatch(r"\.\[([\w,-]+)\]", word):
                assert set(m.group(1).split(",")) <= set(EXTRAS), word


def test_readme_and_docs_use_the_same_steps() -> None:
    """The README block's install lines are docs/jetson.md's JetPack 6 block, in the same order."""

    def install_lines(text: str) -> list[list[str]]:
        keep = ("python3", "pip", "git", "sudo")
        return [argv for argv in commands(bash_blocks(text)[0]) if argv[0] in keep]

    assert install_lines(readme_section()) == install_lines(docs_text())
    jp7 = [argv for b in bash_blocks(docs_text()) for argv in commands(b) if any("jp7" in w for w in argv)]
    assert len(jp7) == 2 and all("jp6" not in w for argv in jp7 for w in argv)


# -- the files agree with pyproject.toml --------------------------------------------------------------------
@pytest.mark.parametrize("jetpack", ["jp6", "jp7"])
def test_requirements_are_pyproject_less_opencv_plus_the_gpu_extra(jetpack: str) -> None:
    want = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]] + [
        Requirement(r) for r in EXTRAS[GPU_EXTRA[jetpack]]
    ]
    want_map = {r.name: str(r.specifier) for r in want if r.name not in OPENCV}
    got = {name: str(r.specifier) for name, r in read_reqs(JETSON / f"requirements-{jetpack}.txt").items()}
    assert got == want_map


@pytest.mark.parametrize(("jetpack", "cuda"), [("jp6", "12"), ("jp7", "13")])
def test_constraints_forbid_opencv_pin_numpy_1_and_agree_with_the_requirements(
    jetpack: str, cuda: str
) -> None:
    cons = read_reqs(JETSON / f"constraints-{jetpack}.txt")
    reqs = read_reqs(JETSON / f"requirements-{jetpack}.txt")
    for name in OPENCV:
        assert str(cons[name].specifier) == "<0" and name not in reqs
        assert not any(
            cons[name].specifier.contains(v, prereleases=True) for v in ("0", "0.0.1", "4.8.0.76", "5.0.0.93")
        )
    (numpy,) = cons["numpy"].specifier
    assert numpy.operator == "==" and Version(numpy.version).major == 1
    assert reqs["numpy"].specifier.contains(numpy.version)
    assert cons["cuda-python"].specifier == reqs["cuda-python"].specifier
    assert reqs["cuda-python"].specifier.contains(f"{cuda}.9") and not reqs["cuda-python"].specifier.contains(
        f"{int(cuda) + 1}.0"
    )
    nvrtc = "nvidia-cuda-nvrtc-cu12" if cuda == "12" else "nvidia-cuda-nvrtc"
    (pin,) = cons[nvrtc].specifier
    jetpack_cuda = {"jp6": "12.6", "jp7": "13.0"}[jetpack]
    assert pin.operator == "==" and pin.version == f"{jetpack_cuda}.*"
    assert reqs[nvrtc].specifier.contains(f"{jetpack_cuda}.0")
    for name, req in cons.items():  # every pin leaves a version the requirements accept
        if name in reqs and name not in ("numpy",):
            probe = {"onnx": "1.18.0", "cuda-python": f"{cuda}.9.0", nvrtc: f"{jetpack_cuda}.1"}[name]
            assert req.specifier.contains(probe) and reqs[name].specifier.contains(probe), name


# -- pip does what the steps say
# ------------------------------------------------------------------------------
#: (name, version, requires) of the fake index: the numpy / OpenCV / CUDA requirements of the real releases
INDEX = [
    ("numpy", "1.21.5", []),
    ("numpy", "1.26.4", []),
    ("numpy", "2.2.6", []),
    ("opencv-contrib-python-headless", "4.10.0.84", ["numpy>=1.21.2"]),
    ("opencv-python-headless", "4.10.0.84", ["numpy>=1.21.2"]),
    ("onnx", "1.18.0", ["numpy>=1.22"]),
    ("onnx", "1.23.2", ["numpy>=1.23.2"]),
    ("onnxruntime", "1.23.2", ["numpy>=1.21.6"]),
    ("typer", "0.29.1", []),
    ("rich", "15.0.0", []),
    ("cuda-python", "12.9.10", ["cuda-bindings~=12.9.10"]),
    ("cuda-bindings", "12.9.10", []),
    ("cuda-python", "13.4.4", ["cuda-bindings~=13.4.4", "cuda-core"]),
    ("cuda-bindings", "13.4.4", []),
    ("cuda-core", "1.2.2", ["numpy"]),
    ("nvidia-cuda-nvrtc-cu12", "12.6.85", []),
    ("nvidia-cuda-nvrtc-cu12", "12.9.86", []),
    ("nvidia-cuda-nvrtc", "13.0.88", []),
    ("nvidia-cuda-nvrtc", "13.5.37", []),
    ("pairedge", "0.1.0", [r for r in PYPROJECT["project"]["dependencies"]]),
]


def _metadata(name: str, version: str, requires: list[str]) -> str:
    return "".join(
        [
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            *(f"Requires-Dist: {r}\n" for r in requires),
        ]
    )


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> None:
    stem = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{stem}.dist-info/METADATA", _metadata(name, version, requires))
        zf.writestr(
            f"{stem}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{stem}.dist-info/RECORD", "")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    for name, version, requires in INDEX:
        _wheel(folder, name, version, requires)
    return folder


def _env(home: Path) -> dict[str, str]:
    """This process's environment without pip settings and with an empty home: no config file of the
    machine's (global, user) can add an index, find-links or a constraint."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CONFIG_DIRS=str(home / "xdg"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


class Venv:
    """A venv without pip whose "system" site folder (a .pth entry outside the venv, as JetPack's
    dist-packages are for a ``--system-site-packages`` venv) holds numpy ``system_numpy`` with pip metadata
    and a cv2 package without (JetPack's OpenCV has none); pip runs in it through ``pip --python``."""

    def __init__(self, root: Path, system_numpy: str) -> None:
        self.root = root
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=60
        )
        system = root / "system"
        (system / f"numpy-{system_numpy}.dist-info").mkdir(parents=True)
        (system / f"numpy-{system_numpy}.dist-info" / "METADATA").write_text(
            _metadata("numpy", system_numpy, [])
        )
        (system / "cv2").mkdir()
        (system / "cv2" / "__init__.py").write_text("__version__ = '4.8.0'\n")
        site = next((root / "venv" / "lib").glob("python3*/site-packages"))
        (site / "zz_system.pth").write_text(f"{system}\n")
        self.python = root / "venv" / "bin" / "python"

    def pip(self, *args: str, index: Path) -> subprocess.CompletedProcess[str]:
        base = [sys.executable, "-m", "pip", "--python", str(self.python)]
        if args[0] == "install":
            args = (
                *args,
                "--no-index",
                "--find-links",
                str(index),
                "--dry-run",
                "--quiet",
                "--report",
                str(self.root / "report.json"),
            )
        return subprocess.run(
            [*base, *args], capture_output=True, text=True, timeout=120, env=_env(self.root), cwd=ROOT
        )

    def would_install(self, *args: str, index: Path) -> dict[str, str]:
        done = self.pip("install", *args, index=index)
        assert done.returncode == 0, done.stderr
        report = json.loads((self.root / "report.json").read_text())
        return {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]}

    def set_constraints(self, jetpack: str) -> None:
        """The step of the docs, verbatim: ``pip config --site set install.constraint "$PWD/..."``."""
        path = JETSON / f"constraints-{jetpack}.txt"
        done = self.pip("config", "--site", "set", "install.constraint", str(path), index=Path())
        assert done.returncode == 0, done.stderr
        assert str(path) in (self.root / "venv" / "pip.conf").read_text()


pip_required = pytest.mark.skipif(
    subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0,
    reason="pip is not installed in this environment",
)


@pip_required
@pytest.mark.slow
def test_jetpack6_venv_gets_numpy_1_26_onnx_1_18_nvrtc_12_6_and_no_opencv(
    tmp_path: Path, index: Path
) -> None:
    env = Venv(tmp_path, system_numpy="1.21.5")
    plain = env.would_install("-r", str(JETSON / "requirements-jp6.txt"), index=index)
    assert plain["numpy"].startswith("2.") and plain["onnx"] == "1.23.2"  # what the constraints prevent
    env.set_constraints("jp6")
    got = env.would_install("-r", str(JETSON / "requirements-jp6.txt"), index=index)
    assert got["numpy"] == "1.26.4" and got["onnx"] == "1.18.0"
    assert got["nvidia-cuda-nvrtc-cu12"] == "12.6.85" and got["cuda-python"] == "12.9.10"
    assert not set(got) & set(OPENCV)


@pip_required
@pytest.mark.slow
def test_jetpack7_venv_keeps_the_system_numpy(tmp_path: Path, index: Path) -> None:
    env = Venv(tmp_path, system_numpy="1.26.4")
    assert env.would_install("numpy>=2", index=index)["numpy"].startswith(
        "2."
    )  # what the constraints prevent
    env.set_constraints("jp7")
    got = env.would_install("-r", str(JETSON / "requirements-jp7.txt"), index=index)
    assert "numpy" not in got and got["cuda-core"] == "1.2.2"
    assert got["nvidia-cuda-nvrtc"] == "13.0.88" and got["cuda-python"] == "13.4.4"
    assert not set(got) & set(OPENCV)


@pip_required
@pytest.mark.slow
@pytest.mark.parametrize("jetpack", ["jp6", "jp7"])
def test_constraints_refuse_pip_opencv_numpy_2_and_pairedge_with_its_dependencies(
    tmp_path: Path, index: Path, jetpack: str
) -> None:
    env = Venv(tmp_path, system_numpy="1.21.5" if jetpack == "jp6" else "1.26.4")
    assert (
        env.pip("install", "opencv-contrib-python-headless", index=index).returncode == 0
    )  # allowed without
    env.set_constraints(jetpack)
    for spec in ("opencv-contrib-python-headless", "opencv-python-headless", "numpy>=2", "pairedge"):
        done = env.pip("install", spec, index=index)
        assert done.returncode != 0 and "ResolutionImpossible" in done.stderr + done.stdout, spec
    assert env.would_install("--no-deps", "pairedge", index=index) == {"pairedge": "0.1.0"}
