"""The compiler's frame: one SPIR-V module and its entry function, the registry from instruction class to the
function that emits it, values by name, memrefs as (buffer variable, offset, sizes, strides), the argument buffer,
builtins, and the element accesses and barriers every emitter uses.

Collective regions run redundantly on every invocation of the work-group (their values are uniform); SPMD regions
give each invocation its lanes; collectives split their output elements over the invocations. Emitters live in
emit_scalar.py, emit_memory.py, emit_control.py and emit_collectives.py; compile.py imports them by name.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass
from typing import Callable

from coopnn.errors import CompileError
from coopnn.registry import registrar
from coopnn.shaders.spirv import Id, Module
from coopnn.tl import ast
from coopnn.tl.codegen.types import from_storage, storage_type, to_storage, value_type
from coopnn.tl.launch import Launch
from coopnn.tl.types import CoopMatrixType, MemrefType, ScalarType

Emit = Callable[["Emitter", ast.Inst], tuple]
EMITTERS: dict[type, Emit] = {}


emits = registrar(EMITTERS)


@dataclass(frozen=True)
class MemrefValue:
    variable: Id
    storage_class: str  # StorageBuffer (a bound buffer, the array at member 0) or Workgroup (an alloca)
    element: ScalarType
    offset: Id
    shape: tuple[Id, ...]
    strides: tuple[Id, ...]
    associated: Id
    declared: MemrefType | None = None  # its type, where the source says it (static sizes and strides)


@dataclass(frozen=True)
class GroupRef:
    variable: Id
    element: ScalarType
    order: int
    count: Id
    table: Id  # the argument-buffer slot the group's table starts at (i64)
    associated: Id


@dataclass(frozen=True)
class Typed:
    """A scalar value and its tensor-language type."""

    id: Id
    type: ScalarType


@dataclass(frozen=True)
class CoopValue:
    """A cooperative matrix: this invocation's work-item vector, one value per element (see emit_coopmatrix.py)."""

    type: CoopMatrixType
    elements: tuple[Id, ...]


class Emitter:
    def __init__(self, module: Module, launch: Launch, argument_buffer: Id):
        self.m = module
        self.launch = launch
        self.argument_buffer = argument_buffer
        self.fn = module.function(module.type_void(), name="main")
        self.env: ChainMap = ChainMap()
        self.i64 = module.type_int(64, True)
        self.u32 = module.type_int(32, False)
        self.bool = module.type_bool()
        self._builtins: dict[str, Id] = {}
        self.features: set[str] = set()  # device features the emitted instructions need beyond the types'
        self.extensions: set[str] = set()  # device extensions they need

    def fail(self, inst, message: str):
        where = f"{inst.span}: " if getattr(inst, "span", None) is not None else ""
        raise CompileError(f"{where}{message}")

    def index(self, value: int) -> Id:
        return self.m.constant(self.i64, value)

    def index_product(self, sizes) -> Id:
        """The product of index values (an iteration space's size; 1 for none)."""
        total = self.index(1)
        for size in sizes:
            total = self.fn.ops.int_mul(self.i64, total, size)
        return total

    def index_positions(self, linear: Id, sizes) -> list[Id]:
        """The position in each mode of `sizes` (first mode fastest) of the linear index `linear`."""
        positions = []
        for size in sizes:
            positions.append(self.fn.ops.int_rem(self.i64, linear, size))
            linear = self.fn.ops.int_div(self.i64, linear, size)
        return positions

    def word(self, value: int) -> Id:
        return self.m.constant(self.u32, value)

    def value(self, name: ast.Value):
        return self.env[name.name]

    def builtin(self, name: str, vector: bool = False) -> Id:
        """A builtin input (u32 or uvec3), declared on first use."""
        if name not in self._builtins:
            kind = self.m.type_vector(self.u32, 3) if vector else self.u32
            self._builtins[name] = self.m.builtin_input(name, kind)
        variable = self._builtins[name]
        kind = self.m.type_vector(self.u32, 3) if vector else self.u32
        return self.fn.ops.load(kind, variable)

    def builtin_component(self, name: str, axis: int) -> Id:
        return self.fn.ops.extract(self.u32, self.builtin(name, vector=True), axis)

    def widen(self, word: Id) -> Id:
        """A u32 as index (i64)."""
        return self.fn.ops.int_convert(self.i64, self.fn.ops.bitcast(self.m.type_int(32, True), word))

    def local_index(self) -> Id:
        return self.widen(self.builtin("LocalInvocationIndex"))

    def argument_slot(self, slot: int | Id) -> Id:
        """Slot `slot` of the argument buffer as an i64."""
        m = self.m
        slot = self.index(slot) if isinstance(slot, int) else slot
        words = []
        for half in (0, 1):
            word_index = self.fn.ops.int_add(self.i64, self.fn.ops.int_mul(self.i64, slot, self.index(2)),
                                             self.index(half))
            pointer = self.fn.ops.access_chain(m.type_pointer("StorageBuffer", self.u32), self.argument_buffer,
                                               self.word(0), word_index)
            words.append(self.fn.ops.load(self.u32, pointer))
        pair = self.fn.ops.construct(m.type_vector(self.u32, 2), *words)
        return self.fn.ops.bitcast(self.i64, pair)

    def flat_index(self, memref: MemrefValue, indices: list[Id]) -> Id:
        flat = memref.offset
        for index, stride in zip(indices, memref.strides):
            flat = self.fn.ops.int_add(self.i64, flat, self.fn.ops.int_mul(self.i64, index, stride))
        return flat

    def element_pointer(self, memref: MemrefValue, flat: Id) -> Id:
        element = storage_type(self.m, memref.element)
        pointer = self.m.type_pointer(memref.storage_class, element)
        if memref.storage_class == "StorageBuffer":
            return self.fn.ops.access_chain(pointer, memref.variable, self.word(0), flat)
        return self.fn.ops.access_chain(pointer, memref.variable, flat)

    def load_element(self, memref: MemrefValue, flat: Id) -> Id:
        stored = self.fn.ops.load(storage_type(self.m, memref.element), self.element_pointer(memref, flat))
        return from_storage(self.fn, memref.element, stored)

    def store_element(self, memref: MemrefValue, flat: Id, value: Id) -> None:
        self.fn.ops.store(self.element_pointer(memref, flat), to_storage(self.fn, memref.element, value))

    def barrier(self, fence_global: bool = True, fence_local: bool = True) -> None:
        storage = (("UniformMemory",) if fence_global else ()) + (("WorkgroupMemory",) if fence_local else ())
        self.fn.barrier("Workgroup", storage)

    def value_type(self, t: ScalarType) -> Id:
        return value_type(self.m, t)

    def run_region(self, region: ast.Region, defines: dict | None = None):
        """Emits `region` in a scope of its own; returns the values of its closing yield (None without one)."""
        saved = self.env
        self.env = self.env.new_child(dict(defines or {}))
        try:
            for inst in region.instructions:
                if isinstance(inst, ast.Yield):
                    return [self.value(v) for v in inst.values]
                emitter = EMITTERS.get(type(inst))
                if emitter is None:
                    self.fail(inst, f"the SPIR-V compiler does not handle {type(inst).__name__} yet; "
                                    f"the interpreter (coopnn.tl.interpret) runs it")
                for name, result in zip(inst.results, emitter(self, inst)):
                    self.env[name.name] = result
            return None
        finally:
            self.env = saved
