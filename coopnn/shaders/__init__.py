"""SPIR-V generation: the module builder (spirv/), the kernel level (kernel/) and one file per target (targets/)."""
