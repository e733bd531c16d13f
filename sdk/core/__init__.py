"""The core layer: types, errors, the model folder, readers, features, metrics by protocol, the
simulator. It imports nothing above it (docs/architecture.md)."""
