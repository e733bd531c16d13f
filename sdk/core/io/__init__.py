"""Readers and writers of real dataset formats (MOT, JRDB, Collective Activity, PETS/CVML, stickmen,
JRDB-PAR) and of ROS 2 logs (:mod:`pairedge.core.io.ros`: rosbag2, MCAP)."""
