"""What a robot deploys, as one value: a model folder at a precision on a classifier backend with a flow
backend.

``pairedge run``, ``eval``, ``bench``, ``parity check``, the ROS node and the demo each build one
:class:`Deployment` from their options and hand it down, instead of passing the model, the precision and the
two backend names side by side through every function. Each field is checked once, when the value is made,
with the one-line :class:`~pairedge.core.errors.InputError` the command prints (the model folder's files are
checked by :meth:`Deployment.load`, which reads them).

>>> from pairedge.runtime import Deployment
>>> with Deployment("my_model/", precision="int8", backend="ort-cuda").load() as pipe:
...     result = pipe.step(frame_bgr, detections, timestamp)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from pairedge.core.artefacts import DEFAULT_PRECISION, PRECISIONS, check_precision
from pairedge.core.bundled import BUNDLED_NAME, describe_model, resolve_model_dir
from pairedge.core.errors import InputError
from pairedge.core.settings import setting
from pairedge.runtime.backends.registry import ALIASES, BACKENDS, canonical_backend_name
from pairedge.runtime.backends.tensorrt import TensorRTOptions
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.flow.registry import FLOW_BACKENDS
from pairedge.runtime.pipeline import Pipeline

#: Flow names that are no registered backend: the model's own flow backend, and no flow (box-only).
FLOW_CHOICES: tuple[str, ...] = ("auto", "none")


def check_flow_name(flow: object) -> str:
    """``flow`` when it is "auto", "none" or a registered flow backend
    (:data:`pairedge.runtime.flow.registry.FLOW_BACKENDS`).

    Raises:
        InputError: naming the accepted names.
    """
    if not isinstance(flow, str) or (flow not in FLOW_CHOICES and flow not in FLOW_BACKENDS):
        raise InputError(
            f"unknown flow backend {flow!r}; expected one of {sorted(FLOW_BACKENDS)}, 'auto' or 'none'"
        )
    return flow


def _flow_names() -> tuple[str, ...]:
    return (*FLOW_CHOICES, *FLOW_BACKENDS)


@dataclass(frozen=True)
class Deployment:
    """A model folder at one precision on one classifier backend and one flow backend.

    Attributes:
        model, precision, backend, flow, dla_core: settings (their help below); an alias of a backend
            (``ort-cpu``, ``trt``, ...) is stored as the registry name it stands for, None for ``model`` as
            ``"default"``.
        folder: the model folder ``model`` names (the bundled model's for ``"default"``), resolved once.

    Raises:
        InputError: an unknown precision, classifier backend or flow backend; a DLA core without the
            tensorrt backend.
        ModelError: ``"default"`` while the bundled model is not installed.
    """

    model: str | Path | None = field(
        default=BUNDLED_NAME,
        metadata=setting(
            "Model folder (stage1.onnx + stage2.onnx and the variants pairedge calibrate wrote); "
            "'default': the bundled model.",
            kind=Path,
            ros=True,
        ),
    )
    precision: str = field(
        default=DEFAULT_PRECISION,
        metadata=setting(
            "Model files to run: fp32, fp16 or int8 (from pairedge calibrate; with backend tensorrt, the "
            "engines pairedge build made from them).",
            choices=PRECISIONS,
            ros=True,
        ),
    )
    backend: str = field(
        default="auto",
        metadata=setting(
            "Classifier backend: auto (onnxruntime-cuda when ONNX Runtime has CUDA, else onnxruntime), "
            + ", ".join(BACKENDS)
            + " or an alias ("
            + ", ".join(f"{a} = {n}" for a, n in ALIASES.items())
            + ").",
            ros=True,
        ),
    )
    flow: str = field(
        default="auto",
        metadata=setting(
            "Optical flow backend: auto (the one the model's features were defined with), none (box-only "
            "features), dis, farneback, reference (the CPU twin of cuda) or cuda (NVIDIA GPU, fused "
            "pooling).",
            choices=_flow_names,
            ros=True,
        ),
    )
    dla_core: int | None = field(
        default=None,
        metadata=setting(
            "With backend tensorrt: run the classifiers on this Jetson DLA core, with the engines pairedge "
            "build --dla-core N made (engines/<tag>-dla<N>/); default: the GPU.",
            low=0,
        ),
    )
    folder: Path = field(init=False, compare=False)

    def __post_init__(self) -> None:
        model = BUNDLED_NAME if self.model is None else self.model
        if not isinstance(model, str | Path):
            raise InputError(f"model: expected a model folder or {BUNDLED_NAME!r}, got {model!r}")
        if not isinstance(self.precision, str):
            raise InputError(f"precision: expected a name such as 'fp32', got {self.precision!r}")
        # frozen: the checked (and canonical) values are set through object.__setattr__, once, here
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "precision", check_precision(self.precision))
        object.__setattr__(self, "backend", canonical_backend_name(self.backend))
        object.__setattr__(self, "flow", check_flow_name(self.flow))
        core = self.dla_core
        if core is not None:
            if isinstance(core, bool) or not isinstance(core, int) or core < 0:
                raise InputError(f"dla_core: expected a DLA core index >= 0 or None (the GPU), got {core!r}")
            if self.backend != "tensorrt":
                raise InputError(
                    f"dla_core: needs backend tensorrt (the engines pairedge build --dla-core N made), got "
                    f"backend {self.backend}"
                )
        object.__setattr__(self, "folder", resolve_model_dir(model))

    def describe(self) -> str:
        """One line for run notes and terminals: the model folder (the bundled model by name), the precision
        and the two backends as asked for ("auto" stays "auto"; the pipeline's ``describe()`` says what
        ran)."""
        return (
            f"{describe_model(self.folder)}, precision {self.precision}, classifier backend {self.backend}, "
            f"flow {self.flow}"
        )

    def load(self, config: PipelineConfig | None = None) -> Pipeline:
        """Open the pipeline of this deployment (:meth:`Pipeline.load`: the folder's files are found and
        verified, the classifier sessions and the flow backend opened).

        Args:
            config: the pipeline options; None for the defaults.

        Raises:
            ModelError, BackendError, InputError: as :meth:`Pipeline.load`; a ``config.backend_options`` of
                the tensorrt backend that names another precision or DLA core than this deployment.
        """
        return Pipeline.load(
            self.folder, self.backend, self.flow, self.config(config), precision=self.precision
        )

    def config(self, config: PipelineConfig | None = None) -> PipelineConfig:
        """``config`` with what this deployment decides handed down: its DLA core as the tensorrt backend's
        option (the pipeline hands the precision of the files it opens to that backend itself).

        Raises:
            InputError: ``config.backend_options`` of the tensorrt backend naming another DLA core.
        """
        config = config if config is not None else PipelineConfig()
        given = config.backend_options
        if self.dla_core is None or not isinstance(given, TensorRTOptions | None):
            return config  # another backend's options: the backend refuses them with its own message
        options = given or TensorRTOptions()
        if options.dla_core is not None and options.dla_core != self.dla_core:
            raise InputError(
                f"backend_options.dla_core: {options.dla_core!r} contradicts the deployment's dla_core "
                f"{self.dla_core!r}"
            )
        return replace(config, backend_options=replace(options, dla_core=self.dla_core))
