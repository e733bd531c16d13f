"""A stand-in for rclpy and the ROS 2 message packages, for testing the pairedge node without ROS.

``install(monkeypatch)`` puts modules named ``rclpy``, ``rclpy.node``, ``rclpy.qos``, ``rcl_interfaces.msg``
and the message packages (``sensor_msgs.msg``, ``std_msgs.msg``, ``vision_msgs.msg``, ...) into
``sys.modules``.

The message classes are generated from the same ``.msg`` definitions ROS 2 uses (rosbags' Humble type store
plus pairedge's vision_msgs 4.x) and check fields as rosidl's generated Python does: unknown constructor
arguments are refused, a ``float64`` takes only a ``float``, an ``int32`` only an ``int`` in range, a
``byte`` only ``bytes`` of length 1, a nested message only an instance of its class, a sequence only a
list / tuple / ``array.array`` (never a numpy array); constants are class attributes (``byte`` ones as bytes).
So a builder that would fail under real rclpy fails here too.

:class:`FakeNode` records what the node declares and creates; parameter overrides come from
:attr:`FakeNode.OVERRIDES` and, like rclpy, an override of another type than the default's is refused.
"""

from __future__ import annotations

import array
import enum
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PACKAGES = (
    "sensor_msgs",
    "std_msgs",
    "vision_msgs",
    "visualization_msgs",
    "geometry_msgs",
    "builtin_interfaces",
    "diagnostic_msgs",
)
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "char": (0, 255),
}
_FLOATS = ("float32", "float64")


class InvalidParameterTypeException(Exception):
    """rclpy.exceptions' error for an override whose type differs from the declared default's."""


class ExternalShutdownException(Exception):
    """rclpy.executors' error that ends ``spin`` when the context is shut down (Ctrl-C on Iron and later)."""


def _check(classes: dict[str, type], typename: str, name: str, desc: Any, value: Any) -> None:
    kind = getattr(desc[0], "name", str(desc[0]))
    rest = desc[1]
    where = f"{typename}.{name}"
    if kind == "BASE":
        base = rest[0]
        if base == "string":
            assert isinstance(value, str), f"The '{where}' field must be of type 'str', got {value!r}"
        elif base == "bool":
            assert isinstance(value, bool), f"The '{where}' field must be of type 'bool', got {value!r}"
        elif base in _FLOATS:
            assert isinstance(value, float), f"The '{where}' field must be of type 'float', got {value!r}"
        elif base in ("byte", "octet"):
            assert isinstance(value, bytes) and len(value) == 1, (
                f"The '{where}' field must be bytes of length 1"
            )
        else:
            low, high = _INT_RANGES[base]
            assert isinstance(value, int) and low <= value <= high, f"The '{where}' field must be an {base}"
        return
    if kind == "NAME":
        assert isinstance(value, classes[rest]), f"The '{where}' field must be a sub message of type '{rest}'"
        return
    sub, count = rest
    if kind == "ARRAY" and getattr(sub[0], "name", "") == "BASE" and sub[1][0] != "string":
        assert isinstance(value, np.ndarray) and value.shape == (count,), (
            f"The '{where}' field: {count} values"
        )
        return
    assert isinstance(value, list | tuple | array.array | bytes), (
        f"The '{where}' field must be a set or sequence, got {type(value).__name__}"
    )
    if kind == "ARRAY":
        assert len(value) == count, f"The '{where}' field must have {count} items"
    if (
        isinstance(value, array.array | bytes)
        and getattr(sub[0], "name", "") == "BASE"
        and sub[1][0] in ("uint8", "char", "octet", "byte")
    ):
        # unsigned bytes by construction ('B' arrays, bytes): an image's data is checked at once, not per byte
        assert isinstance(value, bytes) or value.typecode == "B", (
            f"The '{where}' field must hold unsigned bytes"
        )
        return
    for item in value:
        _check(classes, typename, name, sub, item)


def _default(classes: dict[str, type], desc: Any) -> Any:
    kind = getattr(desc[0], "name", str(desc[0]))
    rest = desc[1]
    if kind == "BASE":
        base = rest[0]
        return {"string": "", "bool": False, "byte": b"\x00", "octet": b"\x00"}.get(
            base, 0.0 if base in _FLOATS else 0
        )
    if kind == "NAME":
        return classes[rest]()
    sub, count = rest
    if kind == "ARRAY" and getattr(sub[0], "name", "") == "BASE" and sub[1][0] != "string":
        return np.zeros(count, np.float64 if sub[1][0] in _FLOATS else np.int64)
    if kind == "ARRAY":
        return [_default(classes, sub) for _ in range(count)]
    if (
        getattr(sub[0], "name", "") == "BASE"
        and sub[1][0] not in ("string", "bool")
        and sub[1][0] not in _FLOATS
    ):
        return array.array("B") if sub[1][0] in ("uint8", "byte", "octet", "char") else array.array("q")
    return []


def message_classes() -> dict[str, type]:
    """Every message type of :data:`PACKAGES` as a strict class, by rosbags type name (``pkg/msg/Type``)."""
    from pairedge.core.io.ros.msgdefs import make_typestore

    store = make_typestore()
    classes: dict[str, type] = {}
    for typename, (consts, fielddefs) in store.fielddefs.items():
        if typename.split("/")[0] not in PACKAGES:
            continue
        classes[typename] = _make_class(classes, typename, consts, fielddefs)
    return classes


def _make_class(classes: dict[str, type], typename: str, consts: Any, fielddefs: Any) -> type:
    names = [n for n, _ in fielddefs]
    descs = dict(fielddefs)

    def __init__(self: Any, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(names)
        assert not unknown, f"Invalid arguments passed to constructor of {typename}: {sorted(unknown)}"
        for n in names:
            setattr(self, n, kwargs[n] if n in kwargs else _default(classes, descs[n]))

    def __setattr__(self: Any, n: str, value: Any) -> None:
        assert n in descs, f"{typename} has no field {n!r}"
        _check(classes, typename, n, descs[n], value)
        object.__setattr__(self, n, value)

    def __eq__(self: Any, other: object) -> bool:
        return type(self) is type(other) and all(_equal(getattr(self, n), getattr(other, n)) for n in names)

    def __repr__(self: Any) -> str:
        return f"{typename.split('/')[-1]}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    attrs: dict[str, Any] = {
        "__slots__": tuple(names),
        "__init__": __init__,
        "__setattr__": __setattr__,
        "__eq__": __eq__,
        "__repr__": __repr__,
        "__hash__": None,
        "_TYPE": typename,
    }
    for cname, ctype, cvalue in consts:
        attrs[cname] = bytes([cvalue]) if ctype in ("byte", "octet") else cvalue
    return type(typename.split("/")[-1], (), attrs)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, list | tuple | array.array) and isinstance(b, list | tuple | array.array):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


class ReliabilityPolicy(enum.Enum):
    RELIABLE = 1
    BEST_EFFORT = 2


class HistoryPolicy(enum.Enum):
    KEEP_LAST = 1
    KEEP_ALL = 2


class DurabilityPolicy(enum.Enum):
    TRANSIENT_LOCAL = 1
    VOLATILE = 2


@dataclass(frozen=True)
class QoSProfile:
    """rclpy.qos.QoSProfile's fields the node sets (keyword-only, as rclpy's)."""

    depth: int
    history: HistoryPolicy = HistoryPolicy.KEEP_LAST
    reliability: ReliabilityPolicy = ReliabilityPolicy.RELIABLE
    durability: DurabilityPolicy = DurabilityPolicy.VOLATILE


@dataclass
class Publisher:
    msg_type: type
    topic: str
    qos: QoSProfile
    published: list[Any] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, msg: Any) -> None:
        assert isinstance(msg, self.msg_type), (
            f"{self.topic}: expected {self.msg_type.__name__}, got {type(msg)}"
        )
        with self.lock:
            self.published.append(msg)
            self.threads.append(threading.current_thread().name)


@dataclass
class Subscription:
    msg_type: Any
    topic: str
    callback: Callable[[Any], None]
    qos: QoSProfile


class FakeNode:
    """The part of ``rclpy.node.Node`` the pairedge node uses; parameters come from :attr:`OVERRIDES`."""

    OVERRIDES: dict[str, Any] = {}

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        self.declared: dict[str, tuple[Any, Any]] = {}  # name -> (default, descriptor)
        self.publishers: list[Publisher] = []
        self.subscriptions: list[Subscription] = []
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.logged: list[tuple[str, str]] = []
        self.destroyed = False

    def declare_parameter(self, name: str, value: Any = None, descriptor: Any = None) -> Any:
        assert name not in self.declared, f"parameter {name!r} declared twice"
        self.declared[name] = (value, descriptor)
        chosen = self.OVERRIDES.get(name, value)
        if type(chosen) is not type(value):
            raise InvalidParameterTypeException(
                f"Trying to set parameter '{name}' to '{chosen!r}' of another type than its default {value!r}"
            )
        return types.SimpleNamespace(name=name, value=chosen)

    def create_publisher(self, msg_type: type, topic: str, qos: QoSProfile) -> Publisher:
        assert isinstance(qos, QoSProfile), "the node passes explicit QoS profiles"
        pub = Publisher(msg_type, topic, qos)
        self.publishers.append(pub)
        return pub

    def create_subscription(
        self, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: QoSProfile
    ) -> Subscription:
        assert isinstance(qos, QoSProfile), "the node passes explicit QoS profiles"
        sub = Subscription(msg_type, topic, callback, qos)
        self.subscriptions.append(sub)
        return sub

    def create_timer(self, period: float, callback: Callable[[], None]) -> Any:
        self.timers.append((period, callback))
        return types.SimpleNamespace(period=period, callback=callback)

    def get_logger(self) -> Any:
        def say(level: str) -> Callable[[str], None]:
            return lambda text: self.logged.append((level, text))

        return types.SimpleNamespace(info=say("info"), warning=say("warning"), error=say("error"))

    def get_clock(self) -> Any:
        return types.SimpleNamespace(now=lambda: types.SimpleNamespace(nanoseconds=time.time_ns()))

    def destroy_node(self) -> None:
        self.destroyed = True

    # --- helpers for tests ---

    def publisher(self, topic: str) -> Publisher:
        return next(p for p in self.publishers if p.topic == topic)

    def subscription(self, topic: str) -> Subscription:
        return next(s for s in self.subscriptions if s.topic == topic)


@dataclass
class FakeRclpy:
    """What :func:`install` put in place: the message classes and the ``rclpy`` module."""

    classes: dict[str, type]
    rclpy: types.ModuleType
    spin: list[Callable[[Any], None]] = field(default_factory=list)
    nodes: list[Any] = field(default_factory=list)
    shutdown: list[bool] = field(default_factory=list)

    def msg(self, name: str) -> type:
        """A message class by ``pkg/Type``."""
        pkg, typ = name.split("/")
        return self.classes[f"{pkg}/msg/{typ}"]


def install(monkeypatch: Any) -> FakeRclpy:
    """Put the fake rclpy and message packages into ``sys.modules`` (undone by ``monkeypatch``)."""
    classes = message_classes()
    modules: dict[str, dict[str, Any]] = {}
    for typename, cls in classes.items():
        pkg, _, name = typename.split("/")
        modules.setdefault(pkg, {})
        modules.setdefault(f"{pkg}.msg", {})[name] = cls
    rclpy_mod = types.ModuleType("rclpy")
    fake = FakeRclpy(classes, rclpy_mod)

    def spin(node: Any) -> None:
        fake.nodes.append(node)
        for script in fake.spin:
            script(node)

    rclpy_mod.__dict__.update(
        init=lambda args=None: None, spin=spin, try_shutdown=lambda: fake.shutdown.append(True)
    )
    qos_mod = {
        "QoSProfile": QoSProfile,
        "ReliabilityPolicy": ReliabilityPolicy,
        "HistoryPolicy": HistoryPolicy,
        "DurabilityPolicy": DurabilityPolicy,
        "qos_profile_sensor_data": QoSProfile(5, reliability=ReliabilityPolicy.BEST_EFFORT),
    }
    modules.update(
        {
            "rclpy.node": {"Node": FakeNode},
            "rclpy.qos": qos_mod,
            "rclpy.exceptions": {"InvalidParameterTypeException": InvalidParameterTypeException},
            "rclpy.executors": {"ExternalShutdownException": ExternalShutdownException},
            "rcl_interfaces": {},
            "rcl_interfaces.msg": {"ParameterDescriptor": types.SimpleNamespace},
        }
    )
    monkeypatch.setitem(sys.modules, "rclpy", rclpy_mod)
    for name, attrs in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
        parent, _, child = name.rpartition(".")
        if parent:
            monkeypatch.setattr(sys.modules[parent], child, module, raising=False)
    return fake


def image_msg(fake: FakeRclpy, bgr: np.ndarray, stamp: int, frame_id: str = "camera") -> Any:
    """A ``sensor_msgs/Image`` (bgr8) as rclpy delivers it (``data`` an ``array.array`` of bytes)."""
    h, w = bgr.shape[:2]
    return fake.msg("sensor_msgs/Image")(
        header=header(fake, stamp, frame_id),
        height=h,
        width=w,
        encoding="bgr8",
        is_bigendian=0,
        step=w * 3,
        data=array.array("B", np.ascontiguousarray(bgr).tobytes()),
    )


def header(fake: FakeRclpy, stamp: int, frame_id: str = "camera") -> Any:
    """A ``std_msgs/Header`` at ``stamp`` ns."""
    time_msg = fake.msg("builtin_interfaces/Time")(sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000)
    return fake.msg("std_msgs/Header")(stamp=time_msg, frame_id=frame_id)


def detections_msg(
    fake: FakeRclpy, boxes: np.ndarray, ids: np.ndarray, stamp: int, class_id: str = "person"
) -> Any:
    """A ``vision_msgs/Detection2DArray`` of (N, 4) ``x y w h`` boxes with their track ids (-1: none)."""
    m = fake.msg
    hdr = header(fake, stamp)
    items = []
    for (x, y, w, h), tid in zip(np.asarray(boxes, float).tolist(), np.asarray(ids).tolist(), strict=True):
        centre = m("vision_msgs/Pose2D")(position=m("vision_msgs/Point2D")(x=x + w / 2, y=y + h / 2))
        hyp = m("vision_msgs/ObjectHypothesis")(class_id=class_id, score=1.0)
        items.append(
            m("vision_msgs/Detection2D")(
                header=hdr,
                bbox=m("vision_msgs/BoundingBox2D")(center=centre, size_x=w, size_y=h),
                results=[m("vision_msgs/ObjectHypothesisWithPose")(hypothesis=hyp)],
                id="" if tid < 0 else str(tid),
            )
        )
    return m("vision_msgs/Detection2DArray")(header=hdr, detections=items)
