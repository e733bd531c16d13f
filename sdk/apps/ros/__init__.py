"""pairedge on ROS 2: read robot logs (rosbag2 sqlite3 / MCAP), write results back, and a live node.

Everything here but :mod:`pairedge.apps.ros.node` works without a ROS installation through the pure-Python
``rosbags`` library (``pip install '.[ros]'``): :mod:`~pairedge.apps.ros.bag` runs a log through the
runtime (``pairedge run LOG``), :mod:`~pairedge.apps.ros.write` records frames and detections as a log,
:mod:`~pairedge.apps.ros.runner` is the ROS-free core that the bag path and the node share, and
:mod:`~pairedge.apps.ros.node` is the rclpy node shell for a robot (started by the ament_python package in
``ros2/pairedge_ros``) around :mod:`~pairedge.apps.ros.node_core`, the node without rclpy: its parameters are
one table (:mod:`~pairedge.apps.ros.node_params`), its QoS profiles :mod:`~pairedge.apps.ros.qos`, its
latest-frame worker thread :mod:`~pairedge.apps.ros.worker` and its messages
:mod:`~pairedge.apps.ros.outputs`. Reading a log is the core's (:mod:`pairedge.core.io.ros`: the checks
before rosbags reads it, the type store, the message conversions); :mod:`~pairedge.apps.ros.bagcopy` writes
``--out-bag`` aside and moves it into place whole.
"""
