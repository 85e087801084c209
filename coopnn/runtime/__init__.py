"""What runs compiled kernels on a Vulkan device: the executable (`executable`), the host path, host arrays and the
Vulkan layer (`vk`), shared by every Vulkan backend."""
