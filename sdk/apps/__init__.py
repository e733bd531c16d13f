"""The apps layer: the CLI, the ROS 2 node, the demo, bench, eval, doctor and the bundled model's
recipe. Nothing below imports it."""
