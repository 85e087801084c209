"""What every target produces (a `Binary`), the interface of a target, and the shader scaffolding they share.

The shared interface of every compiled model: binding 0 holds the weights, then one binding per graph input and
one per graph output, each a tightly packed array of `features` values per sample (float32, or float16 where
the target says so); a push constant holds
the number of samples in the dispatch; invocation i of the dispatch handles sample i.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import WeightImage
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.spirv import Module
from coopnn.shaders.targets.sampler import SAMPLER_PUSH_CONSTANTS, drawn_row

# What a shader storing or computing float16 values needs the device to enable.
FP16_FEATURES = FP16.shader_features


@dataclass(frozen=True)
class Binding:
    index: int
    role: str  # "weights", "input", "output", a training step's "tape", "loss", "state" and
    # "table_gradient", or "buffer" (training kernels)
    name: str  # the graph input or output, or what the buffer holds
    features: int  # values per sample (0 for weights)
    dtype: str = "f32"  # element type of input and output buffers: "f32" or "f16" (the host converts)

    @property
    def itemsize(self) -> int:
        return 2 if self.dtype == "f16" else 4

    @property
    def numpy_dtype(self):
        return np.float16 if self.dtype == "f16" else np.float32


@dataclass(frozen=True)
class PushConstant:
    name: str
    offset: int
    type: str  # "u32" or "f32"


def push_constant_block(*fields: tuple[str, str]) -> tuple[PushConstant, ...]:
    """Push constants (name, type) packed in order, four bytes each."""
    return tuple(PushConstant(name, 4 * i, type) for i, (name, type) in enumerate(fields))


_PUSH_FORMAT = {"u32": "<I", "f32": "<f"}


def push_constant_size(push_constants: tuple[PushConstant, ...]) -> int:
    return max((p.offset + 4 for p in push_constants), default=0)


def pack_push_constants(push_constants: tuple[PushConstant, ...], owner: str, values: dict) -> bytes:
    """Every push constant, by name, packed little-endian at its offset (u32 from ints or bools, f32 from floats);
    ValueError naming `owner` for missing, unknown or unrepresentable values."""
    names = [p.name for p in push_constants]
    missing = [n for n in names if n not in values]
    unknown = sorted(set(values) - set(names))
    if missing or unknown:
        raise ValueError(f"{owner} takes the push constants {names}; missing {missing}, unknown {unknown}")
    packed = bytearray(push_constant_size(push_constants))
    for p in push_constants:
        try:
            struct.pack_into(_PUSH_FORMAT[p.type], packed, p.offset, values[p.name])
        except struct.error as exc:
            raise ValueError(f"{owner}: push constant {p.name} ({p.type}) cannot hold {values[p.name]!r}: {exc}") from None
    return bytes(packed)


PUSH_CONSTANTS = push_constant_block(("count", "u32"))
# A training step's kernel: `count` invocations (the batch, padded where the target wants whole groups of samples),
# `batch` real samples, the tape's `capacity` in samples, and the sampler's (`coopnn.shaders.targets.sampler`): the
# `rows` of the data set the inputs and targets are read from, the run's `seed`, and `whole` (rows read in order).
TRAINING_PUSH_CONSTANTS = push_constant_block(("count", "u32"), ("batch", "u32"), ("capacity", "u32"),
                                              *SAMPLER_PUSH_CONSTANTS)
# The words of a training session's state buffer (role "state"), which the kernels of a step read and update on the
# device so that steps run back to back without the host: `status` (nonzero when a gradient was not finite), the
# `loss_scale` the loss gradient is multiplied by (float32), the `good_steps` since the scale last changed, the
# optimizer `steps` taken, the batches `drawn` (every step, skipped or not, numbering the sampler's batches and
# the loss history's rows) and the optimizer's work-groups `finished` in this step (zero between steps: the last to
# finish ends the step, `coopnn.shaders.training.step_state`) (u32). A step kernel's `uniform` reads a word named here
# from it.
TRAINING_STATE_FIELDS = ("status", "loss_scale", "good_steps", "steps", "drawn", "finished")


@dataclass(frozen=True)
class Binary:
    """A compiled kernel, the one record every kernel is run from: SPIR-V, how to bind and dispatch it, what the
    device must enable, and for a model's kernel the image of the weight buffer it reads."""

    target: str  # the target that compiled it ("training" for the kernels shared by every training step)
    spirv: bytes
    entry_point: str
    workgroup_size: tuple[int, int, int]
    bindings: tuple[Binding, ...]  # storage buffers at bindings 0.. of set 0
    push_constants: tuple[PushConstant, ...]
    weight_image: WeightImage | None  # the weight buffer's bytes and where each constant sits in them
    features: frozenset[str]  # Vulkan device features the module needs
    extensions: frozenset[str]  # Vulkan device extensions the module needs
    name: str = ""  # what pipelines and error messages call it
    # the target's text form of the kernel where it says more than the kernel program's (the tile kernels of coopmat2
    # and coopmat); empty: the kernel program's
    text: str = ""

    @property
    def binding_count(self) -> int:
        return len(self.bindings)

    @property
    def push_constant_size(self) -> int:
        return push_constant_size(self.push_constants)

    def pack_push(self, **values) -> bytes:
        return pack_push_constants(self.push_constants, self.name or f"the {self.target} kernel", values)


class Target(Protocol):
    name: str

    def compile(self, program: KernelProgram, weights: WeightFormat, workgroup_size: int = ...) -> Binary:
        """SPIR-V for `program` with `weights`; `workgroup_size` (samples per work-group) defaults to the target's
        own."""


def bindings_of(program: KernelProgram) -> tuple[Binding, ...]:
    """Weights, inputs, outputs, then a training kernel's tape, loss, state and the gradient its encoding's tables
    are accumulated into (named after their parameters)."""
    bindings = [Binding(0, "weights", "weights", 0)]
    for p in (program.params_of("input") + program.params_of("output") + program.params_of("loss", "tape")
              + program.params_of("state") + program.params_of("table_gradient")):
        bindings.append(Binding(len(bindings), p.role, p.graph_name or p.name, p.shape[0]))
    return tuple(bindings)


def push_constants_of(program: KernelProgram) -> tuple[PushConstant, ...]:
    return TRAINING_PUSH_CONSTANTS if program.params_of("tape") else PUSH_CONSTANTS


class ShaderFrame:
    """A compute shader's common frame: typed storage buffers per binding, the push constant, and `main` with the
    sample index computed and, with `bounds_check`, out-of-range invocations returned early (kernels whose
    invocations cooperate on matrices turn it off: every invocation of the work-group must take part). Inputs are
    read at `data_row`: the sample itself, or in a training step's kernel the row its sampler draws (`draw_rows`)."""

    def __init__(self, bindings: tuple[Binding, ...], weight_type_width: int, workgroup_size: int,
                 push_constants: tuple[PushConstant, ...] = PUSH_CONSTANTS, *, bounds_check: bool = True):
        m = self.module = Module()
        self.f32, self.u32, self.bool = m.type_float(32), m.type_int(32, False), m.type_bool()
        # 8-bit floats have no plain storage type (one needs Float8EXT): their buffers are read as 32-bit words
        # (`coopnn.shaders.targets.narrow_floats`)
        self.weight_words = weight_type_width < 16
        self.weight_scalar = self.u32 if self.weight_words else m.type_float(weight_type_width)
        weight_stride = 4 if self.weight_words else weight_type_width // 8
        self.buffers: dict[int, object] = {}
        for b in bindings:
            scalar = self.weight_scalar if b.role == "weights" else self.f32
            array = m.type_runtime_array(scalar, stride=weight_stride if b.role == "weights" else 4)
            block = m.type_struct([array], offsets=[0], decorations=["Block"],
                                  name="Weights" if b.role == "weights" else "Samples")
            decorations = [("DescriptorSet", 0), ("Binding", b.index)]
            if b.role not in ("output", "table_gradient"):
                decorations.insert(0, "NonWritable")
            self.buffers[b.index] = m.global_variable("StorageBuffer", block, name=f"{b.role}_{b.index}",
                                                      decorations=decorations)
        self.state_binding = next((b.index for b in bindings if b.role == "state"), None)
        if push_constants[0].name != "count":
            raise ValueError("the first push constant is the invocation count the frame checks")
        self.push_constants = push_constants
        push_types = [self.u32 if p.type == "u32" else self.f32 for p in push_constants]
        push_block = m.type_struct(push_types, offsets=[p.offset for p in push_constants], decorations=["Block"],
                                   name="Push", member_names=[p.name for p in push_constants])
        self.push = m.global_variable("PushConstant", push_block, name="push")
        invocation = m.builtin_input("GlobalInvocationId", m.type_vector(self.u32, 3))
        self.main = fn = m.function(m.type_void(), name="main")
        self.zero = m.constant(self.u32, 0)
        self.invocation_id = gid = fn.ops.load(m.type_vector(self.u32, 3), invocation)
        self.sample = fn.ops.extract(self.u32, gid, 0, name="sample")
        self.push_values: dict[str, object] = {}
        count = self.push_value("count")
        if bounds_check:
            with fn.if_(fn.ops.uint_at_least(self.bool, self.sample, count)):
                fn.return_()
        self.data_row = self.sample  # the row of the inputs (and targets) `sample` reads (`draw_rows`)
        self.workgroup_size = (workgroup_size, 1, 1)

    def draw_rows(self) -> None:
        """In a training step's kernel (the sampler's push constants and a state binding), make `data_row` the row
        the sampler draws for `sample` (`coopnn.shaders.targets.sampler`); elsewhere it stays the sample. Called once
        the bindings are declared, where it dominates every read of an input."""
        self.data_row = self.row_of(self.sample)

    def row_of(self, sample):
        """The data row sample `sample` (a u32 id) reads: the one the sampler draws in a training step's kernel,
        elsewhere the sample itself."""
        if self.state_binding is not None and "seed" in (p.name for p in self.push_constants):
            return drawn_row(self, sample, TRAINING_STATE_FIELDS.index("drawn"))
        return sample

    def push_value(self, name: str):
        """The push constant `name`, loaded once (at its first use, which must dominate later ones)."""
        if name not in self.push_values:
            index = [p.name for p in self.push_constants].index(name)
            scalar = self.u32 if self.push_constants[index].type == "u32" else self.f32
            pointer = self.main.ops.access_chain(self.module.type_pointer("PushConstant", scalar), self.push,
                                                 self.uint(index))
            self.push_values[name] = self.main.ops.load(scalar, pointer)
        return self.push_values[name]

    def uniform_value(self, name: str):
        """The float32 value `name` every invocation shares: a push constant, or a word of the training state buffer
        (`TRAINING_STATE_FIELDS`) when the push constants have no such field; loaded once, like `push_value`."""
        if name in (p.name for p in self.push_constants):
            return self.push_value(name)
        if name not in self.push_values:
            if self.state_binding is None or name not in TRAINING_STATE_FIELDS:
                raise ValueError(f"no push constant or training state word named {name!r}")
            pointer = self.element_pointer(self.state_binding, self.uint(TRAINING_STATE_FIELDS.index(name)))
            self.push_values[name] = self.main.ops.load(self.f32, pointer)
        return self.push_values[name]

    def element_pointer(self, binding: int, index, scalar=None):
        """A pointer to element `index` (a u32 id) of the runtime array in `binding`."""
        m = self.module
        pointee = scalar if scalar is not None else self.f32
        return self.main.ops.access_chain(m.type_pointer("StorageBuffer", pointee), self.buffers[binding],
                                          self.zero, index)

    def uint(self, value: int):
        return self.module.constant(self.u32, value)

    def finish(self) -> bytes:
        self.main.return_()
        self.module.entry_point(self.main, "main", "GLCompute", local_size=self.workgroup_size)
        return self.module.to_bytes()
