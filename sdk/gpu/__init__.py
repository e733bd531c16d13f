"""The GPU layer: the one CUDA layer (``pairedge.gpu.cuda``). Imports only the core."""
