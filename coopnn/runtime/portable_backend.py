"""`backend="portable"`: the portable SPIR-V target on any Vulkan 1.3 device (lavapipe included)."""

from __future__ import annotations

from coopnn.errors import BackendUnavailableError, CompileError
from coopnn.graph.ir import Graph
from coopnn.runtime.kernel_backend import KernelExecutable, chosen_device, device_unavailable_reason
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.targets import target
from coopnn.shaders.targets.portable import FP16_FEATURES, WEIGHT_WIDTH, pack_program


def _needs(info) -> str | None:
    if not info.features.get("vulkanMemoryModel"):
        return f"{info.name} lacks the vulkanMemoryModel feature"
    return None


class PortableBackend:
    name = "portable"
    priority = 10
    description = "portable SPIR-V on any Vulkan 1.3 device, float32 arithmetic, one invocation per sample"

    def unavailable_reason(self) -> str | None:
        return device_unavailable_reason(None, _needs)

    def unsupported_reason(self, graph: Graph, weights: str, device) -> str | None:
        if weights not in WEIGHT_WIDTH:
            return f"weight format {weights!r} is not supported; supported: {', '.join(WEIGHT_WIDTH)}"
        why = device_unavailable_reason(device, _needs)
        if why:
            return why
        features = chosen_device(device).features
        missing = sorted(f for f in FP16_FEATURES if not features.get(f)) if weights == "fp16" else []
        if missing:
            return f"fp16 weights need the device features {', '.join(missing)}"
        try:
            lower(graph)
        except CompileError as e:
            return str(e)
        return None

    def auto_skip_reason(self, device) -> str | None:
        try:
            info = chosen_device(device)
        except BackendUnavailableError as e:
            return str(e)
        if info.device_type == "cpu":
            return (f"{info.name} is a CPU Vulkan device, where numpy ran the same models 12 to 20 times faster "
                    f"(ask for backend='portable' to use it anyway)")
        return None

    def prepare(self, graph: Graph, *, weights: str, device) -> KernelExecutable:
        binary = target("portable").compile(lower(graph), weights, 64)
        return KernelExecutable(binary, graph, device)

    def refresh(self, executable: KernelExecutable, graph: Graph, *, weights: str) -> bool:
        """Take the new constant values of `graph` (same structure) without compiling again, where the layout allows."""
        return executable.replace_weights(pack_program(lower(graph), weights))
