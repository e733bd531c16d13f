"""Start the pairedge node with the package's parameter file and the camera / detections remaps.

    ros2 launch pairedge_ros pairedge.launch.py camera_topic:=/camera/color/image_raw
    detections_topic:=/yolo/detections ros2 launch pairedge_ros pairedge.launch.py
    params_file:=/path/to/my_pairedge.yaml

The node subscribes to the relative names ``image`` and ``detections`` (its ``image_topic`` and
``detections_topic`` parameters); the remaps here connect them to the camera driver's and the detector's
topics.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    """The launch description: three arguments and the pairedge node."""
    default_params = PathJoinSubstitution([FindPackageShare("pairedge_ros"), "config", "pairedge.yaml"])
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "camera_topic",
                default_value="/camera/image_raw",
                description="sensor_msgs/Image (or CompressedImage) topic of the camera",
            ),
            DeclareLaunchArgument(
                "detections_topic",
                default_value="/detections",
                description="vision_msgs/Detection2DArray topic of the person detector",
            ),
            DeclareLaunchArgument(
                "params_file",
                default_value=default_params,
                description="parameter file of the node (config/pairedge.yaml documents each one)",
            ),
            Node(
                package="pairedge_ros",
                executable="pairedge_node",
                name="pairedge",
                output="screen",
                parameters=[LaunchConfiguration("params_file")],
                remappings=[
                    ("image", LaunchConfiguration("camera_topic")),
                    ("detections", LaunchConfiguration("detections_topic")),
                ],
            ),
        ]
    )
