"""ROS 2 package of pairedge: the ``pairedge_node`` executable, its launch file and its parameter file.

The node's code is ``pairedge.apps.ros.node`` (pip package ``pairedge``); :mod:`pairedge_ros.node` starts it.
"""
