"""Emitting the memory instructions: element loads and stores, views (subview, expand, fuse), size, associated,
alloca (a workgroup array), barriers, and atomics (integer ones directly, floating ones as compare-exchange loops on
their bits, so they need no float-atomic feature; complex ones part by part)."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.codegen.emit_scalar import binary
from coopnn.shaders.spirv import Id
from coopnn.tl.codegen.emitter import Emitter, GroupRef, MemrefValue, Typed, emits
from coopnn.tl.codegen.types import from_storage, storage_type, to_storage
from coopnn.tl.types import BOOL, INDEX, ScalarType
from coopnn.shaders.spirv.ops import Ops

VULKAN_SCOPES = {"cross_device": "Device", "device": "Device", "work_group": "Workgroup", "subgroup": "Subgroup"}
VULKAN_SEMANTICS = {"relaxed": (), "acquire": ("Acquire",), "release": ("Release",),
                    "acquire_release": ("AcquireRelease",), "sequentially_consistent": ("AcquireRelease",)}


def _indices(e: Emitter, values) -> list:
    return [e.value(v).id for v in values]


def group_member(e: Emitter, group: GroupRef, index) -> MemrefValue:
    """Memref `index` of a group: its offset, sizes and strides from the group's table."""
    width = 1 + 2 * group.order
    row = e.fn.ops.int_add(e.i64, group.table, e.fn.ops.int_mul(e.i64, index, e.index(width)))
    slot = [e.argument_slot(e.fn.ops.int_add(e.i64, row, e.index(k))) for k in range(width)]
    return MemrefValue(group.variable, "StorageBuffer", group.element, slot[0], tuple(slot[1:1 + group.order]),
                       tuple(slot[1 + group.order:]), group.associated)


@emits(ast.Load)
def _load(e: Emitter, i: ast.Load):
    tensor = e.value(i.tensor)
    if isinstance(tensor, GroupRef):
        return (group_member(e, tensor, e.value(i.indices[0]).id),)
    flat = e.flat_index(tensor, _indices(e, i.indices))
    return (Typed(e.load_element(tensor, flat), i.type),)


@emits(ast.Store)
def _store(e: Emitter, i: ast.Store):
    tensor = e.value(i.tensor)
    e.store_element(tensor, e.flat_index(tensor, _indices(e, i.indices)), e.value(i.value).id)
    return ()


def _scope_and_semantics(e: Emitter, atomic: ast.Atomic, memref: MemrefValue):
    if memref.element.component().size == 8:
        e.m.capability("Int64Atomics")
        e.features.add("shaderBufferInt64Atomics" if memref.storage_class == "StorageBuffer"
                       else "shaderSharedInt64Atomics")
    storage = "UniformMemory" if memref.storage_class == "StorageBuffer" else "WorkgroupMemory"
    semantics = VULKAN_SEMANTICS[atomic.semantics]
    return (e.m.enum_constant("Scope", VULKAN_SCOPES[atomic.scope]),
            e.m.enum_constant("MemorySemantics", *semantics, *((storage,) if semantics else ())) if semantics
            else e.m.enum_constant("MemorySemantics", "Relaxed"))


def _parts(e: Emitter, memref: MemrefValue, flat):
    """(pointer, element type) of each part an atomic touches: the element, or a complex one's two halves; floating
    parts are stored as their bits (see codegen/types.py)."""
    element = memref.element
    if not element.is_complex:
        return [(e.element_pointer(memref, flat), element)]
    part = element.component()
    vector_pointer = e.element_pointer(memref, flat)
    pointer = e.m.type_pointer(memref.storage_class, storage_type(e.m, part))
    return [(e.fn.ops.access_chain(pointer, vector_pointer, e.word(k)), part) for k in (0, 1)]


def _check_atomic_type(e: Emitter, i, element: ScalarType) -> None:
    if element.component().size < 4:
        e.fail(i, f"atomics on {element} are not supported by the SPIR-V compiler (32- and 64-bit types are)")


def atomic_load_element(e: Emitter, memref: MemrefValue, flat, atomic: ast.Atomic, where) -> Id:
    """The element at `flat`, loaded atomically (a complex one part by part)."""
    _check_atomic_type(e, where, memref.element)
    scope, semantics = _scope_and_semantics(e, atomic, memref)
    values = [from_storage(e.fn, part, e.fn.ops.atomic_load(storage_type(e.m, part), pointer, scope, semantics))
              for pointer, part in _parts(e, memref, flat)]
    return values[0] if len(values) == 1 else e.fn.ops.construct(e.value_type(memref.element), *values)


@emits(ast.AtomicLoad)
def _atomic_load(e: Emitter, i: ast.AtomicLoad):
    tensor = e.value(i.tensor)
    flat = e.flat_index(tensor, _indices(e, i.indices))
    return (Typed(atomic_load_element(e, tensor, flat, i.atomic, i), i.type),)


def _split(e: Emitter, value: Typed) -> list:
    if not value.type.is_complex:
        return [value.id]
    part = e.value_type(value.type.component())
    return [e.fn.ops.extract(part, value.id, k) for k in (0, 1)]


def atomic_store_element(e: Emitter, memref: MemrefValue, flat, value: Typed, atomic: ast.Atomic, where) -> None:
    _check_atomic_type(e, where, memref.element)
    scope, semantics = _scope_and_semantics(e, atomic, memref)
    for (pointer, part), part_value in zip(_parts(e, memref, flat), _split(e, value)):
        e.fn.ops.atomic_store(pointer, scope, semantics, to_storage(e.fn, part, part_value))


@emits(ast.AtomicStore)
def _atomic_store(e: Emitter, i: ast.AtomicStore):
    tensor = e.value(i.tensor)
    flat = e.flat_index(tensor, _indices(e, i.indices))
    atomic_store_element(e, tensor, flat, e.value(i.value), i.atomic, i)
    return ()


INTEGER_UPDATES = {"add": Ops.atomic_int_add, "max": Ops.atomic_int_max, "min": Ops.atomic_int_min}


def atomic_update(e: Emitter, op: str, memref: MemrefValue, flat, value: Typed, atomic: ast.Atomic) -> Typed:
    """Applies `op` atomically at element `flat`; the value fetched before the update."""
    scope, semantics = _scope_and_semantics(e, atomic, memref)
    fetched = []
    for (pointer, part), operand in zip(_parts(e, memref, flat), _split(e, value)):
        if part.is_integer:
            fetched.append(INTEGER_UPDATES[op](e.fn.ops, e.value_type(part), pointer, scope, semantics, operand))
        else:
            fetched.append(_compare_exchange_loop(e, op, part, pointer, operand, scope, semantics))
    held = fetched[0] if len(fetched) == 1 else e.fn.ops.construct(e.value_type(value.type), *fetched)
    return Typed(held, value.type)


def _compare_exchange_loop(e: Emitter, op: str, part: ScalarType, pointer, operand, scope, semantics):
    bits = storage_type(e.m, part)
    held = e.value_type(part)
    relaxed = e.m.enum_constant("MemorySemantics", "Relaxed")
    expected = e.fn.variable(bits)
    e.fn.ops.store(expected, e.fn.ops.atomic_load(bits, pointer, scope, relaxed))
    with e.fn.loop() as loop:
        old = e.fn.ops.load(bits, expected)
        updated = binary(e, op, part, e.fn.ops.bitcast(held, old), operand)
        swapped = e.fn.ops.atomic_compare_exchange(bits, pointer, scope, semantics, relaxed,
                                                   e.fn.ops.bitcast(bits, updated), old)
        e.fn.ops.store(expected, swapped)
        loop.while_(e.fn.ops.int_not_equal(e.bool, swapped, old))
    return e.fn.ops.bitcast(held, e.fn.ops.load(bits, expected))


@emits(ast.AtomicUpdate)
def _atomic_update(e: Emitter, i: ast.AtomicUpdate):
    tensor = e.value(i.tensor)
    _check_atomic_type(e, i, tensor.element)
    flat = e.flat_index(tensor, _indices(e, i.indices))
    return (atomic_update(e, i.op, tensor, flat, e.value(i.value), i.atomic),)


def _offset_or_size(e: Emitter, item):
    return e.value(item).id if isinstance(item, ast.Value) else e.index(item)


@emits(ast.Subview)
def _subview(e: Emitter, i: ast.Subview):
    tensor = e.value(i.tensor)
    offset, shape, strides = tensor.offset, [], []
    for piece, stride in zip(i.slices, tensor.strides):
        offset = e.fn.ops.int_add(e.i64, offset, e.fn.ops.int_mul(e.i64, _offset_or_size(e, piece.offset), stride))
        if piece.size is None or (isinstance(piece.size, int) and piece.size == 0):
            continue
        shape.append(_offset_or_size(e, piece.size))
        strides.append(stride)
    return (MemrefValue(tensor.variable, tensor.storage_class, tensor.element, offset, tuple(shape), tuple(strides),
                        tensor.associated, i.type),)


@emits(ast.Expand)
def _expand(e: Emitter, i: ast.Expand):
    tensor = e.value(i.tensor)
    sizes = [_offset_or_size(e, s) for s in i.shape]
    stride, strides = tensor.strides[i.mode], []
    for size in sizes:
        strides.append(stride)
        stride = e.fn.ops.int_mul(e.i64, stride, size)
    shape = tensor.shape[:i.mode] + tuple(sizes) + tensor.shape[i.mode + 1:]
    all_strides = tensor.strides[:i.mode] + tuple(strides) + tensor.strides[i.mode + 1:]
    return (MemrefValue(tensor.variable, tensor.storage_class, tensor.element, tensor.offset, shape, all_strides,
                        tensor.associated, i.type),)


@emits(ast.Fuse)
def _fuse(e: Emitter, i: ast.Fuse):
    tensor = e.value(i.tensor)
    fused = tensor.shape[i.first]
    for size in tensor.shape[i.first + 1:i.last + 1]:
        fused = e.fn.ops.int_mul(e.i64, fused, size)
    shape = tensor.shape[:i.first] + (fused,) + tensor.shape[i.last + 1:]
    strides = tensor.strides[:i.first + 1] + tensor.strides[i.last + 1:]
    return (MemrefValue(tensor.variable, tensor.storage_class, tensor.element, tensor.offset, shape, strides,
                        tensor.associated, i.type),)


@emits(ast.Size)
def _size(e: Emitter, i: ast.Size):
    tensor = e.value(i.tensor)
    return (Typed(tensor.count if isinstance(tensor, GroupRef) else tensor.shape[i.mode], INDEX),)


@emits(ast.Associated)
def _associated(e: Emitter, i: ast.Associated):
    return (Typed(e.value(i.operand).associated, BOOL),)


@emits(ast.Alloca)
def _alloca(e: Emitter, i: ast.Alloca):
    count = 1
    for size in i.type.shape:
        count *= size
    array = e.m.type_array(storage_type(e.m, i.type.element), max(count, 1))
    variable = e.m.global_variable("Workgroup", array)
    strides, running = [], 1
    for size in i.type.shape:
        strides.append(e.index(running))
        running *= size
    return (MemrefValue(variable, "Workgroup", i.type.element, e.index(0), tuple(e.index(n) for n in i.type.shape),
                        tuple(strides), e.m.constant(e.bool, True), i.type),)


@emits(ast.Barrier)
def _barrier(e: Emitter, i: ast.Barrier):
    e.barrier(i.fence_global, i.fence_local)
    return ()


@emits(ast.LifetimeStop, ast.CoopPrefetch)
def _hint(e: Emitter, i):
    """Lifetime ends and prefetches are hints SPIR-V has no use for."""
    return ()
