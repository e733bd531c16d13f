"""The streaming runtime a robot embeds: pipeline, flow backends, classifier backends.

Never imports torch; TensorRT / CUDA bindings are imported lazily by the backends that need them.
"""
