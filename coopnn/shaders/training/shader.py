"""A compiled training kernel (`ComputeShader`: SPIR-V plus what binding and dispatching it takes) and the frame the
training kernels are built in: plain SPIR-V 1.6 with the Vulkan memory model, workgroups of 64 invocations along x,
one invocation per element, storage buffers declared per kernel."""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.shaders.targets.base import PushConstant, ShaderFrame, pack_push_constants, push_constant_size

WORKGROUP_SIZE = 64
BASE_FEATURES = frozenset({"vulkanMemoryModel"})


@dataclass(frozen=True)
class ComputeShader:
    """One training kernel: storage buffers at bindings 0..binding_count-1 of set 0, then `push_constants`."""

    name: str
    spirv: bytes
    workgroup_size: tuple[int, int, int]
    binding_count: int
    push_constants: tuple[PushConstant, ...]
    features: frozenset[str]  # Vulkan device features the module needs

    @property
    def push_constant_size(self) -> int:
        return push_constant_size(self.push_constants)

    def pack_push(self, **values) -> bytes:
        """Every push constant by name (see `pack_push_constants`)."""
        return pack_push_constants(self.push_constants, self.name, values)


def training_frame(push_constants: tuple[PushConstant, ...]) -> ShaderFrame:
    """A frame with no storage buffers yet (`storage_buffer` adds them) whose `sample` is the element index."""
    return ShaderFrame((), 32, WORKGROUP_SIZE, push_constants=push_constants)


def storage_buffer(frame: ShaderFrame, binding: int, scalar, *, writable: bool, name: str) -> None:
    """Declares binding `binding` as a runtime array of `scalar` (tightly packed); `frame.element_pointer` reaches it."""
    m = frame.module
    stride = m.scalar_widths(scalar).pop() // 8
    block = m.type_struct([m.type_runtime_array(scalar, stride=stride)], offsets=[0], decorations=["Block"])
    decorations = [("DescriptorSet", 0), ("Binding", binding)] + ([] if writable else ["NonWritable"])
    frame.buffers[binding] = m.global_variable("StorageBuffer", block, name=name, decorations=decorations)


def load(frame: ShaderFrame, binding: int, index, scalar=None):
    """Element `index` of binding `binding` (float32 unless `scalar` says otherwise)."""
    scalar = scalar if scalar is not None else frame.f32
    return frame.main.emit("OpLoad", scalar, frame.element_pointer(binding, index, scalar))


def store(frame: ShaderFrame, binding: int, index, value, scalar=None) -> None:
    frame.main.emit("OpStore", frame.element_pointer(binding, index, scalar), value)


def finish(name: str, frame: ShaderFrame, binding_count: int, features: frozenset[str]) -> ComputeShader:
    return ComputeShader(name, frame.finish(), frame.workgroup_size, binding_count, frame.push_constants,
                         BASE_FEATURES | features)
