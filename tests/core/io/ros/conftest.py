"""The ROS 2 log fixtures (tests/helpers/ros_logs.py)."""

from ros_logs import Message, frame_messages, sim_frames, write_messages  # noqa: F401
