"""TensorRT engines for Jetson: building, engine manifests, timing caches, and the readiness lint.

Nothing here imports ``tensorrt`` (or torch) at module level: the builder takes the ``tensorrt`` module as an
argument or imports it through :func:`pairedge.core.optional.require`, so ``pairedge check`` and the manifest
checks run on any machine.

The import shim and the version rules are :mod:`pairedge.gpu.tensorrt`; the engine manifest and the checks
that refuse mismatched engines sit beside the runner, :mod:`pairedge.runtime.backends.tensorrt_loader`.

- :mod:`.builder` — ONNX -> serialized engine (one optimisation profile over the pair axis).
- :mod:`.folder` — ``pairedge build``: both stages of a model folder, engines + manifests in
  ``engines/<device>-sm<cc>-trt<version>/``.
- :mod:`.timing_cache`, :mod:`.progress` — timing cache round trip, build progress.
- :mod:`.check` — ``pairedge check``: static TensorRT readiness of an ONNX model (no GPU, no TensorRT).
"""
