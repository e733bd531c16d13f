"""What a CUDA C source declares: each ``__global__`` kernel's parameters and its static shared memory.

Read from the kernel text itself, so the launch checks (argument kinds, shared memory) and the emulated
device's generated launch wrappers always follow the ``.cu`` file NVRTC compiles; nothing is declared twice.
Only the forms pairedge's kernels use are understood (pointers, ``int``, ``float``; fixed-size ``__shared__``
arrays); anything else is refused with the parameter named, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pairedge.core.errors import BackendError

#: Argument kinds of a launch: a device pointer, a 32-bit int, a 32-bit float.
KINDS = ("p", "i", "f")
_SCALARS = {"int": "i", "float": "f"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
_SIZES = {
    "char": 1,
    "unsigned char": 1,
    "short": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "float": 4,
    "double": 8,
    "long long": 8,
    "unsigned long long": 8,
    "size_t": 8,
}
_KERNEL = re.compile(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)\s*\{", re.S)
_SHARED = re.compile(r"(extern\s+)?__shared__\s+([A-Za-z_][\w ]*?)\s+(\w+)\s*((?:\[[^\]]*\])*)\s*;")


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its C type as written, its name, and its launch kind ("p", "i" or "f")."""

    ctype: str
    name: str
    kind: str


@dataclass(frozen=True)
class KernelSignature:
    """A ``__global__`` kernel: name, parameters in order, bytes of fixed-size ``__shared__`` arrays."""

    name: str
    params: tuple[Param, ...]
    static_shared: int

    def declaration(self) -> str:
        """The parameter list as C (``const float* u, int w``), for a wrapper with the same ABI."""
        return ", ".join(f"{p.ctype} {p.name}" for p in self.params)


def strip_comments(source: str) -> str:
    """``source`` without ``//`` and ``/* */`` comments (kernel files hold no string literals)."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def _param(text: str, kernel: str) -> Param:
    match = re.fullmatch(r"(.*?)([A-Za-z_]\w*)", text.strip(), re.S)
    if match is None or not match.group(1).strip():
        raise BackendError(f"kernel {kernel}: cannot read the parameter {text.strip()!r}")
    ctype, name = " ".join(match.group(1).split()), match.group(2)
    if "*" in ctype:
        return Param(ctype, name, "p")
    base = " ".join(t for t in ctype.split() if t not in _QUALIFIERS)
    if base not in _SCALARS:
        raise BackendError(
            f"kernel {kernel}: parameter {name} has type {ctype!r}; the CUDA layer launches pointers, int "
            "and float only (pass other values through device memory)"
        )
    return Param(ctype, name, _SCALARS[base])


def _body(text: str, start: int) -> str:
    """The text between the brace at ``start`` and its matching closing brace."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    raise BackendError("kernel source: unbalanced braces")


def _shared_bytes(body: str, kernel: str) -> int:
    total = 0
    for match in _SHARED.finditer(body):
        if match.group(1):  # extern __shared__: dynamic, sized at launch
            continue
        ctype = " ".join(match.group(2).split())
        dims = re.findall(r"\[\s*(\d+)\s*\]", match.group(4))
        if ctype not in _SIZES or len(dims) != match.group(4).count("["):
            raise BackendError(
                f"kernel {kernel}: cannot size the __shared__ array {match.group(3)} "
                f"({ctype}{match.group(4)}); use a fixed-size array of a plain type"
            )
        count = 1
        for d in dims:
            count *= int(d)
        total += _SIZES[ctype] * count
    return total


def parse_kernels(source: str) -> dict[str, KernelSignature]:
    """Every ``__global__`` kernel of a CUDA C source, by name, in source order.

    Raises:
        BackendError: a parameter type or a shared array this layer cannot launch or size.
    """
    text = strip_comments(source)
    found: dict[str, KernelSignature] = {}
    for match in _KERNEL.finditer(text):
        name, params = match.group(1), match.group(2).strip()
        parsed = tuple(_param(p, name) for p in params.split(",")) if params and params != "void" else ()
        body = _body(text, match.end() - 1)
        found[name] = KernelSignature(name, parsed, _shared_bytes(body, name))
    return found
