"""JRDB-PAR protocol: hand-computed cases and a loop re-statement of the official code on random frames."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import FormatError, InputError
from pairedge.core.io.par import ParFrame, write_par
from pairedge.measure.metrics.par import ParThresholds, score_files, score_frames
from sklearn.metrics import precision_recall_fscore_support


def frame(
    n: int = 4,
    groups: tuple = (),
    actions: list | None = None,
    global_labels: tuple = (0,),
    number: int = 0,
) -> ParFrame:
    """Label frame with persons 1..n; groups = ((members, social ids), ...)."""
    acts = actions if actions is not None else [[0]] * n
    return ParFrame.from_labels(
        number, list(zip(range(1, n + 1), acts, strict=True)), list(groups), global_labels
    )


def test_three_vs_three_sharing_two_matches_although_iou_is_half() -> None:
    gold = [frame(4, (([1, 2, 3], [5]),))]
    pred = [frame(4, (([2, 3, 4], [5]),))]
    r = score_frames(pred, gold)
    assert r.details["group_tp"] == 1  # |G∩P| / max = 2/3 > 1/2 (IoU = 2/4 would not pass)
    assert r.summary["group_F1"] == 1.0
    assert r.summary["F_p"] == 1.0


def test_two_vs_two_needs_identical_members() -> None:
    r = score_frames([frame(4, (([1, 3], [5]),))], [frame(4, (([1, 2], [5]),))])
    assert r.details["group_tp"] == 0 and r.summary["F_p"] == 0.0


def test_threshold_exactly_at_point_six_gives_no_label() -> None:
    gold = [frame(1, actions=[[1]], global_labels=(3,))]
    scores = np.full((1, 27), -5.0)
    scores[0, 0] = 0.6  # not > 0.6
    scores[0, 1] = 0.6000001
    glob = np.full(7, -1.0)
    glob[3] = 0.5  # not > 0.5
    pred = [ParFrame(0, np.array([1]), scores, (), np.zeros((0, 32)), glob)]
    r = score_frames(pred, gold)
    assert r.summary["P_i"] == 1.0 and r.summary["R_i"] == 1.0  # only label 1 predicted
    assert r.summary["F_g"] == 0.0  # empty global prediction scores 0
    looser = score_frames(pred, gold, thresholds=ParThresholds(global_activity=0.4))
    assert looser.summary["F_g"] == 1.0


def test_individual_sample_average_hand_computed() -> None:
    gold = [frame(2, actions=[[0, 1], [2]])]
    pred = [frame(2, actions=[[0], []])]
    r = score_frames(pred, gold)
    assert r.summary["P_i"] == pytest.approx(0.5)  # (1 + 0) / 2
    assert r.summary["R_i"] == pytest.approx(0.25)  # (1/2 + 0) / 2
    assert r.summary["F_i"] == pytest.approx(1 / 3)  # (2/3 + 0) / 2


def test_matched_pair_with_both_label_sets_empty() -> None:
    gold = [frame(4, (([1, 2], []), ([3, 4], [7])))]
    pred = [frame(4, (([1, 2], []), ([3, 4], [7])))]
    official = score_frames(pred, gold)
    assert math.isnan(official.summary["F_p"]) and math.isnan(official.summary["F_a"])
    assert official.summary["P_p"] == 0.5 and official.summary["R_p"] == 0.5  # skipped, not NaN
    assert any("0/0" in n for n in official.notes)
    corrected = score_frames(pred, gold, variant="corrected")
    assert corrected.summary["P_p"] == 0.5 and corrected.summary["R_p"] == 0.5
    assert corrected.summary["F_p"] == 0.5


def test_no_predicted_group_is_reported_not_crashed() -> None:
    gold = [frame(4, (([1, 2], [3]),))]
    pred = [frame(4, (([1], [3]), ([2], [3])))]  # singletons are not groups
    r = score_frames(pred, gold)
    assert math.isnan(r.summary["F_p"]) and math.isnan(r.summary["F_a"])
    assert r.summary["group_P"] == 0.0 and r.summary["group_R"] == 0.0  # official safed division
    assert r.details["n_pred_groups"] == 0
    assert any("no predicted group" in n for n in r.notes)


def test_social_sums_are_divided_by_the_number_of_predicted_groups() -> None:
    gold = [frame(6, (([1, 2], [4]), ([3, 4, 5], [6, 8])))]
    pred = [frame(6, (([1, 2], [4, 9]), ([5, 6], [6])))]  # second predicted group matches nothing
    r = score_frames(pred, gold)
    # one matched pair: P = 1/2, R = 1, F1 = 2/3; divided by 2 predicted groups (recall too)
    assert r.summary["P_p"] == pytest.approx(0.25)
    assert r.summary["R_p"] == pytest.approx(0.5)
    assert r.summary["F_p"] == pytest.approx(1 / 3)
    assert (r.details["group_tp"], r.details["group_fp"], r.details["group_fn"]) == (1, 1, 1)
    c = score_frames(pred, gold, variant="corrected")
    assert c.summary["R_p"] == pytest.approx(0.5)  # / 2 true groups
    assert r.summary["F_a"] == pytest.approx((r.summary["F_i"] + r.summary["F_p"] + r.summary["F_g"]) / 3)


def test_true_group_label_is_the_lowest_index_members() -> None:
    gold_frame = frame(3, (([3, 2], []),))
    social = np.zeros((3, 32), dtype=bool)
    social[1, 10] = True  # person 2, position 1: the lowest index among members {2, 3}
    social[2, 11] = True
    gold = [
        ParFrame(
            0,
            gold_frame.person_ids,
            gold_frame.actions,
            gold_frame.groups,
            gold_frame.group_activity,
            gold_frame.global_activity,
            social,
        )
    ]
    assert score_frames([frame(3, (([2, 3], [10]),))], gold).summary["F_p"] == 1.0
    assert score_frames([frame(3, (([2, 3], [11]),))], gold).summary["F_p"] == 0.0


def test_mismatched_frames_and_persons_are_errors() -> None:
    gold = [frame(3)]
    with pytest.raises(FormatError, match="person ids differ"):
        score_frames([frame(2)], gold)
    with pytest.raises(FormatError, match="no prediction"):
        score_frames([], gold)
    with pytest.raises(FormatError, match="not in the ground truth"):
        score_frames([frame(3), frame(3, number=5)], gold)
    with pytest.raises(InputError, match="variant"):
        score_frames(gold, gold, variant="lenient")
    scored = ParFrame(0, np.array([1]), np.zeros((1, 27)), (), np.zeros((0, 32)), np.zeros(7))
    with pytest.raises(FormatError, match="label ids"):
        score_frames([scored], [scored])


def test_score_files_round_trip(tmp_path: Path) -> None:
    gold = [frame(4, (([1, 2, 3], [5]),), number=k) for k in range(3)]
    write_par(tmp_path / "gold.jsonl", gold)
    write_par(tmp_path / "pred.jsonl", gold[::-1])
    r = score_files(tmp_path / "pred.jsonl", tmp_path / "gold.jsonl")
    assert r.summary["F_a"] == 1.0 and r.details["n_frames"] == 3 and r.details["gold"].endswith("gold.jsonl")
    assert r.to_dict()["summary"]["F_a"] == 1.0


# ----------------------------------------------------------------------------------------------- oracle


def _official_group_lists(labels: np.ndarray) -> list[list[int]]:
    """create_P_matrix + generate_list: clusters (>= 2 members) as sorted index lists."""
    a = (labels[:, None] == labels[None, :]).astype(int)
    res, searched = [], []
    for i in range(len(a)):
        if i not in searched:
            temp = [i] + [j for j in range(len(a)) if a[i, j] != 0 and i != j]
            if len(temp) > 1:
                res.append(temp)
            searched.extend(temp)
    return res


def _official(gold_rows: list[dict], pred_rows: list[dict], th: tuple[float, float, float]) -> dict:
    """The official evaluation, restated with its loops (group_detection_PRF.py, metrics.py)."""
    act_p = np.concatenate([(r["act"] > th[0]).astype(float) for r in pred_rows])
    act_t = np.concatenate([r["act"] for r in gold_rows])
    glob_p = np.array([(r["glob"] > th[2]).astype(float) for r in pred_rows])
    glob_t = np.array([r["glob"] for r in gold_rows])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p_i, r_i, f_i, _ = precision_recall_fscore_support(act_t, act_p, average="samples")
        p_g, r_g, f_g, _ = precision_recall_fscore_support(glob_t, glob_p, average="samples")
    tp = fp = fn = 0
    prec = rec = f1 = 0
    n_groups = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        for g, p in zip(gold_rows, pred_rows, strict=True):
            gt_groups = _official_group_lists(g["cluster"])
            pr_groups = _official_group_lists(p["cluster"])
            acty_gt = [g["social"][grp[0]] for grp in sorted(gt_groups)]
            acty_pr = [(p["gscores"][tuple(grp)] > th[1]).astype(float) for grp in sorted(pr_groups)]
            gt_groups, pr_groups = sorted(gt_groups), sorted(pr_groups)
            t_frame = 0
            for gi, gt in enumerate(gt_groups):
                for pi, pg in enumerate(pr_groups):
                    inter = len(set(gt) & set(pg))
                    if inter / max(len(gt), len(pg)) > 1 / 2:
                        t_frame += 1
                        a, b = acty_gt[gi], acty_pr[pi]
                        if sum(a) != 0:
                            rec += sum(np.logical_and(a, b)) / sum(a)
                        if sum(b) != 0:
                            prec += sum(np.logical_and(a, b)) / sum(b)
                        f1 += (2 * sum(np.logical_and(a, b))) / (sum(b) + sum(a))
            tp, fp, fn = tp + t_frame, fp + len(pr_groups) - t_frame, fn + len(gt_groups) - t_frame
            n_groups += len(pr_groups)
    gp = 0 if tp + fp == 0 else tp / (tp + fp)
    gr = 0 if tp + fn == 0 else tp / (tp + fn)
    out = {"F_i": f_i, "P_i": p_i, "R_i": r_i, "F_g": f_g, "P_g": p_g, "R_g": r_g}
    out |= {"group_P": gp, "group_R": gr, "group_F1": 0 if gp + gr == 0 else 2 * gp * gr / (gp + gr)}
    if n_groups:
        out |= {"P_p": prec / n_groups, "R_p": rec / n_groups, "F_p": f1 / n_groups}
        out["F_a"] = (f_i + out["F_p"] + f_g) / 3
    return out


def _random_frames(
    seed: int, social_p: float = 0.1
) -> tuple[list[ParFrame], list[ParFrame], list[dict], list[dict]]:
    rng = np.random.default_rng(seed)
    gold, pred, gold_rows, pred_rows = [], [], [], []
    for k in range(int(rng.integers(3, 12))):
        n = int(rng.integers(1, 9))
        ids = rng.permutation(100)[:n].astype(np.int64)  # file order != id order
        act = rng.random((n, 27)) < 0.08
        social = rng.random((n, 32)) < social_p
        glob = rng.random(7) < 0.3
        cg = rng.integers(0, max(1, n // 2), n)  # cluster label per person
        cp = np.where(rng.random(n) < 0.7, cg, rng.integers(0, n, n))
        gclusters = [np.flatnonzero(cg == c) for c in np.unique(cg)]
        pclusters = [np.flatnonzero(cp == c) for c in np.unique(cp)]
        gscores = {tuple(c): rng.normal(0.3 - 3 * (social_p < 0.05), 0.6, 32) for c in pclusters}
        gact = np.array([social[c.min()] for c in gclusters]).reshape(-1, 32)
        gold.append(ParFrame(k, ids, act, tuple(ids[c] for c in gclusters), gact, glob, social))
        act_scores = rng.normal(0.2, 0.7, (n, 27))
        g_scores = np.round(rng.normal(0.4, 0.5, 7), 1)  # includes exact 0.5 ties
        pact = np.array([gscores[tuple(c)] for c in pclusters]).reshape(-1, 32)
        pred.append(ParFrame(k, ids, act_scores, tuple(ids[c] for c in pclusters), pact, g_scores))
        gold_rows.append(
            {"act": act.astype(float), "glob": glob.astype(float), "cluster": cg, "social": social}
        )
        pred_rows.append({"act": act_scores, "glob": g_scores, "cluster": cp, "gscores": gscores})
    return pred, gold, pred_rows, gold_rows


@pytest.mark.parametrize(("seed", "social_p"), [(s, 0.1) for s in range(25)] + [(s, 0.01) for s in range(5)])
def test_agrees_with_the_official_loops(seed: int, social_p: float) -> None:
    """Sparse social labels (0.01) make matched pairs with two empty label sets: NaN on both sides."""
    pred, gold, pred_rows, gold_rows = _random_frames(seed, social_p)
    th = (0.6, 0.6, 0.5)
    expected = _official(gold_rows, pred_rows, th)
    got = score_frames(pred, gold).summary
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-12, nan_ok=True), key
    if "F_p" not in expected:
        assert math.isnan(got["F_p"])  # the official code would have raised ZeroDivisionError


def test_cli_scores_par_files_end_to_end(tmp_path: Path) -> None:
    from pairedge.apps.cli import app
    from typer.testing import CliRunner

    gold = [frame(4, (([1, 2, 3], [5]),), number=k) for k in range(2)]
    write_par(tmp_path / "gold.jsonl", gold)
    write_par(tmp_path / "pred.jsonl", [frame(4, number=k) for k in range(2)])  # no predicted group
    args = [
        "score",
        "--protocol",
        "par",
        "--pred",
        str(tmp_path / "pred.jsonl"),
        "--gold",
        str(tmp_path / "gold.jsonl"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "no predicted group" in result.output
    (tmp_path / "bad.jsonl").write_text('{"frame": 0, "persons": [{"id": 1, "actions": [99]}]}\n')
    bad = CliRunner().invoke(app, [*args[:4], str(tmp_path / "bad.jsonl"), *args[5:]])
    assert bad.exit_code == 1 and "unknown actions label id 99" in bad.output
