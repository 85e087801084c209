"""Typed helpers for SPV_NV_cooperative_matrix2, SPV_NV_tensor_addressing and SPV_NV_cooperative_matrix_decode_vector.

Tensor layouts and views are values built by chains of instructions, each making a changed copy: `TensorLayoutValue`
and `TensorViewValue` emit them with the method names of the numpy model (coopnn/layouts/tensor_addressing.py), ints
becoming constants. `load_tensor` and `store_tensor` put the TensorView, DecodeFunc and DecodeVectorFunc operands in
the grammar's bit order; `decode_function`, `per_element_function` and `combine_function` declare the signatures
those instructions call; `convert` picks OpCooperativeMatrixConvertNV or an Op*Convert as the specification's
resolution says. The other instructions (OpCooperativeMatrixPerElementOpNV, ReduceNV, TransposeNV, ...) are plain
`Function.emit` calls.

spirv-val checks most rules; what it cannot see is checked here: operand counts per dimension, and the decode-vector
rules (the SPIRV-Tools on PATH, 2025.5, predates that extension and refuses its capability).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from coopnn.shaders.spirv.builder import Module
from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.function import Function
from coopnn.shaders.spirv.grammar import Availability
from coopnn.shaders.spirv.instruction import Id

DECODE_VECTOR_WIDTHS = (2, 4, 8)
CONVERSIONS_CAPABILITY = Availability("a cooperative matrix conversion that changes the Use",
                                      ("CooperativeMatrixConversionsNV",))
# (kind of the source component, kind of the result component) -> the conversion instruction; the kinds are
# "float", "sint" and "uint". Integer conversions extend by the source's signedness.
CONVERSION_OPCODES = {
    ("float", "float"): "OpFConvert",
    ("float", "sint"): "OpConvertFToS",
    ("float", "uint"): "OpConvertFToU",
    ("sint", "float"): "OpConvertSToF",
    ("uint", "float"): "OpConvertUToF",
    ("sint", "sint"): "OpSConvert",
    ("sint", "uint"): "OpSConvert",
    ("uint", "sint"): "OpUConvert",
    ("uint", "uint"): "OpUConvert",
}

Integer = int | Id


@dataclass(frozen=True)
class _TensorValue:
    """A tensor layout or view value in `function`; each method emits one instruction and returns the new value."""

    function: Function
    id: Id

    TYPE_OPNAME: ClassVar[str] = ""
    CREATE_OPNAME: ClassVar[str] = ""

    @classmethod
    def create(cls, function: Function, type_id: Id, name: str | None = None):
        _dimension(function, type_id, cls.TYPE_OPNAME)
        return cls(function, function.emit(cls.CREATE_OPNAME, type_id, name=name))

    @property
    def type(self) -> Id:
        return self.function.module.type_of(self.id)

    @property
    def dim(self) -> int:
        return _dimension(self.function, self.type, self.TYPE_OPNAME)

    def _set(self, opname: str, values: Sequence[Integer], count: int | None = None):
        count = self.dim if count is None else count
        if len(values) != count:
            raise SpirvBuildError(f"{opname} takes {count} value(s) for this {self.dim}-dimensional type; "
                                  f"got {len(values)}")
        module = self.function.module
        return type(self)(self.function, self.function.emit(opname, self.type, self.id,
                                                            *(module.integer(v) for v in values)))


def _dimension(function: Function, type_id: Id, opname: str) -> int:
    info = function.module.type_info(type_id)
    if info.opname != opname:
        raise SpirvBuildError(f"{type_id!r} is {info.opname}, not {opname}")
    return function.module.constant_value(info.operands[0])


@dataclass(frozen=True)
class TensorLayoutValue(_TensorValue):
    """An OpTypeTensorLayoutNV value: `TensorLayoutValue.create(fn, layout_type).set_dimension(rows, cols)`."""

    TYPE_OPNAME = "OpTypeTensorLayoutNV"
    CREATE_OPNAME = "OpCreateTensorLayoutNV"

    def set_dimension(self, *dims: Integer) -> TensorLayoutValue:
        return self._set("OpTensorLayoutSetDimensionNV", dims)

    def set_stride(self, *strides: Integer) -> TensorLayoutValue:
        return self._set("OpTensorLayoutSetStrideNV", strides)

    def set_block_size(self, *sizes: Integer) -> TensorLayoutValue:
        return self._set("OpTensorLayoutSetBlockSizeNV", sizes)

    def slice(self, offsets: Sequence[Integer], spans: Sequence[Integer]) -> TensorLayoutValue:
        if len(offsets) != len(spans):
            raise SpirvBuildError(f"OpTensorLayoutSliceNV takes as many offsets as spans; got {offsets}, {spans}")
        pairs = [value for pair in zip(offsets, spans) for value in pair]
        return self._set("OpTensorLayoutSliceNV", pairs, 2 * self.dim)

    def set_clamp_value(self, value: Integer) -> TensorLayoutValue:
        return self._set("OpTensorLayoutSetClampValueNV", (value,), 1)


@dataclass(frozen=True)
class TensorViewValue(_TensorValue):
    """An OpTypeTensorViewNV value: `TensorViewValue.create(fn, view_type).set_clip(0, rows, 0, cols)`."""

    TYPE_OPNAME = "OpTypeTensorViewNV"
    CREATE_OPNAME = "OpCreateTensorViewNV"

    def set_dimension(self, *dims: Integer) -> TensorViewValue:
        return self._set("OpTensorViewSetDimensionNV", dims)

    def set_stride(self, *strides: Integer) -> TensorViewValue:
        return self._set("OpTensorViewSetStrideNV", strides)

    def set_clip(self, row_offset: Integer, row_span: Integer, col_offset: Integer,
                 col_span: Integer) -> TensorViewValue:
        return self._set("OpTensorViewSetClipNV", (row_offset, row_span, col_offset, col_span), 4)


def _id(value: Id | _TensorValue | Function) -> Id:
    return value.id if isinstance(value, (_TensorValue, Function)) else value


def _addressing_operands(function: Function, **operands) -> list:
    """The Tensor Addressing Operands mask (names) and its ids, in the order of the mask's bits."""
    given = [(name, _id(value)) for name, value in operands.items() if value is not None]
    grammar = function.module.grammar
    given.sort(key=lambda pair: grammar.enumerant("TensorAddressingOperands", pair[0]).value)
    return [tuple(name for name, _ in given) or "None", *(value for _, value in given)]


def load_tensor(function: Function, result_type: Id, pointer: Id, layout: TensorLayoutValue | Id, *,
                initial: Id | None = None, view: TensorViewValue | Id | None = None,
                decode: Function | Id | None = None, decode_vector: Function | None = None,
                memory_access: tuple = ("None",), name: str | None = None) -> Id:
    """OpCooperativeMatrixLoadTensorNV. `initial` is the Object whose elements clipped ones keep (a null matrix
    when not given); `memory_access` the Memory Operand with its parameters, e.g. ("Aligned", 16)."""
    if decode_vector is not None:
        if decode is None:
            raise SpirvBuildError("DecodeVectorFunc needs DecodeFunc on the same load "
                                  "(SPV_NV_cooperative_matrix_decode_vector)")
        _check_decode_vector(function, result_type, decode_vector)
    module = function.module
    addressing = _addressing_operands(function, TensorView=view, DecodeFunc=decode, DecodeVectorFunc=decode_vector)
    initial = module.constant_null(result_type) if initial is None else initial
    return function.emit("OpCooperativeMatrixLoadTensorNV", result_type, pointer, initial, _id(layout),
                         *memory_access, *addressing, name=name)


def store_tensor(function: Function, pointer: Id, matrix: Id, layout: TensorLayoutValue | Id, *,
                 view: TensorViewValue | Id | None = None, memory_access: tuple = ("None",)) -> None:
    """OpCooperativeMatrixStoreTensorNV (no decode function: stores take none)."""
    function.emit("OpCooperativeMatrixStoreTensorNV", pointer, matrix, _id(layout), *memory_access,
                  *_addressing_operands(function, TensorView=view))


def _check_decode_vector(function: Function, result_type: Id, decode_vector: Function) -> None:
    module = function.module
    returned = module.type_info(decode_vector.return_type)
    component = module.type_info(result_type).operands[0]
    if returned.opname != "OpTypeVector" or returned.operands[0] != component or \
            returned.operands[1] not in DECODE_VECTOR_WIDTHS:
        raise SpirvBuildError(f"a DecodeVectorFunc returns a vector of {'/'.join(map(str, DECODE_VECTOR_WIDTHS))} "
                              f"of the matrix's component type; {decode_vector.id!r} returns {returned.opname} "
                              f"{returned.operands}")


def decode_function(module: Module, component: Id, pointer_type: Id, dim: int, *, components: int = 1,
                    name: str | None = None) -> Function:
    """A DecodeFunc (components=1) or DecodeVectorFunc (2, 4 or 8): parameters (pointer to the element in
    PhysicalStorageBuffer memory, blockCoord and coordInBlock as arrays of `dim` 32-bit unsigned integers),
    returning the component or a vector of them. Its `params` are those three ids."""
    storage_class = module.type_info(pointer_type).operands[0]
    if storage_class != "PhysicalStorageBuffer":
        raise SpirvBuildError(f"a decode function's pointer is in PhysicalStorageBuffer memory; got {storage_class}")
    if components not in (1, *DECODE_VECTOR_WIDTHS):
        raise SpirvBuildError(f"a decode function returns 1, 2, 4 or 8 components; got {components}")
    coordinates = module.type_array(module.type_int(32, False), dim)
    returned = component if components == 1 else module.type_vector(component, components)
    return module.function(returned, [pointer_type, coordinates, coordinates], name=name)


def per_element_function(module: Module, component: Id, extra_types: Sequence[Id] = (), *,
                         name: str | None = None) -> Function:
    """The Func of OpCooperativeMatrixPerElementOpNV: (row, column, element, *the instruction's extra operands) ->
    the new element."""
    u32 = module.type_int(32, False)
    return module.function(component, [u32, u32, component, *extra_types], name=name)


def combine_function(module: Module, component: Id, *, name: str | None = None) -> Function:
    """The CombineFunc of OpCooperativeMatrixReduceNV: two elements -> one."""
    return module.function(component, [component, component], name=name)


def _component_kind(module: Module, component: Id) -> str:
    info = module.type_info(component)
    if info.opname == "OpTypeFloat":
        return "float"
    if info.opname == "OpTypeInt":
        return "sint" if info.operands[1] else "uint"
    raise SpirvBuildError(f"cooperative matrix components are floats or integers; got {info.opname}")


def convert(function: Function, result_type: Id, matrix: Id, *, name: str | None = None) -> Id:
    """A matrix in another component type and/or Use (MatrixAccumulatorKHR to MatrixAKHR or MatrixBKHR): Op*Convert
    when the component type changes, even with the Use, else OpCooperativeMatrixConvertNV (SPV_NV_cooperative_matrix2,
    issue "How are matrix type conversions with Use change handled?"); the matrix itself when nothing changes."""
    module = function.module
    source = module.type_info(module.type_of(matrix)).operands
    result = module.type_info(result_type).operands
    if source == result:
        return matrix
    if source[4] != result[4]:
        module.require(CONVERSIONS_CAPABILITY)
    if source[0] == result[0]:
        return function.emit("OpCooperativeMatrixConvertNV", result_type, matrix, name=name)
    kinds = (_component_kind(module, source[0]), _component_kind(module, result[0]))
    integers = "float" not in kinds
    if integers and module.scalar_widths(source[0]) == module.scalar_widths(result[0]):
        raise SpirvBuildError("a change of signedness alone is OpBitcast, not a conversion (and may not change the "
                              "Use)")
    return function.emit(CONVERSION_OPCODES[kinds], result_type, matrix, name=name)
