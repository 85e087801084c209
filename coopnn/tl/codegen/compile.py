"""`compile_function(function, launch)`: a checked tensor-language function as a SPIR-V compute module for Vulkan
(SPIR-V 1.6, Vulkan memory model), with its calling convention (codegen/layout.py) and the device features it needs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from coopnn.shaders.spirv import Module
from coopnn.tl import ast
from coopnn.tl.codegen import emit_collectives, emit_control, emit_coopmatrix, emit_memory, emit_scalar  # noqa: F401
from coopnn.tl.codegen.emitter import Emitter, GroupRef, MemrefValue, Typed
from coopnn.tl.codegen.layout import ARGUMENT_BINDING, Slot, argument_slots
from coopnn.tl.codegen.types import storage_type
from coopnn.tl.launch import Launch
from coopnn.tl.types import GroupType, ScalarType

ALWAYS_FEATURES = frozenset({"shaderInt64", "vulkanMemoryModel"})
FEATURES_BY_TYPE = {
    "i8": {"shaderInt8", "storageBuffer8BitAccess"},
    "i16": {"shaderInt16", "storageBuffer16BitAccess"},
    "f16": {"shaderFloat16", "shaderInt16", "storageBuffer16BitAccess"},
    "bf16": {"shaderInt16", "storageBuffer16BitAccess"},
    "f64": {"shaderFloat64"},
    "c64": {"shaderFloat64"},
}


@dataclass(frozen=True)
class CompiledFunction:
    name: str
    spirv: bytes
    launch: Launch
    slots: tuple[Slot, ...]
    binding_count: int
    features: frozenset[str]
    extensions: frozenset[str] = frozenset()


def scalar_types(node) -> set[str]:
    """Names of every scalar type a syntax tree mentions."""
    found: set[str] = set()
    if isinstance(node, ScalarType):
        found.add(node.name)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for field in dataclasses.fields(node):
            found |= scalar_types(getattr(node, field.name))
    elif isinstance(node, tuple):
        for item in node:
            found |= scalar_types(item)
    return found


def features_for(function: ast.Function) -> frozenset[str]:
    """The Vulkan features a function's compiled module needs, from the types it uses."""
    features = set(ALWAYS_FEATURES)
    for name in scalar_types(function):
        features |= FEATURES_BY_TYPE.get(name, set())
    return frozenset(features)


def _buffer(m: Module, element: ScalarType, binding: int, name: str):
    stored = storage_type(m, element)
    array = m.type_runtime_array(stored, stride=element.size if element.name != "bf16" else 2)
    block = m.type_struct([array], offsets=[0], decorations=["Block"])
    return m.global_variable("StorageBuffer", block, name=name,
                             decorations=[("DescriptorSet", 0), ("Binding", binding)])


def _dimension(e: Emitter, static: int | None, slot: int):
    return e.index(static) if static is not None else e.argument_slot(slot)


def _scalar_argument(e: Emitter, t: ScalarType, slot: int):
    m = e.m
    bits = e.argument_slot(slot)
    pair = m.type_vector(e.u32, 2)
    low = e.fn.ops.extract(e.u32, e.fn.ops.bitcast(pair, bits), 0)
    if t.is_bool:
        return e.fn.ops.int_not_equal(e.bool, bits, e.index(0))
    if t.is_integer:
        return bits if t.size == 8 else e.fn.ops.int_convert(e.value_type(t), bits)
    if t.name in ("f64", "c32"):
        return e.fn.ops.bitcast(e.value_type(t), bits)
    if t.name == "c64":
        parts = [e.fn.ops.bitcast(m.type_float(64), e.argument_slot(slot + k)) for k in (0, 1)]
        return e.fn.ops.construct(e.value_type(t), *parts)
    if t.name == "f32":
        return e.fn.ops.bitcast(e.value_type(t), low)
    if t.name == "f16":
        return e.fn.ops.bitcast(e.value_type(t), e.fn.ops.uint_convert(m.type_int(16, False), low))
    return e.fn.ops.bitcast(m.type_float(32), e.fn.ops.shift_left(e.u32, low, e.word(16)))


def _bind(e: Emitter, argument: ast.Argument, slot: Slot):
    t = argument.type
    if isinstance(t, ScalarType):
        return Typed(_scalar_argument(e, t, slot.slot), t)
    memref = t.memref if isinstance(t, GroupType) else t
    variable = _buffer(e.m, memref.element, slot.binding, argument.value.name)
    associated = e.fn.ops.int_not_equal(e.bool, e.argument_slot(slot.slot), e.index(0))
    if isinstance(t, GroupType):
        return GroupRef(variable, memref.element, memref.order, e.argument_slot(slot.slot + 1),
                        e.argument_slot(slot.slot + 2), associated)
    order = memref.order
    shape = tuple(_dimension(e, s, slot.slot + 1 + k) for k, s in enumerate(memref.shape))
    strides = tuple(_dimension(e, s, slot.slot + 1 + order + k) for k, s in enumerate(memref.strides))
    return MemrefValue(variable, "StorageBuffer", memref.element, e.index(0), shape, strides, associated, memref)


def compile_function(function: ast.Function, launch: Launch) -> CompiledFunction:
    """The SPIR-V of a checked function, for `launch`."""
    m = Module()
    words = m.type_runtime_array(m.type_int(32, False), stride=4)
    argument_block = m.type_struct([words], offsets=[0], decorations=["Block"])
    argument_buffer = m.global_variable("StorageBuffer", argument_block, name="arguments",
                                        decorations=[("DescriptorSet", 0), ("Binding", ARGUMENT_BINDING),
                                                     "NonWritable"])
    e = Emitter(m, launch, argument_buffer)
    slots, _ = argument_slots(function)
    defines = {a.value.name: _bind(e, a, s) for a, s in zip(function.arguments, slots)}
    e.run_region(function.body, defines)
    e.fn.return_()
    m.entry_point(e.fn, "main", "GLCompute", local_size=(*launch.work_group_size, 1))
    bindings = 1 + sum(1 for s in slots if s.binding is not None)
    return CompiledFunction(function.name, m.to_bytes(), launch, slots, bindings,
                            features_for(function) | e.features, frozenset(e.extensions))

