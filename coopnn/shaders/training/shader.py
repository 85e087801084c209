"""Training kernels as `Binary` records (`training_kernel`) and the frame they are built in: plain SPIR-V 1.6 with the
Vulkan memory model, workgroups of 64 invocations along x, one invocation per element, storage buffers declared per
kernel."""

from __future__ import annotations

from coopnn.shaders.targets.base import Binary, Binding, PushConstant, ShaderFrame

WORKGROUP_SIZE = 64
HALVES_PER_WORD = 8  # float16 values in one 16-byte element (`word_view`)
BASE_FEATURES = frozenset({"vulkanMemoryModel"})


def training_kernel(name: str, spirv: bytes, workgroup_size: tuple[int, int, int], binding_count: int,
                    push_constants: tuple[PushConstant, ...], features: frozenset[str]) -> Binary:
    """One training kernel as a `Binary`: `binding_count` storage buffers at bindings 0.. of set 0, no weight image."""
    bindings = tuple(Binding(i, "buffer", f"buffer {i}", 0) for i in range(binding_count))
    return Binary("training", spirv, "main", workgroup_size, bindings, push_constants, None, frozenset(features),
                  frozenset(), name)


def training_frame(push_constants: tuple[PushConstant, ...]) -> ShaderFrame:
    """A frame with no storage buffers yet (`storage_buffer` adds them) whose `sample` is the element index."""
    return ShaderFrame((), 32, WORKGROUP_SIZE, push_constants=push_constants)


def storage_buffer(frame: ShaderFrame, binding: int, scalar, *, writable: bool, name: str) -> None:
    """Declares binding `binding` as a runtime array of `scalar` (tightly packed); `frame.element_pointer` reaches it."""
    frame.buffers[binding] = buffer_view(frame, binding, scalar, writable=writable, name=name)


def _buffer_variable(frame: ShaderFrame, binding: int, element, stride: int, *, writable: bool, name: str,
                     block_name: str | None = None):
    """A StorageBuffer variable for binding `binding` of set 0: a Block holding a runtime array of `element`."""
    m = frame.module
    block = m.type_struct([m.type_runtime_array(element, stride=stride)], offsets=[0], decorations=["Block"],
                          name=block_name)
    decorations = [("DescriptorSet", 0), ("Binding", binding)] + ([] if writable else ["NonWritable"])
    return m.global_variable("StorageBuffer", block, name=name, decorations=decorations)


def buffer_view(frame: ShaderFrame, binding: int, scalar, *, writable: bool, name: str):
    """Binding `binding` once more, as a runtime array of `scalar` (tightly packed), beside its declaration in
    `frame.buffers`: a variable for access chains of its own."""
    stride = frame.module.scalar_widths(scalar).pop() // 8
    return _buffer_variable(frame, binding, scalar, stride, writable=writable, name=name)


def vector_view(frame: ShaderFrame, binding: int, scalar, lanes: int, *, writable: bool, name: str):
    """Binding `binding` as a runtime array of vectors of `lanes` `scalar`s (tightly packed)."""
    m = frame.module
    stride = lanes * m.scalar_widths(scalar).pop() // 8
    return _buffer_variable(frame, binding, m.type_vector(scalar, lanes), stride, writable=writable, name=name)


def word_view(frame: ShaderFrame, binding: int, *, writable: bool):
    """Binding `binding` once more, as a runtime array of 16-byte elements (`word_type`: HALVES_PER_WORD float16
    values), for copies of whole rows of float16 values between it and workgroup memory."""
    return _buffer_variable(frame, binding, word_type(frame), 16, writable=writable, name=f"words_{binding}",
                            block_name="Words")


def word_type(frame: ShaderFrame):
    """A 16-byte element: four 32-bit words."""
    return frame.module.type_vector(frame.u32, 4)


def load(frame: ShaderFrame, binding: int, index, scalar=None, memory: tuple[str, ...] = ()):
    """Element `index` of binding `binding` (float32 unless `scalar` says otherwise); `memory`: memory operands
    ("NonPrivatePointer" where another work-group's access is ordered against it by an atomic)."""
    scalar = scalar if scalar is not None else frame.f32
    return frame.main.ops.load(scalar, frame.element_pointer(binding, index, scalar), *memory)


def store(frame: ShaderFrame, binding: int, index, value, scalar=None, memory: tuple[str, ...] = ()) -> None:
    frame.main.ops.store(frame.element_pointer(binding, index, scalar), value, *memory)


def finish(name: str, frame: ShaderFrame, binding_count: int, features: frozenset[str]) -> Binary:
    return training_kernel(name, frame.finish(), frame.workgroup_size, binding_count, frame.push_constants,
                           BASE_FEATURES | features)
