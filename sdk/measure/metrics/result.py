"""The result every protocol returns: headline numbers, tables to print, everything as JSON."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Table:
    """A table to print: a title, column names and rows of cells (str / int / float)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class ScoreReport:
    """What a protocol computed.

    Attributes:
        protocol: "pairwise", "pcp" or "par".
        summary: headline metrics by name (floats; NaN where undefined, with a note saying why).
        tables: per-class / per-part / per-size breakdowns for the terminal.
        details: everything else (confusion matrix, counts, options), JSON-serialisable.
        notes: human-readable remarks (e.g. "no predicted group: social F1 undefined").
    """

    protocol: str
    summary: dict[str, float]
    tables: tuple[Table, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        def clean(value: Any) -> Any:
            if isinstance(value, float) and not math.isfinite(value):
                return None  # JSON has no NaN; null means undefined (see notes)
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [clean(v) for v in value]
            if hasattr(value, "tolist"):
                return clean(value.tolist())
            return value

        return clean(
            {
                "protocol": self.protocol,
                "summary": self.summary,
                "tables": [
                    {"title": t.title, "columns": list(t.columns), "rows": [list(r) for r in t.rows]}
                    for t in self.tables
                ],
                "details": self.details,
                "notes": list(self.notes),
            }
        )

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")
