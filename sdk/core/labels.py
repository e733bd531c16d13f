"""Label sets. A model's label set is data stored in its metadata; these are the ones pairedge knows by
name."""

from __future__ import annotations

from dataclasses import dataclass

from pairedge.core.errors import InputError


@dataclass(frozen=True)
class LabelSet:
    """An ordered set of class names; the index of a name is its class id."""

    name: str
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(set(self.classes)) != len(self.classes) or not self.classes:
            raise InputError(
                f"label set {self.name!r}: class names must be unique and non-empty, got {self.classes}"
            )

    def __len__(self) -> int:
        return len(self.classes)

    def index(self, label: str) -> int:
        """Class id of ``label``; raises InputError naming the known labels."""
        try:
            return self.classes.index(label)
        except ValueError:
            raise InputError(
                f"unknown label {label!r} for label set {self.name!r}; expected one of {list(self.classes)}"
            ) from None


#: The paper's stage-2 classes (Liang et al. 2026), in the released code's order.
PAPER3 = LabelSet("paper3", ("walking_together", "standing_together", "sitting_together"))

#: Collective Activity per-pair interaction labels (Choi & Savarese 2012); file ids are 1-based.
CAD8 = LabelSet(
    "cad8",
    (
        "no_interaction",
        "approaching",
        "leaving",
        "passing_by",
        "facing_each_other",
        "walking_side_by_side",
        "standing_in_a_row",
        "standing_side_by_side",
    ),
)

#: Stage 1: does the pair interact? Class 1 = interacting, as in the released code.
STAGE1 = LabelSet("stage1", ("not_interacting", "interacting"))

#: The scene simulator's pair labels. The first three are "together" (same social group): they are the
#: stage-1 positives and map one-to-one onto PAPER3; the others are stage-1 negatives.
SIM7 = LabelSet(
    "sim7",
    (
        "walking_together",
        "standing_together",
        "sitting_together",
        "approaching",
        "leaving",
        "passing_by",
        "no_interaction",
    ),
)

LABEL_SETS: dict[str, LabelSet] = {s.name: s for s in (PAPER3, CAD8, STAGE1, SIM7)}


def get_label_set(name: str) -> LabelSet:
    """Look up a label set by name."""
    try:
        return LABEL_SETS[name]
    except KeyError:
        raise InputError(f"unknown label set {name!r}; known: {sorted(LABEL_SETS)}") from None


#: CAD classes that count as interacting for stage 1 (people who are together); approaching, leaving,
#: passing-by and no-interaction are stage-1 negatives.
CAD_TOGETHER: tuple[str, ...] = (
    "facing_each_other",
    "walking_side_by_side",
    "standing_in_a_row",
    "standing_side_by_side",
)
