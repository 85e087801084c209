"""Executors: the numpy reference backend and the Vulkan backends, chosen through `coopnn.runtime.backends`."""
