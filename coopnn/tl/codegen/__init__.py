"""Compiling tensor-language functions to SPIR-V for Vulkan compute through coopnn's module builder."""
