"""``ros2 run pairedge_ros pairedge_node``: starts pairedge's ROS 2 node (``pairedge.apps.ros.node.main``)."""

from __future__ import annotations

import sys


def main(args: list[str] | None = None) -> None:
    """Console entry point; ``args`` default to ``sys.argv`` (``--ros-args ...`` as ``ros2 run`` passes
    them)."""
    try:
        from pairedge.apps.ros.node import main as pairedge_main
    except ImportError as exc:
        sys.exit(
            f"pairedge_node: the pairedge Python package is not importable here ({exc}); install it into the "
            "Python ROS 2 runs: `pip install '<clone of pairedge>[ros]'` (docs/ros2.md)"
        )
    pairedge_main(args)


if __name__ == "__main__":
    main()
