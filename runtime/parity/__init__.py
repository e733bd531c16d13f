"""The on-device evaluator: a portable parity pack made on the workstation, checked on the robot.

>>> from pairedge.runtime.parity import check_pack
>>> report = check_pack("pack.npz", "model_dir", CheckOptions(precision="int8"))
>>> report.passed, report.verdict()

:mod:`~pairedge.runtime.parity.pack` (file format), :mod:`~pairedge.runtime.parity.build` (``parity pack``),
:mod:`~pairedge.runtime.parity.check` (``parity check``), :mod:`~pairedge.runtime.parity.levels` (the four
levels and their tolerances), :mod:`~pairedge.runtime.parity.report` (JSON and Markdown). No torch.

The replay is exact: the pack carries the reference's per-frame decisions (box shape ignored or not, the
operating point's thresholds) and, for a clip cut from the middle of a stream, the stream state at its
start (:mod:`pairedge.runtime.streamstate`), so fp32 checked against itself drifts by exactly zero.
"""

from pairedge.runtime.parity.check import CheckOptions, check_pack
from pairedge.runtime.parity.levels import LevelResult, Tolerances
from pairedge.runtime.parity.pack import PACK_FORMAT, PACK_VERSION, PairRows, ParityPack, load_pack, save_pack
from pairedge.runtime.parity.report import ParityReport

__all__ = [
    "PACK_FORMAT",
    "PACK_VERSION",
    "CheckOptions",
    "LevelResult",
    "PairRows",
    "ParityPack",
    "ParityReport",
    "Tolerances",
    "check_pack",
    "load_pack",
    "save_pack",
]
