"""The core layer: types, errors, the model folder, readers of every file format, pair features. It imports
nothing above it (docs/architecture.md); the simulator and the metrics are in the measure layer above the
runtime (:mod:`pairedge.measure`)."""
