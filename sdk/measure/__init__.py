"""The measure layer: what measures a model, above the runtime it measures and never imported by it.

``pairedge.measure.sim`` makes labelled scenes (the simulator: people, groups, activities, frames, truth);
``pairedge.measure.metrics`` scores results by each protocol's official definition (pairwise, PAR, PCP,
tracking, HOTA). Their users are the layers above: calibration and training draw scenes from the
simulator, the comparator and parity score with the metrics, and the apps (``score``, ``eval``, ``bench``,
``demo``, ``simulate``) do both (docs/architecture.md).
"""
