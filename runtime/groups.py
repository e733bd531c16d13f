"""Social groups from pairwise predictions: union-find over confirmed links, activity by majority vote.

A group is a connected component (at least 2 people) of the graph whose edges are the *links*: the pairs
that carry a stage-2 label (they passed the stage-1 gate, held for ``confirm_s``) with ``p_interact >=
tau_group``. So every group has at least one link between its members, and therefore an activity: the
majority label of its *within-group* labelled pairs (both members in the group, including labelled pairs
below ``tau_group``); a tie is broken by the larger summed probability of the tied classes over those pairs,
then by the lower class index. The vote share is the winner's votes over all labelled within-group pairs.
A pair above ``tau_group`` without a label (not gated, or not confirmed yet) joins nobody.
"""

from __future__ import annotations

import numpy as np
from pairedge.runtime.types import Group

#: Up to this many edges a plain union-find is cheaper than the vectorised propagation (a frame's links: a
#: few).
SMALL_GRAPH = 64


def _components_small(edges: np.ndarray, label: np.ndarray) -> np.ndarray:
    """:func:`connected_components` by union-find in Python (the same labels: each component's smallest
    node)."""
    parent = label.tolist()

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in edges.tolist():
        ra, rb = root(a), root(b)
        if ra != rb:  # the smaller index becomes the root, so every root is its component's minimum
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([root(i) for i in range(len(parent))], np.int64)


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
    if len(edges) <= SMALL_GRAPH:
        return _components_small(edges, label)
    ends = np.concatenate([edges[:, 0], edges[:, 1]])
    order = np.argsort(ends, kind="stable")
    nodes, starts = np.unique(ends[order], return_index=True)  # segments of `order` per node
    a, b = edges[:, 0], edges[:, 1]
    while True:  # min-label propagation with pointer jumping: a few rounds in practice
        m = np.minimum(label[a], label[b])
        reached = np.minimum.reduceat(np.concatenate([m, m])[order], starts)
        new = label.copy()
        new[nodes] = np.minimum(new[nodes], reached)
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
    """Groups of one frame, from pairs of track ids.

    Args:
        pairs: (M, 2) int64 track ids.
        p_interact: (M,) float stage-1 probabilities.
        label_ids: (M,) int64 stage-2 class per pair, -1 for pairs without a label (never an edge).
        probs: (M, C) float stage-2 probabilities (ignored where ``label_ids`` is -1).
        tau_group: edge threshold on ``p_interact``.
        labels: the C class names.

    Returns:
        Groups sorted by their smallest member id; members sorted.
    """
    if not ((p_interact >= tau_group) & (np.asarray(label_ids) >= 0)).any():
        return ()
    nodes, inverse = np.unique(np.asarray(pairs, np.int64), return_inverse=True)
    return groups_from_index(inverse.reshape(-1, 2), nodes, p_interact, label_ids, probs, tau_group, labels)


def groups_from_index(
    index: np.ndarray,
    node_ids: np.ndarray,
    p_interact: np.ndarray,
    label_ids: np.ndarray,
    probs: np.ndarray,
    tau_group: float,
    labels: tuple[str, ...],
    pending: np.ndarray | None = None,
) -> tuple[Group, ...]:
    """:func:`find_groups` with pairs given as (M, 2) int64 rows into ``node_ids`` ((N,) unique track ids),
    as the feature extractor's ``PairFeatures.index`` gives them (no sort or search needed). ``pending``
    (M,) bool marks links not confirmed yet (see ``PipelineConfig.confirm_s``): they are no edges (they carry
    no label either; ``pending`` is kept for callers that pass labels of unconfirmed pairs)."""
    edge = (p_interact >= tau_group) & (np.asarray(label_ids) >= 0)
    if pending is not None:
        edge &= ~pending
    if not edge.any():
        return ()
    comp = connected_components(index[edge], len(node_ids))
    size = np.bincount(comp, minlength=len(node_ids))
    roots = np.flatnonzero(size >= 2)
    votes, mass = _votes(index, label_ids, probs, comp, roots, len(labels))
    # members: nodes sorted by (component, track id), one contiguous run per component
    order = np.lexsort((node_ids, comp))
    starts = np.searchsorted(comp[order], roots)
    members = np.asarray(node_ids, np.int64)[order].tolist()
    totals = votes.sum(axis=1)
    tied = votes == votes.max(axis=1, keepdims=True)
    winners = np.where(tied, mass, -np.inf).argmax(axis=1)  # most votes, then mass, then lower class
    shares = votes[np.arange(len(roots)), winners] / np.maximum(totals, 1)
    groups = [  # every group holds a labelled link, so ``total`` > 0; None stays the "no activity" guard
        Group(tuple(members[s : s + n]), labels[w], w, share)
        if total
        else Group(tuple(members[s : s + n]), None, -1, 0.0)
        for s, n, total, w, share in zip(
            starts.tolist(),
            size[roots].tolist(),
            totals.tolist(),
            winners.tolist(),
            shares.tolist(),
            strict=True,
        )
    ]
    groups.sort(key=lambda g: g.members[0])
    return tuple(groups)


def _votes(
    index: np.ndarray,
    label_ids: np.ndarray,
    probs: np.ndarray,
    comp: np.ndarray,
    roots: np.ndarray,
    num_classes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(K, C) vote counts and (K, C) summed probabilities of labelled pairs inside each group."""
    k = len(roots)
    labelled = np.flatnonzero(label_ids >= 0)
    ca, cb = comp[index[labelled, 0]], comp[index[labelled, 1]]
    slot = np.full(len(comp), -1, np.int64)
    slot[roots] = np.arange(k)
    group = slot[ca]
    inside = (ca == cb) & (group >= 0)
    group, lab = group[inside], label_ids[labelled[inside]]
    votes = np.bincount(group * num_classes + lab, minlength=k * num_classes).reshape(k, num_classes)
    p_in = np.asarray(probs, np.float64)[labelled[inside]]
    mass = np.zeros((k, num_classes), np.float64)
    for c in range(num_classes):
        mass[:, c] = np.bincount(group, weights=p_in[:, c], minlength=k)
    return votes, mass
