"""``pairedge eval``: protocol metrics of a model (any precision, any backend) on one source, and pooling.

:func:`~pairedge.apps.evaluation.evaluate.evaluate` scores ONE stream (a simulator scene, a video log, a CAD
sequence) and returns an :class:`~pairedge.apps.evaluation.evaluate.EvalReport` whose counts pool exactly
(:func:`~pairedge.apps.evaluation.evaluate.pool`), so many sources can be evaluated in parallel and merged.
"""
