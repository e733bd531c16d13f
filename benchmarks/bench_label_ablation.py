"""Which stage-2 inputs make walking vs standing go wrong on real video? (issue 27, part 3: diagnosis)

``bench_real_video.py`` measures that the labels of correct links agree with the ground-plane motion of PETS
2009 S2.L1 far less on the ground-truth tracks than on the raw ACF detections. This benchmark finds out why:
it reruns the same two cases (``mot15/gt/gt.txt`` tracks; ``mot15/det/det.txt`` through the built-in tracker)
with groups of stage-2 columns set to the bundled model's training mean (the way the runtime neutralises the
box-shape columns of a fixed-ratio detector), and reports per group:

* pair precision / recall against the ground-plane "together" (unchanged by design: stage 1 is not touched),
* walking-vs-standing agreement of the correct links with the ground-plane motion (``bench_real_video``'s
  definition: walking = both faster than 0.5 m/s, standing = both slower than 0.3 m/s),
* the label shares of the linked pair-frames, and the labels **per ground-plane motion class** (what fraction
  of the truly walking / truly standing linked pairs get each label). The per-class rates separate labelling
  from linking: two box sources can label alike and still differ in their shares when one links fewer
  standing pairs.

Nothing is chosen or fitted here. Writes ``benchmarks/results/bench_label_ablation.json`` and ``.md``::

    python benchmarks/bench_label_ablation.py                     # ~2 minutes on 2 cores
    python benchmarks/bench_label_ablation.py ../shared/data/pets09_s2l1 --groups none,box_shape
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from _train_bench import write
from bench_real_video import (
    DEFAULT_DATA,
    KEYED,
    FrameSource,
    Together,
    _f,
    ground_positions,
    ground_speeds,
    label_stability,
    read_mot,
    run_case,
    together_matrix,
)
from pairedge.core.bundled import default_model_dir
from pairedge.core.features import get_spec
from pairedge.runtime import boxshape
from pairedge.runtime.loading import find_models
from pairedge.runtime.tracker import TrackerConfig

HERE = Path(__file__).resolve().parent
#: Column groups of the stage-2 input (the ``pairedge`` spec's person block of A and B, and pair columns).
GROUPS: dict[str, tuple[str, ...]] = {
    "none": (),
    "box_shape": ("a_aspect", "b_aspect"),
    "track_history": ("a_hist_vx", "a_hist_vy", "b_hist_vx", "b_hist_vy"),
    "scale_rate": ("a_scale_rate", "b_scale_rate"),
    "flow_spread": ("a_spread", "b_spread"),
    "image_size": (
        "a_height",
        "a_bottom",
        "b_height",
        "b_bottom",
        "pair_mean_height",
        "pair_mean_bottom",
        "pair_mean_width",
    ),
}
LABELS = ("walking_together", "standing_together", "sitting_together")


def neutralising(columns: np.ndarray, means: np.ndarray) -> Any:
    """A ``BoxShapePolicy.neutralise`` that also sets ``columns`` of stage 2 to ``means`` (every frame)."""
    original = boxshape.BoxShapePolicy.neutralise

    def neutralise(self: Any, features: Any) -> None:
        original(self, features)
        if len(features) and len(columns):
            features.stage2[:, columns] = means

    return original, neutralise


def per_class(confusion: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """Label rates within each ground-plane motion class: ``{"walking": {"n": N, label: rate, ...}, ...}``."""
    out: dict[str, dict[str, Any]] = {}
    for motion in ("walking", "standing"):
        row = confusion.get(motion, {})
        n = sum(row.values())
        out[motion] = {"n": n, **{lab: (row.get(lab, 0) / n if n else None) for lab in LABELS}}
    return out


def run(data: Path, groups: list[str], model: Path) -> dict[str, Any]:
    spec = get_spec("pairedge")
    models = find_models(model)
    mean = np.asarray(models.stage2.metadata.norm_mean, np.float32)
    video, mot = data / "vtest.avi", data / "mot15"
    pos, _ = ground_positions(mot / "gt" / "gt.txt")
    fps = FrameSource(video).fps or 10.0
    rule = Together()
    together, speeds = together_matrix(pos, fps, rule), ground_speeds(pos, fps, rule.window)
    truth = read_mot(mot / "gt" / "gt.txt").by_frame()
    cases = {"gt": mot / "gt" / "gt.txt", "det": mot / "det" / "det.txt"}
    res: dict[str, Any] = {"model": str(model), "together_rule": rule.__dict__, "groups": {}}
    for group in groups:
        cols = np.array([spec.stage2_names.index(n) for n in GROUPS[group]], np.int64)
        original, patched = neutralising(cols, mean[cols])
        boxshape.BoxShapePolicy.neutralise = patched  # type: ignore[method-assign]
        try:
            rows, keyed = {}, {}
            for key, path in cases.items():
                m, _ = run_case(
                    video,
                    path,
                    model,
                    truth,
                    together,
                    pos,
                    None,
                    "auto",
                    TrackerConfig(),
                    "auto",
                    speeds,
                    rule,
                )
                keyed[key] = m.pop(KEYED)
                rows[key] = {
                    "precision": m["precision"],
                    "recall": m["recall"],
                    "agreement": m["motion"]["agreement"],
                    "shares": {k: v["share"] for k, v in m["labels"].items()},
                    "per_class": per_class(m["motion"]["confusion"]),
                }
                print(
                    f"{group:>14} {key}: agreement {rows[key]['agreement']:.3f}, walking share "
                    f"{rows[key]['shares'].get('walking_together', 0):.3f}",
                    flush=True,
                )
        finally:
            boxshape.BoxShapePolicy.neutralise = original  # type: ignore[method-assign]
        stable = label_stability(keyed["gt"], keyed["det"], list(models.labels))
        res["groups"][group] = {"columns": list(GROUPS[group]), **rows, "label_stability": stable}
    return res


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Walking vs standing on PETS S2.L1: which stage-2 inputs are to blame (issue 27)",
        "",
        f"`python benchmarks/bench_label_ablation.py` — model `{res['model']}` through the runtime on "
        "`gt.txt` tracks (gt) and raw `det.txt` detections + the built-in tracker (det); each row sets one "
        "group of stage-2 columns to the model's training mean. Agreement: labels of the correct links vs "
        "the ground-plane motion (walking: both > 0.5 m/s; standing: both < 0.3 m/s). Per class: the share "
        "of the truly walking (W) / truly standing (S) linked pair-frames labelled walking / standing. "
        "Common: the pair-frames both runs link (same two ground-truth people), their walking share in this "
        "run and the share of them both runs label alike. Nothing is chosen here.",
        "",
        "| neutralised | run | P / R | agreement | walking share | W -> walking | S -> standing | W / S "
        "pair-frames "
        "| common: walking share | common: same label |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for group, g in res["groups"].items():
        stable = g["label_stability"]
        for side, key in enumerate(("gt", "det")):
            r = g[key]
            pc = r["per_class"]
            common = stable["shares"]["walking_together"][side]
            lines.append(
                f"| {group} | {key} | {r['precision']:.3f} / {r['recall']:.3f} | {_f(r['agreement'])} | "
                f"{_f(r['shares'].get('walking_together'))} | {_f(pc['walking']['walking_together'])} | "
                f"{_f(pc['standing']['standing_together'])} | {pc['walking']['n']} / {pc['standing']['n']} | "
                f"{_f(common)} ({stable['common_pair_frames']}) | {_f(stable['same_label'])} |"
            )
    lines += ["", f"Run time {res['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA, help="the pets09_s2l1 folder")
    ap.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, from {', '.join(GROUPS)}")
    ap.add_argument(
        "--model", type=Path, default=default_model_dir(), help="model folder (default: the bundled)"
    )
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    cv2.setNumThreads(1)
    if not (args.data / "vtest.avi").is_file():
        raise SystemExit(f"error: PETS S2.L1 not found at {args.data}; pass the pets09_s2l1 folder")
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise SystemExit(f"error: unknown group(s) {unknown}; expected some of {', '.join(GROUPS)}")
    start = time.perf_counter()
    res = run(args.data, groups, args.model)
    res["seconds"] = time.perf_counter() - start
    text = markdown(res)
    write("bench_label_ablation", res, text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
