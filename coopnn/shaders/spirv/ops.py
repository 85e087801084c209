"""Named instruction helpers (`Ops`): one method per instruction the kernels emit, so a kernel says `int_add` or
`matrix_load` and the opcode name is written once, here. Operands follow the grammar with the result id left out:
the result type first where the instruction has one, then the operands, then any memory operands."""

from __future__ import annotations


def _instruction(opname: str):
    def emit(self, *operands, name: str | None = None):
        return self.fn.emit(opname, *operands, name=name)

    emit.__doc__ = f"{opname}: operands as the grammar lists them, result type first."
    emit.opname = opname
    return emit


class Ops:
    """Instructions emitted at `fn`'s current block; each returns its result id (None where there is none)."""

    def __init__(self, fn):
        self.fn = fn

    # integer arithmetic and bits
    int_add = _instruction("OpIAdd")
    int_sub = _instruction("OpISub")
    int_mul = _instruction("OpIMul")
    uint_div = _instruction("OpUDiv")
    uint_mod = _instruction("OpUMod")
    shift_left = _instruction("OpShiftLeftLogical")
    shift_right = _instruction("OpShiftRightLogical")
    bitwise_and = _instruction("OpBitwiseAnd")
    bitwise_or = _instruction("OpBitwiseOr")
    # float arithmetic
    float_add = _instruction("OpFAdd")
    float_mul = _instruction("OpFMul")
    vector_times_scalar = _instruction("OpVectorTimesScalar")
    # comparisons, logic and selects
    uint_less = _instruction("OpULessThan")
    uint_at_least = _instruction("OpUGreaterThanEqual")
    int_equal = _instruction("OpIEqual")
    int_not_equal = _instruction("OpINotEqual")
    float_greater = _instruction("OpFOrdGreaterThan")
    is_nan = _instruction("OpIsNan")
    is_inf = _instruction("OpIsInf")
    logical_and = _instruction("OpLogicalAnd")
    logical_or = _instruction("OpLogicalOr")
    select = _instruction("OpSelect")
    # conversions
    float_convert = _instruction("OpFConvert")
    uint_to_float = _instruction("OpConvertUToF")
    float_to_uint = _instruction("OpConvertFToU")
    bitcast = _instruction("OpBitcast")
    # memory and composites
    load = _instruction("OpLoad")
    store = _instruction("OpStore")
    access_chain = _instruction("OpAccessChain")
    atomic_or = _instruction("OpAtomicOr")
    atomic_float_add = _instruction("OpAtomicFAddEXT")  # SPV_EXT_shader_atomic_float_add
    extract = _instruction("OpCompositeExtract")
    construct = _instruction("OpCompositeConstruct")
    extract_dynamic = _instruction("OpVectorExtractDynamic")
    # cooperative matrices
    matrix_load = _instruction("OpCooperativeMatrixLoadKHR")
    matrix_store = _instruction("OpCooperativeMatrixStoreKHR")
    matrix_mul_add = _instruction("OpCooperativeMatrixMulAddKHR")
    # cooperative vectors
    vector_load = _instruction("OpCooperativeVectorLoadNV")
    vector_store = _instruction("OpCooperativeVectorStoreNV")
    vector_matrix_mul = _instruction("OpCooperativeVectorMatrixMulNV")
    vector_outer_product_accumulate = _instruction("OpCooperativeVectorOuterProductAccumulateNV")
    vector_reduce_sum_accumulate = _instruction("OpCooperativeVectorReduceSumAccumulateNV")
