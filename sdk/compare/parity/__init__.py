"""The on-device evaluator: a portable parity pack made on the workstation, checked on the robot.

>>> from pairedge.compare.parity import check_pack
>>> report = check_pack("pack.npz", Deployment("model_dir", precision="int8"))
>>> report.passed, report.verdict()

:mod:`~pairedge.compare.parity.pack` (file format), :mod:`~pairedge.compare.parity.build` (``parity pack``),
:mod:`~pairedge.compare.parity.check` (``parity check``), :mod:`~pairedge.compare.parity.levels` (the four
levels and their tolerances), :mod:`~pairedge.compare.parity.verdict` (JSON and Markdown). No torch.

The replay is exact: the pack carries the reference's per-frame decisions (box shape ignored or not, the
operating point's thresholds) and, for a clip cut from the middle of a stream, the stream state at its
start (:mod:`pairedge.runtime.streamstate`), so fp32 checked against itself drifts by exactly zero.
"""

from pairedge.compare.parity.check import CheckOptions, check_pack
from pairedge.compare.parity.levels import LevelResult, Tolerances
from pairedge.compare.parity.pack import PACK_FORMAT, PACK_VERSION, PairRows, ParityPack, load_pack, save_pack
from pairedge.compare.parity.verdict import ParityReport

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
