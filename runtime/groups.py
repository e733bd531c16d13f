"""Social groups from pairwise predictions: union-find over confident pairs, activity by majority vote.

A group is a connected component (at least 2 people) of the graph whose edges are the pairs with
``p_interact >= tau_group``. Its activity is the majority label of its *within-group* pairs that carry a
stage-2 label (both members in the group, including pairs below ``tau_group`` if they passed the stage-1
gate); a tie is broken by the larger summed probability of the tied classes over those pairs, then by the
lower class index. The vote share is the winner's votes over all labelled within-group pairs.
"""

from __future__ import annotations

import numpy as np
from pairedge.runtime.types import Group


def connected_components(edges: np.ndarray, num_nodes: int) -> np.ndarray:
    """Component label of every node (the smallest node index in its component), vectorised.

    Args:
        edges: (E, 2) int64 node indices in [0, num_nodes).
        num_nodes: number of nodes.

    Returns:
        (num_nodes,) int64 labels; isolated nodes are their own component.
    """
    label = np.arange(num_nodes, dtype=np.int64)
    if len(edges) == 0:
        return label
    a, b = edges[:, 0], edges[:, 1]
    while True:  # min-label propagation with pointer jumping: O(log n) rounds in practice
        m = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, m)
        np.minimum.at(new, b, m)
        new = new[new]
        if np.array_equal(new, label):
            return label
        label = new


def find_groups(
    pairs: np.ndarray,
    p_interact: np.ndarray,
    label_ids: np.ndarray,
    probs: np.ndarray,
    tau_group: float,
    labels: tuple[str, ...],
) -> tuple[Group, ...]:
    """Groups of one frame.

    Args:
        pairs: (M, 2) int64 track ids.
        p_interact: (M,) float stage-1 probabilities.
        label_ids: (M,) int64 stage-2 class per pair, -1 for pairs without a label.
        probs: (M, C) float stage-2 probabilities (ignored where ``label_ids`` is -1).
        tau_group: edge threshold on ``p_interact``.
        labels: the C class names.

    Returns:
        Groups sorted by their smallest member id; members sorted.
    """
    edge = p_interact >= tau_group
    if not edge.any():
        return ()
    ids, inverse = np.unique(pairs[edge].reshape(-1), return_inverse=True)
    comp = connected_components(inverse.reshape(-1, 2), len(ids))
    _, comp_index = np.unique(comp, return_inverse=True)  # components numbered 0..K-1 by smallest id
    k = int(comp_index.max()) + 1
    votes, mass = _votes(pairs, label_ids, probs, ids, comp_index, k, len(labels))
    groups: list[Group] = []
    for c in range(k):  # one iteration per group (few per frame)
        members = tuple(int(v) for v in ids[comp_index == c])
        total = int(votes[c].sum())
        if total == 0:
            groups.append(Group(members, "", -1, 0.0))
            continue
        best = votes[c] == votes[c].max()
        winner = int(np.flatnonzero(best)[np.argmax(mass[c][best])])
        groups.append(Group(members, labels[winner], winner, float(votes[c, winner]) / total))
    return tuple(groups)


def _votes(
    pairs: np.ndarray,
    label_ids: np.ndarray,
    probs: np.ndarray,
    ids: np.ndarray,
    comp_index: np.ndarray,
    k: int,
    num_classes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(K, C) vote counts and (K, C) summed probabilities of labelled pairs inside each component."""
    votes = np.zeros((k, num_classes), np.int64)
    mass = np.zeros((k, num_classes), np.float64)
    labelled = label_ids >= 0
    if not labelled.any():
        return votes, mass
    lp = pairs[labelled]
    pos = np.searchsorted(ids, lp)
    pos = np.minimum(pos, len(ids) - 1)
    in_graph = (ids[pos] == lp).all(axis=1)
    ca, cb = comp_index[pos[:, 0]], comp_index[pos[:, 1]]
    inside = in_graph & (ca == cb)
    np.add.at(votes, (ca[inside], label_ids[labelled][inside]), 1)
    np.add.at(mass, ca[inside], probs[labelled][inside])
    return votes, mass
