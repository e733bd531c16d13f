"""The built-in tracker's parts: the constant-velocity Kalman filter (:mod:`.kalman`) and the colour
appearance of a person box (:mod:`.appearance`). The tracker itself is :mod:`pairedge.runtime.tracker`."""
