"""Named instruction helpers (`Ops`): one method per instruction the kernels emit, so a kernel says `int_add` or
`matrix_load` and the opcode name is written once, here. Operands follow the grammar with the result id left out:
the result type first where the instruction has one, then the operands, then any memory operands.

Every `Function` carries its `Ops` as `fn.ops`; a table that picks an instruction by kind holds the methods
themselves (`Ops.float_add`), called as `Ops.float_add(fn.ops, ...)`."""

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
    int_div = _instruction("OpSDiv")
    int_rem = _instruction("OpSRem")
    int_negate = _instruction("OpSNegate")
    uint_div = _instruction("OpUDiv")
    uint_mod = _instruction("OpUMod")
    uint_mul_extended = _instruction("OpUMulExtended")
    shift_left = _instruction("OpShiftLeftLogical")
    shift_right = _instruction("OpShiftRightLogical")
    shift_right_arithmetic = _instruction("OpShiftRightArithmetic")
    bitwise_and = _instruction("OpBitwiseAnd")
    bitwise_or = _instruction("OpBitwiseOr")
    bitwise_xor = _instruction("OpBitwiseXor")
    bitwise_not = _instruction("OpNot")
    bitfield_int_extract = _instruction("OpBitFieldSExtract")
    bitfield_uint_extract = _instruction("OpBitFieldUExtract")
    # float arithmetic
    float_add = _instruction("OpFAdd")
    float_sub = _instruction("OpFSub")
    float_mul = _instruction("OpFMul")
    float_div = _instruction("OpFDiv")
    float_rem = _instruction("OpFRem")
    float_negate = _instruction("OpFNegate")
    vector_times_scalar = _instruction("OpVectorTimesScalar")
    matrix_times_scalar = _instruction("OpMatrixTimesScalar")
    # comparisons, logic and selects
    uint_less = _instruction("OpULessThan")
    uint_greater = _instruction("OpUGreaterThan")
    uint_at_least = _instruction("OpUGreaterThanEqual")
    int_equal = _instruction("OpIEqual")
    int_not_equal = _instruction("OpINotEqual")
    int_less = _instruction("OpSLessThan")
    int_at_most = _instruction("OpSLessThanEqual")
    int_greater = _instruction("OpSGreaterThan")
    int_at_least = _instruction("OpSGreaterThanEqual")
    float_equal = _instruction("OpFOrdEqual")
    float_ordered_not_equal = _instruction("OpFOrdNotEqual")
    float_not_equal = _instruction("OpFUnordNotEqual")  # true for NaN too, as != is
    float_less = _instruction("OpFOrdLessThan")
    float_at_most = _instruction("OpFOrdLessThanEqual")
    float_greater = _instruction("OpFOrdGreaterThan")
    float_at_least = _instruction("OpFOrdGreaterThanEqual")
    is_nan = _instruction("OpIsNan")
    is_inf = _instruction("OpIsInf")
    logical_and = _instruction("OpLogicalAnd")
    logical_or = _instruction("OpLogicalOr")
    logical_not = _instruction("OpLogicalNot")
    logical_equal = _instruction("OpLogicalEqual")
    logical_not_equal = _instruction("OpLogicalNotEqual")
    all_true = _instruction("OpAll")
    select = _instruction("OpSelect")
    # conversions
    float_convert = _instruction("OpFConvert")
    int_convert = _instruction("OpSConvert")
    uint_convert = _instruction("OpUConvert")
    int_to_float = _instruction("OpConvertSToF")
    uint_to_float = _instruction("OpConvertUToF")
    float_to_int = _instruction("OpConvertFToS")
    float_to_uint = _instruction("OpConvertFToU")
    bitcast = _instruction("OpBitcast")
    # memory and composites
    load = _instruction("OpLoad")
    store = _instruction("OpStore")
    access_chain = _instruction("OpAccessChain")
    extract = _instruction("OpCompositeExtract")
    construct = _instruction("OpCompositeConstruct")
    extract_dynamic = _instruction("OpVectorExtractDynamic")
    # atomics
    atomic_load = _instruction("OpAtomicLoad")
    atomic_store = _instruction("OpAtomicStore")
    atomic_int_add = _instruction("OpAtomicIAdd")
    atomic_int_min = _instruction("OpAtomicSMin")
    atomic_int_max = _instruction("OpAtomicSMax")
    atomic_or = _instruction("OpAtomicOr")
    atomic_compare_exchange = _instruction("OpAtomicCompareExchange")
    atomic_float_add = _instruction("OpAtomicFAddEXT")  # SPV_EXT_shader_atomic_float_add
    # subgroup operations
    group_int_add = _instruction("OpGroupNonUniformIAdd")
    group_int_min = _instruction("OpGroupNonUniformSMin")
    group_int_max = _instruction("OpGroupNonUniformSMax")
    group_float_add = _instruction("OpGroupNonUniformFAdd")
    group_float_min = _instruction("OpGroupNonUniformFMin")
    group_float_max = _instruction("OpGroupNonUniformFMax")
    group_shuffle = _instruction("OpGroupNonUniformShuffle")
    group_broadcast = _instruction("OpGroupNonUniformBroadcast")
    # cooperative matrices
    matrix_load = _instruction("OpCooperativeMatrixLoadKHR")
    matrix_store = _instruction("OpCooperativeMatrixStoreKHR")
    matrix_mul_add = _instruction("OpCooperativeMatrixMulAddKHR")
    matrix_length = _instruction("OpCooperativeMatrixLengthKHR")
    matrix_per_element = _instruction("OpCooperativeMatrixPerElementOpNV")
    # cooperative vectors
    vector_load = _instruction("OpCooperativeVectorLoadNV")
    vector_store = _instruction("OpCooperativeVectorStoreNV")
    vector_matrix_mul = _instruction("OpCooperativeVectorMatrixMulNV")
    vector_matrix_mul_add = _instruction("OpCooperativeVectorMatrixMulAddNV")
    vector_outer_product_accumulate = _instruction("OpCooperativeVectorOuterProductAccumulateNV")
    vector_reduce_sum_accumulate = _instruction("OpCooperativeVectorReduceSumAccumulateNV")
