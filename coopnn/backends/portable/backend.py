"""The portable backend's record: the portable SPIR-V target on any Vulkan 1.3 device (lavapipe included), with
weights stored as float32 or float16 (widened to float32 as they are read), as 8-bit floats with float16 row
scales (run in their float16 arithmetic, emulated with float32 operations), as int8 (run in its integer
arithmetic with 32-bit integer operations), or in GGML's blocks Q8_0 and Q4_0 (decoded as they are read, float32
arithmetic)."""

from __future__ import annotations

from coopnn.backends.base import Examined
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.formats.fp8_e4m3 import FORMAT as FP8_E4M3
from coopnn.layouts.formats.fp8_e5m2 import FORMAT as FP8_E5M2
from coopnn.layouts.formats.int8 import FORMAT as INT8
from coopnn.layouts.formats.q4_0 import FORMAT as Q4_0
from coopnn.layouts.formats.q8_0 import FORMAT as Q8_0
from coopnn.shaders.training.gradients import FEATURES as GRADIENT_FEATURES
from coopnn.shaders.training.shader import BASE_FEATURES as TRAINING_FEATURES
from coopnn.backends.portable.target import PortableTarget, pack_program
from coopnn.backends.portable.training import PortableTrainingSession
from coopnn.backends.trained_weights import trained_entries
from coopnn.errors import CompileError
from coopnn.graph.ir import Graph
from coopnn.runtime.executable import KernelExecutable, chosen_device, device_unavailable_reason
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.kernel.program import KernelProgram

WORKGROUP_SIZE = 64


def _needs(info) -> str | None:
    if not info.features.get("vulkanMemoryModel"):
        return f"{info.name} lacks the vulkanMemoryModel feature"
    return None


class PortableBackend:
    name = "portable"
    priority = 10
    description = "portable SPIR-V on any Vulkan 1.3 device, float32 arithmetic, one invocation per sample"
    target = PortableTarget()
    formats = (FP32, FP16, FP8_E4M3, FP8_E5M2, INT8, Q8_0, Q4_0)
    trains = True
    training_options: dict[str, tuple[str, ...]] = {}
    device_features = (frozenset({"vulkanMemoryModel"}).union(*(f.shader_features for f in formats))
                       | TRAINING_FEATURES | GRADIENT_FEATURES)

    def unavailable_reason(self) -> str | None:
        return device_unavailable_reason(None, _needs)

    def examine(self, graph: Graph, weights: WeightFormat, device) -> Examined:
        why = device_unavailable_reason(device, _needs)
        if why:
            return Examined(why)
        features = chosen_device(device).features
        missing = sorted(f for f in weights.shader_features if not features.get(f))
        if missing:
            return Examined(f"{weights.name} weights need the device features {', '.join(missing)}")
        try:
            return Examined(None, lower(graph))
        except CompileError as e:
            return Examined(str(e))

    def auto_skip_reason(self, device, lowered, weights: WeightFormat) -> str | None:
        return device_unavailable_reason(device, lambda info: (
            f"{info.name} is a CPU Vulkan device, where numpy ran the same models 12 to 20 times faster (ask for "
            f"backend='portable' to use it anyway)") if info.device_type == "cpu" else None)

    def prepare(self, graph: Graph, lowered: KernelProgram, *, weights: WeightFormat, device) -> KernelExecutable:
        binary = self.target.compile(lowered, weights, WORKGROUP_SIZE)
        return KernelExecutable(binary, graph, device, lowered.sources)

    def refresh(self, executable: KernelExecutable, graph: Graph, *, weights: WeightFormat) -> bool:
        """Take the new constant values of `graph` (same structure) without compiling again, where the layout allows."""
        program = lower(graph)
        if not executable.replace_weights(pack_program(program, weights)):
            return False
        executable.sources = dict(program.sources)
        return True

    def take_trained(self, executable: KernelExecutable, session) -> bool:
        """Copy the session's float32 working weights into the model's weight buffer on the GPU; False (the host
        path then) for another backend's session or weights stored in another format."""
        if not isinstance(session, PortableTrainingSession):
            return False
        pairs = trained_entries(executable, session, session.layout.entries(FP32))
        if pairs is None or any((s.dtype, s.layout, s.stride, s.size) != (d.dtype, d.layout, d.stride, d.size)
                                for s, d in pairs.values()):
            return False
        executable.copy_into_weights(session.weights_buffer(), [(s.offset, d.offset, d.size) for s, d in pairs.values()])
        return True

    def prepare_training(self, graph: Graph, loss, optimizer, *, device, **options) -> PortableTrainingSession:
        return PortableTrainingSession(graph, loss, optimizer, device)
