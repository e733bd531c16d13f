"""``--out-bag``: a copy of the input log plus pairedge's topics, written aside and moved into place whole.

The output's storage follows its name: ``*.mcap`` is one MCAP file, ``*.db3`` one sqlite3 file, any other
name a rosbag2 folder in the input's storage (:func:`plan_out_bag`, checked before any work). The copy is
written into a temporary sibling folder (``.pairedge-bag-*`` beside the target) and moved to the target
only when the run succeeds; on any failure the temporary folder is removed, so no partial bag is left.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.core.errors import InputError
from pairedge.core.io.ros.msgdefs import MARKER_ARRAY, STRING
from pairedge.core.io.ros.storage import STORAGE_OF_SUFFIX
from pairedge.core.io.textio import printable
from pairedge.core.optional import require

RESULTS_TOPIC = "/pairedge/interactions"
MARKERS_TOPIC = "/pairedge/markers"


@dataclass(frozen=True)
class OutBag:
    """Where and how to write the copy: ``target`` path, ``storage`` ("mcap" / "sqlite3"), ``bare``: one
    storage file (``.mcap`` / ``.db3``) rather than a rosbag2 folder."""

    target: Path
    storage: str
    bare: bool


def log_storage(log: Path) -> str:
    """The storage of a log (folder or bare file): "mcap" or "sqlite3"."""
    if log.is_dir():
        return "mcap" if any(log.glob("*.mcap")) else "sqlite3"
    return STORAGE_OF_SUFFIX.get(log.suffix.lower(), "sqlite3")


def plan_out_bag(out_bag: str | Path, log: Path) -> OutBag:
    """Check ``--out-bag`` before any work: a new path whose parent is (or can be) a folder.

    Raises:
        InputError: the path exists, or its parent is a file.
    """
    target = Path(out_bag).expanduser()
    if target.exists() or target.is_symlink():
        raise InputError(
            f"--out-bag: {printable(target)} exists; choose a new path (bags are never overwritten)"
        )
    parent = next((p for p in target.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InputError(f"--out-bag: {printable(parent)} is a file, not a folder; choose another path")
    storage = STORAGE_OF_SUFFIX.get(target.suffix.lower())
    return OutBag(target, storage or log_storage(log), storage is not None)


class BagCopy:
    """Copies every message of the input log into the planned output and adds pairedge's two topics.

    A context manager; with ``plan=None`` it does nothing (``active`` is False).
    """

    def __init__(self, reader: Any, store: Any, plan: OutBag | None) -> None:
        self.reader, self.store, self.plan = reader, store, plan
        self.active = plan is not None
        self._writer: Any = None
        self._conns: dict[int, Any] = {}
        self._results: Any = None
        self._markers: Any = None
        self._tmp: Path | None = None
        self._made: list[Path] = []  # parent folders this copy created (removed again on failure)

    def __enter__(self) -> BagCopy:
        if self.plan is None:
            return self
        rosbag2 = require("rosbags.rosbag2", extra="ros", purpose="writing ROS 2 logs")
        plugin = rosbag2.StoragePlugin.MCAP if self.plan.storage == "mcap" else rosbag2.StoragePlugin.SQLITE3
        self._made = [p for p in reversed(self.plan.target.parents) if not p.exists()]
        self.plan.target.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(prefix=".pairedge-bag-", dir=self.plan.target.parent))
        try:
            writer = rosbag2.Writer(self._tmp / "bag", version=9, storage_plugin=plugin)
            writer.open()
            self._writer = writer
            for conn in self.reader.connections:
                msgdef, digest = getattr(conn.msgdef, "data", ""), conn.digest
                known = (
                    {"msgdef": msgdef, "rihs01": digest} if msgdef and digest else {"typestore": self.store}
                )
                self._conns[conn.id] = writer.add_connection(
                    conn.topic,
                    conn.msgtype,
                    serialization_format=conn.ext.serialization_format,
                    offered_qos_profiles=conn.ext.offered_qos_profiles,
                    **known,
                )
            self._results = writer.add_connection(RESULTS_TOPIC, STRING, typestore=self.store)
            self._markers = writer.add_connection(MARKERS_TOPIC, MARKER_ARRAY, typestore=self.store)
        except BaseException as exc:  # __exit__ does not run when __enter__ fails: close and remove here
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def write_raw(self, conn: Any, log_time: int, raw: Any) -> None:
        """Copy one input message (its CDR bytes) at its log time."""
        if self._writer is not None:
            self._writer.write(self._conns[conn.id], log_time, raw)

    def write_outputs(self, output: Any, log_time: int) -> None:
        """Write a frame's result String and MarkerArray at ``log_time``."""
        if self._writer is not None:
            self._writer.write(self._results, log_time, self.store.serialize_cdr(output.string, STRING))
            self._writer.write(
                self._markers, log_time, self.store.serialize_cdr(output.markers, MARKER_ARRAY)
            )

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._tmp is None:
            return
        tmp, self._tmp = self._tmp, None
        try:
            if self._writer is not None:
                writer, self._writer = self._writer, None
                writer.close()
            if exc_type is None:
                self._move_into_place(tmp / "bag")
                self._made = []
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            for folder in reversed(self._made):  # deepest first; a folder someone filled meanwhile stays
                try:
                    folder.rmdir()
                except OSError:
                    break

    def _move_into_place(self, folder: Path) -> None:
        """The finished copy to the target; refused if something appeared there meanwhile."""
        assert self.plan is not None
        target = self.plan.target
        source = folder
        if self.plan.bare:
            (source,) = [p for p in folder.iterdir() if p.suffix.lower() in STORAGE_OF_SUFFIX]
        if target.exists() or target.is_symlink():
            raise InputError(
                f"--out-bag: {printable(target)} appeared while the run wrote the copy; nothing "
                "was overwritten"
            )
        os.rename(source, target)
