"""Bounded access to rosbag2 storage: what is checked before rosbags opens a log, and how messages are read.

Before rosbags sees a log (:func:`check_log`): every file of it must be a regular file (a FIFO would block,
``/dev/zero`` never ends; :func:`pairedge.core.limits.regular_file`), ``metadata.yaml`` at most
:data:`~pairedge.core.limits.MAX_SIDECAR_BYTES`, every MCAP file's record framing within the ceilings
(:func:`pairedge.core.io.ros.mcap.walk_mcap`), and a log whose files are zstd-compressed whole is refused
(rosbags would inflate each into a temporary file of any size before reading a byte).

While reading (:func:`read_messages`): a sqlite3 message is measured with ``length(data)`` in SQL and read
only when it is at most :data:`~pairedge.core.limits.MAX_MESSAGE_BYTES`; a per-message-compressed message is
inflated with a bound; an oversize message comes out as a :class:`RawMessage` without data and with the
reason, so the caller drops and counts it and the log goes on. A storage error in the middle of a log (a
corrupt sqlite page, a chunk whose checksum fails) ends it with one
:class:`~pairedge.core.errors.FormatError`.

The rosbags internals used here (``Reader.storage``, ``DirectoryReader.storages``, the sqlite3 storage's
``dbconn``) are those of rosbags 0.10 / 0.11; this is the one module that knows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from pairedge.core import limits
from pairedge.core.errors import FormatError
from pairedge.core.io.ros.mcap import inflate, walk_mcap
from pairedge.core.io.textio import printable

STORAGE_OF_SUFFIX = {".mcap": "mcap", ".db3": "sqlite3"}


@dataclass(frozen=True, slots=True)
class RawMessage:
    """One message of a log: its connection, log time (ns) and CDR bytes, or ``data=None`` and why."""

    connection: Any
    log_time: int
    data: bytes | memoryview | None
    problem: str | None = None


def check_log(path: Path, *, verify_inflation: bool = False) -> None:
    """Refuse a log (rosbag2 folder or bare ``.mcap`` / ``.db3``) that rosbags could not read in bounded
    time and memory; see the module docstring.

    Raises:
        FormatError: naming the file and the problem.
    """
    if path.is_dir():
        info = _metadata(path / "metadata.yaml")
        if info["compression_mode"] == "file":
            raise FormatError(
                path,
                "its storage files are zstd-compressed whole (compression_mode: file), which pairedge does "
                "not inflate (no size is declared); convert it to an uncompressed or chunk-compressed log "
                "first (ros2 bag convert)",
            )
        for name in info["files"]:
            _check_file(path / PurePath(name).name, info["storage"], verify_inflation)
        return
    storage = STORAGE_OF_SUFFIX.get(path.suffix.lower())
    if storage is None:
        raise FormatError(path, "expected a rosbag2 folder (with metadata.yaml) or an .mcap / .db3 file")
    _check_file(path, storage, verify_inflation)


def _check_file(path: Path, storage: str, verify_inflation: bool) -> None:
    size = limits.regular_file(path, f"a rosbag2 {storage} storage file")
    if storage == "mcap":
        walk_mcap(path, size, verify_inflation=verify_inflation)


def _metadata(path: Path) -> dict[str, Any]:
    """The storage, file names and compression mode of a ``metadata.yaml`` (bounded; never a FIFO)."""
    from ruamel.yaml import YAML

    text = limits.read_text(path, "a rosbag2 metadata.yaml", limits.MAX_SIDECAR_BYTES)
    try:
        info = YAML(typ="safe").load(text)["rosbag2_bagfile_information"]
        files = [str(name) for name in info["relative_file_paths"]]
        storage = str(info["storage_identifier"])
        mode = str(info.get("compression_mode", "") or "").lower()
    except Exception as exc:  # YAML errors, missing keys, wrong types: rosbags would refuse it too
        raise FormatError(
            path, f"not a rosbag2 metadata file ({type(exc).__name__}: {printable(exc)})"
        ) from None
    if storage not in ("mcap", "sqlite3"):
        raise FormatError(path, f"storage '{printable(storage)}'; expected mcap or sqlite3")
    return {"files": files, "storage": storage, "compression_mode": mode}


def read_messages(reader: Any, connections: Iterable[Any] | None = None) -> Iterator[RawMessage]:
    """Every message of ``connections`` (None: all) of an open rosbags reader, in each storage file's order.

    Raises:
        FormatError: the storage failed in the middle of the log (the messages before it were yielded).
    """
    wanted = list(connections) if connections is not None else list(reader.connections)
    count = 0
    try:
        for storage, connmap, compressed in _sources(reader, wanted):
            for message in _storage_messages(storage, connmap):
                if compressed and message.data is not None:
                    message = _inflate_message(message)
                count += 1
                yield message
    except FormatError as exc:  # bounded chunk inflation inside rosbags, or a message ceiling
        raise FormatError(
            printable(reader.path), f"unreadable after {count} messages: {exc.problem}"
        ) from None
    except Exception as exc:  # rosbags' ReaderError, apsw's CorruptError, zstd / lz4 errors, struct errors
        raise FormatError(
            reader.path, f"unreadable after {count} messages ({type(exc).__name__}: {printable(exc)})"
        ) from None


def _sources(reader: Any, wanted: list[Any]) -> list[tuple[Any, dict[int, Any], bool]]:
    """``(storage, storage connection id -> reader connection, per-message compressed)`` per file."""
    top = reader.storage
    subs = getattr(top, "storages", None)
    if subs is None:  # a bare .mcap / .db3: the storage's connections are the reader's
        return [(top, {c.id: c for c in wanted}, False)]
    compressed = getattr(top.metadata, "compression_mode", None) == "message"
    sources = []
    for sub in subs:
        connmap = {}
        for own in sub.connections:  # the same matching as rosbags' DirectoryReader.messages
            match = next(
                (
                    c
                    for c in wanted
                    if c.topic == own.topic
                    and c.msgtype == own.msgtype
                    and c.ext == own.ext
                    and (not own.digest or not c.digest or own.digest == c.digest)
                ),
                None,
            )
            if match is not None:
                connmap[own.id] = match
        sources.append((sub, connmap, compressed))
    return sources


def _storage_messages(storage: Any, connmap: dict[int, Any]) -> Iterator[RawMessage]:
    own = [c for c in storage.connections if c.id in connmap]
    if not own:
        return
    if getattr(storage, "dbconn", None) is not None:
        yield from _sqlite_messages(storage.dbconn, own, connmap)
        return
    for conn, log_time, data in storage.messages(own):
        reader_conn = connmap[conn.id]
        if len(data) > limits.MAX_MESSAGE_BYTES:
            yield RawMessage(reader_conn, log_time, None, oversize(reader_conn.topic))
        else:
            yield RawMessage(reader_conn, log_time, data)


def _sqlite_messages(db: Any, own: list[Any], connmap: dict[int, Any]) -> Iterator[RawMessage]:
    """rosbags' sqlite3 query, with each message measured before its bytes are read."""
    marks = ",".join("?" for _ in own)
    query = (
        "SELECT topics.id, messages.timestamp, CASE WHEN length(messages.data) <= ? THEN messages.data END "
        "FROM messages JOIN topics ON messages.topic_id = topics.id "
        f"WHERE topics.id IN ({marks}) ORDER BY messages.timestamp"
    )
    for cid, log_time, data in db.execute(query, [limits.MAX_MESSAGE_BYTES, *(c.id for c in own)]):
        conn = connmap[cid]
        if data is None:
            yield RawMessage(conn, int(log_time), None, oversize(conn.topic))
        else:
            yield RawMessage(conn, int(log_time), data)


def _inflate_message(message: RawMessage) -> RawMessage:
    """A per-message zstd-compressed message inflated to at most the message ceiling."""
    assert message.data is not None
    topic = printable(message.connection.topic)
    try:
        data = inflate(bytes(message.data), "zstd", limits.MAX_MESSAGE_BYTES)
    except FormatError:
        return RawMessage(message.connection, message.log_time, None, oversize(message.connection.topic))
    except Exception as exc:  # a corrupt zstd frame: this message only
        return RawMessage(
            message.connection,
            message.log_time,
            None,
            f"compressed message on {topic} does not inflate ({type(exc).__name__})",
        )
    return RawMessage(message.connection, message.log_time, data)


def oversize(topic: str) -> str:
    """The drop reason of a message above :data:`~pairedge.core.limits.MAX_MESSAGE_BYTES` (not read)."""
    return (
        f"message on {printable(topic)} above the {limits.describe_size(limits.MAX_MESSAGE_BYTES)} ceiling "
        "(pairedge.core.limits.MAX_MESSAGE_BYTES), not read"
    )
