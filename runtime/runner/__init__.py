"""The runner behind ``pairedge run``: sources in, results out, around one
:class:`~pairedge.runtime.Pipeline`.

* :mod:`.run`: :class:`~.run.RunOptions` and :func:`~.run.run_files` (a video, an image folder, a detection
  file), the frame loop shared by every source;
* :mod:`.stream`: live cameras and network streams (reconnection with backoff, models warmed first);
* :mod:`.live`: :class:`~.live.LiveSource`, the bounded reader of a camera / RTSP / HTTP stream;
* :mod:`.inputs`: video, image-folder and detection-file readers of a run;
* :mod:`.output`: the JSON Lines and annotated-video writers;
* :mod:`.stats`: a run's statistics and its summary.

The pipeline's own stages (validation, tracking, flow, features, classifiers) are the modules beside this
package; nothing in them imports the runner.
"""
