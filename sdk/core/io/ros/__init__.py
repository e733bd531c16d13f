"""ROS 2 logs as files (no ROS installation needed): rosbag2 folders, ``.mcap`` and ``.db3`` files.

:mod:`~pairedge.core.io.ros.storage` and :mod:`~pairedge.core.io.ros.mcap` check a log before rosbags (the
optional ``pairedge[ros]`` extra) reads it: regular files, an MCAP file's record framing, bounded chunk
inflation, sqlite3 messages measured first. :mod:`~pairedge.core.io.ros.msgdefs` is the rosbags type store
of the message types pairedge reads and writes, :mod:`~pairedge.core.io.ros.messages` the conversions
between those messages and pairedge's types. Running the runtime over a log, and the live node, are the
apps' (:mod:`pairedge.apps.ros`).
"""
