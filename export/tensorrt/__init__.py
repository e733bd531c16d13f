"""TensorRT engines for Jetson: building, engine manifests, timing caches, and the readiness lint.

Nothing here imports ``tensorrt`` (or torch) at module level: the builder takes the ``tensorrt`` module as an
argument or imports it through :func:`pairedge._optional.require`, so ``pairedge check`` and the manifest
checks run on any machine.

- :mod:`.versions` — the one place where TensorRT 10.3 / 10.12+ / 11.x differ.
- :mod:`.builder` — ONNX -> serialized engine (one optimisation profile over the pair axis).
- :mod:`.manifest` — the engine manifest beside every engine, and the checks that refuse mismatches.
- :mod:`.folder` — ``pairedge build``: both stages of a model folder, engines + manifests in
  ``engines/<device>-sm<cc>-trt<version>/``.
- :mod:`.timing_cache`, :mod:`.progress`, :mod:`.logger` — timing cache round trip, build progress,
  TensorRT's log routed to :mod:`logging`.
- :mod:`.check` — ``pairedge check``: static TensorRT readiness of an ONNX model (no GPU, no TensorRT).
"""
