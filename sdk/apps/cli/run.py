"""``pairedge run``: the streaming runtime over a video (or image folder) with a detection file, or with a
person detector (OpenCV's HOG by default, ``--detector MODEL.onnx``) when there is none."""

from __future__ import annotations

from pathlib import Path

import typer
from pairedge.apps.cli.app import app, console, fail, handle_errors
from pairedge.apps.cli.run_log import run_log_command
from pairedge.apps.cli.settings import Chosen, with_settings
from pairedge.apps.cli.summary import check_scored, frame_progress, print_summary
from pairedge.apps.ros.bag import LogTopics, is_log
from pairedge.core.errors import FormatError
from pairedge.core.io.textio import printable
from pairedge.runtime.memory import tune_allocator
from pairedge.runtime.runner.inputs import FrameSource
from pairedge.runtime.runner.live import LiveOptions, is_live, live_target
from pairedge.runtime.runner.run import RunOptions, run_files
from pairedge.runtime.runner.stream import run_live
from rich.markup import escape

#: The help panel of the options that apply to ROS 2 logs only.
ROS_PANEL = "ROS 2 log"


@app.command()
@handle_errors
@with_settings(
    "model",
    "precision",
    "backend",
    "flow",
    "flow_preset",
    "flow_scale",
    "dla_core",
    "detector",
    "detector_layout",
    "detector_backend",
    "tracker",
    "tracking",
    "coast_frames",
    "max_people",
    "confirm_s",
    "operating_point",
    "box_shape",
    "pair_radius",
)
def run(
    source_text: str = typer.Argument(
        ...,
        metavar="SOURCE",
        help="Video file (anything OpenCV decodes), a folder of images, a ROS 2 log (rosbag2 folder, "
        ".mcap or .db3 file), or a live source: a camera index (0) or /dev/videoN, an rtsp:// or http:// "
        "stream, a GStreamer pipeline ending in appsink.",
    ),
    detections: Path | None = typer.Option(
        None,
        "--detections",
        "-d",
        help="Boxes per frame: MOT .txt (1-based frames), JRDB .json or CVML .xml. Id -1 = no identity: "
        "the built-in tracker assigns ids. Without it a video runs --detector; a ROS 2 log uses "
        "--detections-topic.",
    ),
    image_topic: str | None = typer.Option(
        None,
        "--image-topic",
        rich_help_panel=ROS_PANEL,
        help="ROS 2 log: sensor_msgs/Image or CompressedImage topic (default: the only one).",
    ),
    detections_topic: str | None = typer.Option(
        None,
        "--detections-topic",
        rich_help_panel=ROS_PANEL,
        help="ROS 2 log: vision_msgs/Detection2DArray topic (default: the only one).",
    ),
    stamp_tolerance: float = typer.Option(
        0.01,
        "--stamp-tolerance",
        min=0.0,
        max=10.0,
        rich_help_panel=ROS_PANEL,
        help="ROS 2 log: largest image / detections header-stamp difference of a pair, seconds.",
    ),
    detection_class: list[str] = typer.Option(
        [],
        "--detection-class",
        rich_help_panel=ROS_PANEL,
        help="ROS 2 log: keep detections of this class id (repeatable; default: all).",
    ),
    out_bag: Path | None = typer.Option(
        None,
        "--out-bag",
        rich_help_panel=ROS_PANEL,
        help="ROS 2 log: write a copy with /pairedge/interactions and /pairedge/markers here.",
    ),
    list_topics: bool = typer.Option(
        False, "--list-topics", rich_help_panel=ROS_PANEL, help="ROS 2 log: list its topics and exit."
    ),
    out: Path = typer.Option(
        Path("out"),
        "--out",
        help="Output folder (created): results.jsonl, summary.json, annotated.mp4. "
        "Those files of an earlier run there that this run does not rewrite are removed.",
    ),
    max_frames: int | None = typer.Option(None, "--max-frames", min=1, help="Stop after N frames."),
    reconnect_s: float = typer.Option(
        30.0,
        "--reconnect-s",
        min=0.0,
        max=86400.0,
        help="Live source: how long an outage may last while the stream is reopened (backoff from 0.5 s to 4 "
        "s) before the run ends; 0 = end at the first failure. A finite source (a file behind http://) ends "
        "at its last frame.",
    ),
    no_video: bool = typer.Option(False, "--no-video", help="Do not write the annotated video."),
    fps: float | None = typer.Option(
        None,
        "--fps",
        min=0.001,
        max=10000.0,
        help="Frame rate for timestamps (default: the video's; images: 30).",
    ),
    *,
    settings: Chosen,
) -> None:
    """Run the runtime over a video: JSON Lines results, annotated video, summary table.

    Writes into --out: results.jsonl, summary.json and annotated.mp4 (.avi without the mp4 codec; neither
    with --no-video). Those files of an earlier run there that this run does not rewrite are removed (a note
    says which); nothing else in the folder is touched. Exit 1 when no frame at all was scored.
    """
    source = Path(source_text)
    live = is_live(source_text)
    if not live and not source.exists():  # before any option is judged: the first thing wrong is the path
        raise FormatError(
            source,
            "no such file or folder; expected a video file, an image folder or a ROS 2 "
            "log (a rosbag2 folder, an .mcap or .db3 file)",
        )
    tune_allocator()  # keep freed per-frame temporaries for reuse (pairedge.runtime.memory)
    options = settings.run(RunOptions(max_frames=max_frames, video=not no_video, fps=fps))

    ros_only = {
        "--list-topics": list_topics,
        "--out-bag": out_bag is not None,
        "--image-topic": image_topic,
        "--detections-topic": detections_topic,
    }
    if live:
        given = [name for name, value in ros_only.items() if value]
        if given:
            raise fail(
                f"{', '.join(given)}: for ROS 2 logs (a rosbag2 folder, an .mcap or .db3 file), not a live "
                "source"
            )
        run_live_command(source_text, options, detections, out, reconnect_s)
        return
    if reconnect_s != 30.0:
        raise fail(
            "--reconnect-s: for live sources (a camera, an rtsp:// or http:// stream, a GStreamer pipeline)"
        )
    if is_log(source):
        topics = LogTopics(image_topic, detections_topic, stamp_tolerance, frozenset(detection_class) or None)
        run_log_command(source, options, topics, out, out_bag, list_topics)
        return
    if list_topics or out_bag is not None or image_topic or detections_topic:
        raise fail(
            f"{printable(str(source))}: --list-topics, --out-bag and the topic options are for ROS 2 "
            "logs (a rosbag2 folder with metadata.yaml, or an .mcap / .db3 file)"
        )
    if detections is not None and settings.given & {"detector", "detector_layout"}:
        raise fail(
            "--detections and --detector / --detector-layout exclude each other: boxes come from a file "
            "or from a detector"
        )
    frames = FrameSource(source, fps)
    total = frames.frame_count
    if total is not None and max_frames is not None:
        total = min(total, max_frames)
    with frame_progress(f"running {printable(source.name)}", total) as advance:
        summary = run_files(frames, detections, out, options, on_frame=advance)
    print_summary(summary, f"pairedge run {source.name}")
    if summary.error:
        raise fail(summary.error)
    check_scored(summary)


def run_live_command(
    spec: str, options: RunOptions, detections: Path | None, out: Path, reconnect_s: float = 30.0
) -> None:
    """``pairedge run`` on a camera or stream: until it ends, --max-frames, or Ctrl-C; then the summary."""

    if detections is not None:
        raise fail("--detections: a live source has no detection file; people come from --detector")
    where = live_target(spec)
    assert where is not None
    console.print(
        escape(f"live {where.describe()}: Ctrl-C ends the run (the summary is still written)"),
        highlight=False,
    )
    with frame_progress(f"running {printable(where.describe())}", options.max_frames) as advance:
        summary = run_live(where, out, options, LiveOptions(reconnect_s=reconnect_s), on_frame=advance)
    print_summary(summary, f"pairedge run {where.describe()}")
    check_scored(summary)
