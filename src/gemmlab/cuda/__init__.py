"""The CUDA runtime layer: device discovery, NVRTC compilation with a cache, launches."""
