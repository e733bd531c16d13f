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

from dataclasses import dataclass, field
from pathlib import Path

from pairedge.core.artefacts import check_precision
from pairedge.core.bundled import BUNDLED_NAME, describe_model, resolve_model_dir
from pairedge.core.errors import InputError
from pairedge.runtime.backends.registry import canonical_backend_name
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


@dataclass(frozen=True)
class Deployment:
    """A model folder at one precision on one classifier backend and one flow backend.

    Attributes:
        model: the model folder (``stage1.onnx`` + ``stage2.onnx`` and the calibrated variants), or
            ``"default"`` for the bundled model (None is stored as ``"default"``).
        precision: "fp32", "fp16" or "int8": which files of the folder run
            (:data:`pairedge.core.artefacts.PRECISIONS`).
        backend: classifier backend: "auto" or a registry name; an alias (``ort-cpu``, ``trt``, ...) is
            stored as the registry name it stands for.
        flow: flow backend: "auto" (the one the model's feature spec was defined with), "none" (box-only
            features) or a registered name ("dis", "farneback", "reference", "cuda").
        folder: the model folder ``model`` names (the bundled model's for ``"default"``), resolved once.

    Raises:
        InputError: an unknown precision, classifier backend or flow backend.
        ModelError: ``"default"`` while the bundled model is not installed.
    """

    model: str | Path | None = BUNDLED_NAME
    precision: str = "fp32"
    backend: str = "auto"
    flow: str = "auto"
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
            config: the pipeline options; None for the defaults. With ``flow="auto"``,
                ``config.flow.backend`` names the flow backend when it is not "auto" itself.

        Raises:
            ModelError, BackendError, InputError: as :meth:`Pipeline.load`.
        """
        return Pipeline.load(self.folder, self.backend, self.flow, config, precision=self.precision)
