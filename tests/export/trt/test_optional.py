"""TensorRT, cuda-python and pycuda are imported through the one helper, ``pairedge.core.optional.require``.

Each module is made unimportable with ``sys.modules[name] = None`` (``import`` then raises ImportError), so
these tests run the same with or without the GPU packages installed.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
from pairedge.core.errors import MissingDependencyError, PairedgeError
from pairedge.core.optional import install_hint, require

TRT_EXTRA = "pip install '.[tensorrt]' in the pairedge folder"
GPU_EXTRA = "pip install '.[gpu]' in the pairedge folder"
CUDA_PYTHON = ("cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.bindings.runtime", "cuda.cudart")


def _block(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def _fake_tensorrt(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.Builder = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    return trt


def _assert_tensorrt_hint(message: str) -> None:
    assert TRT_EXTRA in message
    assert "JetPack" in message and "nvidia-jetpack" in message and "not on PyPI" in message
    assert "pip install tensorrt" not in message  # the extra, not the bare wheel
    assert "\n" not in message


# -- the helper ---------------------------------------------------------------------------------------------
def test_install_hint_names_the_extra_and_the_platform_note() -> None:
    assert install_hint("scipy.io") == "pip install '.[data]' in the pairedge folder"
    assert install_hint("tensorrt").startswith(TRT_EXTRA + "; on a Jetson")
    assert install_hint("tensorrt", note="") == TRT_EXTRA
    assert install_hint("pycuda.driver").startswith(GPU_EXTRA) and "JetPack" in install_hint("pycuda.driver")
    assert install_hint("cuda.bindings.runtime").startswith(GPU_EXTRA)
    assert install_hint("somepkg.sub") == "pip install somepkg"
    assert (
        install_hint("somepkg", extra="dev", note="a note")
        == "pip install '.[dev]' in the pairedge folder; a note"
    )


def test_require_message_forms() -> None:
    with pytest.raises(MissingDependencyError) as info:
        require("pairedge_missing_mod", extra="data", purpose="reading things")
    assert str(info.value).startswith(
        "pairedge_missing_mod is required for reading things but is not installed ("
    )
    assert str(info.value).endswith("; install it with: pip install '.[data]' in the pairedge folder")
    with pytest.raises(MissingDependencyError) as info:
        require("pairedge_missing_mod", name="Missing", note="on a robot: ask")
    assert str(info.value).startswith("Missing is not installed (")
    assert str(info.value).endswith("; install it with: pip install pairedge_missing_mod; on a robot: ask")
    assert isinstance(info.value, ImportError) and isinstance(info.value, PairedgeError)


# -- tensorrt -----------------------------------------------------------------------------------------------
def test_load_tensorrt_missing_names_the_extra_and_jetpack(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.gpu.tensorrt import INSTALL_HINT, load_tensorrt

    _block(monkeypatch, "tensorrt")
    with pytest.raises(MissingDependencyError) as info:
        load_tensorrt()
    message = str(info.value)
    assert message.startswith("TensorRT is not installed (")
    _assert_tensorrt_hint(message)
    assert INSTALL_HINT in message
    assert isinstance(info.value.__cause__, ImportError)


def test_load_tensorrt_stubs_only_names_the_extra_and_jetpack(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.gpu.tensorrt import load_tensorrt

    stubs = types.ModuleType("tensorrt")
    # a namespace package, no Builder
    stubs.__path__ = ["/site-packages/tensorrt"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tensorrt", stubs)
    with pytest.raises(MissingDependencyError, match="stubs only") as info:
        load_tensorrt()
    assert "/site-packages/tensorrt" in str(info.value)
    _assert_tensorrt_hint(str(info.value))


def test_load_tensorrt_returns_the_module(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.gpu.tensorrt import load_tensorrt

    trt = _fake_tensorrt(monkeypatch)
    assert load_tensorrt() is trt


def test_backend_reason_without_tensorrt(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.runtime.backends.tensorrt import TensorRTBackend

    _block(monkeypatch, "tensorrt")
    reason = TensorRTBackend.unavailable_reason()
    assert reason is not None and reason.startswith("TensorRT is not installed")
    _assert_tensorrt_hint(reason)


def test_cli_build_error_names_the_extra(monkeypatch: pytest.MonkeyPatch, model_dir: Path) -> None:
    pytest.importorskip("onnx")
    from pairedge.apps.cli.app import app
    from typer.testing import CliRunner

    _block(monkeypatch, "tensorrt")
    result = CliRunner().invoke(app, ["build", str(model_dir), "--precision", "fp32"])
    assert result.exit_code == 1
    (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "TensorRT is not installed" in line
    _assert_tensorrt_hint(line)  # Rich printed the [tensorrt] literally (escaped), on one line


# -- cuda-python / pycuda -----------------------------------------------------------------------------------
@pytest.mark.parametrize("blocked", ["pycuda", "pycuda.driver"])
def test_pycuda_memory_missing_names_the_gpu_extra(monkeypatch: pytest.MonkeyPatch, blocked: str) -> None:
    from pairedge.gpu.cuda.pycuda_device import PyCudaDevice

    _block(monkeypatch, blocked)
    with pytest.raises(MissingDependencyError) as info:
        PyCudaDevice(0)
    message = str(info.value)
    assert message.startswith("pycuda.driver is required for the pycuda CUDA layer but is not installed")
    assert GPU_EXTRA in message and "JetPack" in message and "\n" not in message


@pytest.mark.parametrize("blocked", ["pycuda", "pycuda.driver"])
def test_backend_reason_without_cuda_python_or_pycuda(monkeypatch: pytest.MonkeyPatch, blocked: str) -> None:
    from pairedge.runtime.backends.tensorrt import TensorRTBackend

    _fake_tensorrt(monkeypatch)
    _block(monkeypatch, *CUDA_PYTHON, blocked)
    reason = TensorRTBackend.unavailable_reason()
    assert reason is not None and reason.startswith("neither cuda-python nor pycuda is installed")
    assert GPU_EXTRA in reason and "JetPack" in reason


def test_backend_available_with_tensorrt_and_pycuda_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.runtime.backends.tensorrt import TensorRTBackend

    _fake_tensorrt(monkeypatch)
    _block(monkeypatch, *CUDA_PYTHON)
    pycuda = types.ModuleType("pycuda")
    pycuda.__path__ = []  # type: ignore[attr-defined]
    driver = types.ModuleType("pycuda.driver")
    pycuda.driver = driver  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    assert TensorRTBackend.unavailable_reason() is None


# -- the runtime stays torch-free ---------------------------------------------------------------------------
def test_runtime_tensorrt_paths_never_import_torch() -> None:
    code = (
        "import sys\n"
        "for name in ('tensorrt', 'pycuda', 'pycuda.driver', 'cuda'):\n"
        "    sys.modules[name] = None\n"
        "import pairedge.runtime\n"
        "from pairedge.runtime.backends import available_backends\n"
        "from pairedge.runtime.backends.tensorrt import TensorRTBackend\n"
        "reason = TensorRTBackend.unavailable_reason()\n"
        "assert reason and \"'.[tensorrt]'\" in reason, reason\n"
        "available_backends()\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False", "the TensorRT backend's import checks pulled in torch"
