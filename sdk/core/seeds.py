"""Seed lists of simulator scenes (``"0-7"``, ``"1,4,9"``), counted against the ceiling before expansion."""

from __future__ import annotations

from pairedge.core import limits
from pairedge.core.errors import InputError


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0-7"`` -> (0, ..., 7); ``"1,4,9"`` -> (1, 4, 9); ranges and lists combine (``"0-3,10"``).

    Counted before anything is expanded: more than :data:`pairedge.core.limits.MAX_SIM_SEEDS` seeds in all is
    refused, so ``0-100000000`` costs nothing.

    Raises:
        InputError: not a seed list, a range that runs backwards or has a negative seed, or too many seeds.
    """

    spans: list[tuple[int, int]] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            spans.append((int(lo), int(hi) if hi else int(lo)))
    except ValueError:
        raise InputError(f"seeds: expected e.g. '0-7' or '1,4,9', got {text!r}") from None
    for lo, hi in spans:
        if lo < 0 or hi < lo:
            raise InputError(f"seeds: expected ranges A-B with 0 <= A <= B, got {text!r}")
    count = sum(hi - lo + 1 for lo, hi in spans)
    if count > limits.MAX_SIM_SEEDS:
        raise InputError(
            f"seeds: {text!r} is {count:,} seeds, more than the ceiling of {limits.MAX_SIM_SEEDS:,} "
            "(pairedge.core.limits.MAX_SIM_SEEDS)"
        )
    seeds = [s for lo, hi in spans for s in range(lo, hi + 1)]
    if not seeds:
        raise InputError(f"seeds: expected at least one seed, got {text!r}")
    return tuple(seeds)
