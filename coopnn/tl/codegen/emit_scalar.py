"""Emitting the scalar instructions: arithmetic and comparison through op tables by kind of type, math through
GLSL.std.450 (float64 in float32: the set has no double precision transcendentals), casts, constants, builtins and
subgroup operations. Complex values are two-component vectors; bf16 results are rounded after each operation."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.codegen.emitter import CoopValue, Emitter, Typed, emits
from coopnn.tl.codegen.types import constant, round_bf16
from coopnn.tl.types import F32, I32, CoopMatrixType, ScalarType


def kind(t: ScalarType) -> str:
    return "bool" if t.is_bool else "int" if t.is_integer else "complex" if t.is_complex else "float"


BINARY = {  # (op, kind) -> SPIR-V instruction, or ("GLSL", name)
    ("add", "int"): "OpIAdd", ("add", "float"): "OpFAdd", ("add", "complex"): "OpFAdd",
    ("sub", "int"): "OpISub", ("sub", "float"): "OpFSub", ("sub", "complex"): "OpFSub",
    ("mul", "int"): "OpIMul", ("mul", "float"): "OpFMul",
    ("div", "int"): "OpSDiv", ("div", "float"): "OpFDiv",
    ("rem", "float"): "OpFRem",
    ("max", "int"): ("GLSL", "SMax"), ("max", "float"): ("GLSL", "FMax"),
    ("min", "int"): ("GLSL", "SMin"), ("min", "float"): ("GLSL", "FMin"),
    ("shl", "int"): "OpShiftLeftLogical", ("shr", "int"): "OpShiftRightArithmetic",
    ("and", "int"): "OpBitwiseAnd", ("or", "int"): "OpBitwiseOr", ("xor", "int"): "OpBitwiseXor",
    ("and", "bool"): "OpLogicalAnd", ("or", "bool"): "OpLogicalOr", ("xor", "bool"): "OpLogicalNotEqual",
}
COMPARE = {
    ("equal", "int"): "OpIEqual", ("not_equal", "int"): "OpINotEqual",
    ("greater_than", "int"): "OpSGreaterThan", ("greater_than_equal", "int"): "OpSGreaterThanEqual",
    ("less_than", "int"): "OpSLessThan", ("less_than_equal", "int"): "OpSLessThanEqual",
    ("equal", "float"): "OpFOrdEqual", ("not_equal", "float"): "OpFUnordNotEqual",
    ("greater_than", "float"): "OpFOrdGreaterThan", ("greater_than_equal", "float"): "OpFOrdGreaterThanEqual",
    ("less_than", "float"): "OpFOrdLessThan", ("less_than_equal", "float"): "OpFOrdLessThanEqual",
}
MATH = {"cos": "Cos", "sin": "Sin", "exp": "Exp", "exp2": "Exp2", "log": "Log", "log2": "Log2"}


def finish(e: Emitter, t: ScalarType, value) -> Typed:
    return Typed(round_bf16(e.fn, value) if t.name == "bf16" else value, t)


def _complex_parts(e: Emitter, t: ScalarType, value):
    part = e.value_type(t.component())
    return (e.emit("OpCompositeExtract", part, value, 0), e.emit("OpCompositeExtract", part, value, 1))


def _complex(e: Emitter, t: ScalarType, real, imaginary):
    return e.emit("OpCompositeConstruct", e.value_type(t), real, imaginary)


def complex_multiply(e: Emitter, t: ScalarType, a, b):
    part = e.value_type(t.component())
    (ar, ai), (br, bi) = _complex_parts(e, t, a), _complex_parts(e, t, b)
    real = e.emit("OpFSub", part, e.emit("OpFMul", part, ar, br), e.emit("OpFMul", part, ai, bi))
    imaginary = e.emit("OpFAdd", part, e.emit("OpFMul", part, ar, bi), e.emit("OpFMul", part, ai, br))
    return _complex(e, t, real, imaginary)


def _complex_divide(e: Emitter, t: ScalarType, a, b):
    part = e.value_type(t.component())
    br, bi = _complex_parts(e, t, b)
    norm = e.emit("OpFAdd", part, e.emit("OpFMul", part, br, br), e.emit("OpFMul", part, bi, bi))
    conjugate = _complex(e, t, br, e.emit("OpFNegate", part, bi))
    product = complex_multiply(e, t, a, conjugate)
    return e.emit("OpFDiv", e.value_type(t), product, e.emit("OpCompositeConstruct", e.value_type(t), norm, norm))


def binary(e: Emitter, op: str, t: ScalarType, a, b):
    """`a op b` on held values of type `t`."""
    if t.is_complex and op == "mul":
        return complex_multiply(e, t, a, b)
    if t.is_complex and op == "div":
        return _complex_divide(e, t, a, b)
    if op == "rem" and kind(t) == "int":
        return _integer_remainder(e, t, a, b)
    instruction = BINARY[(op, kind(t))]
    if isinstance(instruction, tuple):
        return e.fn.ext_inst(e.value_type(t), instruction[1], a, b)
    return e.emit(instruction, e.value_type(t), a, b)


def _integer_remainder(e: Emitter, t: ScalarType, a, b):
    """a - (a / b) b, the remainder with the dividend's sign: NVIDIA's driver computed OpSRem of negative operands as
    an unsigned remainder (bench/results/nvidia-h200-2026-12-02-tl-remainder.md), so it is built from OpSDiv."""
    kind_type = e.value_type(t)
    return e.emit("OpISub", kind_type, a, e.emit("OpIMul", kind_type, e.emit("OpSDiv", kind_type, a, b), b))


def _elementwise(t: CoopMatrixType, apply, *matrices: CoopValue) -> CoopValue:
    return CoopValue(t, tuple(apply(*parts) for parts in zip(*(m.elements for m in matrices))))


@emits(ast.Arith)
def _arith(e: Emitter, i: ast.Arith):
    a, b = e.value(i.a), e.value(i.b)
    if isinstance(i.type, CoopMatrixType):
        t = i.type.component
        return (_elementwise(i.type, lambda x, y: finish(e, t, binary(e, i.op, t, x, y)).id, a, b),)
    return (finish(e, i.type, binary(e, i.op, i.type, a.id, b.id)),)


def _unary_value(e: Emitter, i: ast.Unary, a: Typed):
    t = a.type
    if t.is_complex:
        part_type = t.component()
        real, imaginary = _complex_parts(e, t, a.id)
        part = e.value_type(part_type)
        if i.op == "abs":
            return e.fn.ext_inst(part, "Length", a.id)
        return {"re": lambda: real, "im": lambda: imaginary,
                "neg": lambda: e.emit("OpFNegate", e.value_type(t), a.id),
                "conj": lambda: _complex(e, t, real, e.emit("OpFNegate", part, imaginary))}[i.op]()
    if i.op == "abs":
        return e.fn.ext_inst(e.value_type(t), "SAbs" if t.is_integer else "FAbs", a.id)
    if i.op == "neg":
        return e.emit("OpSNegate" if t.is_integer else "OpFNegate", e.value_type(t), a.id)
    return e.emit("OpLogicalNot" if t.is_bool else "OpNot", e.value_type(t), a.id)


@emits(ast.Unary)
def _unary(e: Emitter, i: ast.Unary):
    a = e.value(i.a)
    if isinstance(i.type, CoopMatrixType):
        source, t = a.type.component, i.type.component
        return (_elementwise(i.type, lambda x: finish(e, t, _unary_value(e, i, Typed(x, source))).id, a),)
    return (finish(e, i.type, _unary_value(e, i, a)),)


@emits(ast.Compare)
def _compare(e: Emitter, i: ast.Compare):
    a, b = e.value(i.a), e.value(i.b)
    t = a.type
    if t.is_complex:
        vector = e.m.type_vector(e.bool, 2)
        same = e.emit("OpFOrdEqual", vector, a.id, b.id)
        equal = e.emit("OpAll", e.bool, same)
        return (Typed(equal if i.op == "equal" else e.emit("OpLogicalNot", e.bool, equal), ScalarType("bool")),)
    if t.is_bool:
        opname = "OpLogicalEqual" if i.op == "equal" else "OpLogicalNotEqual"
    else:
        opname = COMPARE[(i.op, kind(t))]
    return (Typed(e.emit(opname, e.bool, a.id, b.id), ScalarType("bool")),)


def _exp(e: Emitter, t: ScalarType, value, base_two: bool):
    """exp of a complex value: e^re (cos im + i sin im); base two scales by ln 2 first."""
    part_type = t.component()
    part = e.value_type(part_type)
    real, imaginary = _complex_parts(e, t, value)
    if base_two:
        ln2 = constant(e.m, part_type, 0.6931471805599453)
        real, imaginary = e.emit("OpFMul", part, real, ln2), e.emit("OpFMul", part, imaginary, ln2)
    magnitude = math_in_float32(e, part_type, "Exp", real)
    cos, sin = (math_in_float32(e, part_type, name, imaginary) for name in ("Cos", "Sin"))
    return _complex(e, t, e.emit("OpFMul", part, magnitude, cos), e.emit("OpFMul", part, magnitude, sin))


def math_in_float32(e: Emitter, t: ScalarType, name: str, value):
    if t.name != "f64":
        return e.fn.ext_inst(e.value_type(t), name, value)
    f32 = e.value_type(F32)
    narrow = e.fn.ext_inst(f32, name, e.emit("OpFConvert", f32, value))
    return e.emit("OpFConvert", e.value_type(t), narrow)


@emits(ast.Math)
def _math(e: Emitter, i: ast.Math):
    a = e.value(i.operand)
    name = MATH[i.op.removeprefix("native_")]
    if i.type.is_complex:
        return (Typed(_exp(e, i.type, a.id, name == "Exp2"), i.type),)
    return (finish(e, i.type, math_in_float32(e, i.type, name, a.id)),)


def convert(e: Emitter, value: Typed, target: ScalarType):
    """`value` cast to `target` (the reference's cast table; complex parts component-wise)."""
    source = value.type
    if source == target or (source.name in ("bf16", "f32") and target.name in ("bf16", "f32")):
        return round_bf16(e.fn, value.id) if target.name == "bf16" and source != target else value.id
    if target.is_complex:
        part = target.component()
        if source.is_complex:
            return e.emit("OpFConvert", e.value_type(target), value.id)
        real = convert(e, value, part)
        return _complex(e, target, real, constant(e.m, part, 0.0))
    opname = {("int", "int"): "OpSConvert", ("float", "float"): "OpFConvert", ("int", "float"): "OpConvertSToF",
              ("float", "int"): "OpConvertFToS"}[(kind(source), kind(target))]
    held = e.value_type(target)
    if opname in ("OpSConvert", "OpFConvert") and held == e.value_type(source):
        return value.id
    result = e.emit(opname, held, value.id)
    return round_bf16(e.fn, result) if target.name == "bf16" else result


@emits(ast.Cast)
def _cast(e: Emitter, i: ast.Cast):
    a = e.value(i.operand)
    if isinstance(i.type, CoopMatrixType):
        source, t = a.type.component, i.type.component
        return (_elementwise(i.type, lambda x: convert(e, Typed(x, source), t), a),)
    return (Typed(convert(e, a, i.type), i.type),)


@emits(ast.Constant)
def _constant(e: Emitter, i: ast.Constant):
    if isinstance(i.type, CoopMatrixType):
        value = constant(e.m, i.type.component, i.value)
        return (CoopValue(i.type, (value,) * work_item_length(e, i.type)),)
    return (Typed(constant(e.m, i.type, i.value), i.type),)


def work_item_length(e: Emitter, t: CoopMatrixType) -> int:
    """Elements of a cooperative matrix each invocation holds: ceil(rows / subgroup size) per column."""
    return -(-t.rows // e.launch.subgroup_size) * t.columns


def _builtin_word(e: Emitter, i: ast.Builtin):
    axis = "xyz".index(i.axis) if i.axis else 0
    size = e.launch.subgroup_size
    if i.name == "group_id":
        return e.builtin_component("WorkgroupId", axis)
    if i.name == "num_groups":
        return e.builtin_component("NumWorkgroups", axis)
    if i.name == "num_subgroups":
        return e.word((e.launch.work_group_size[0] // size, e.launch.work_group_size[1], 1)[axis])
    if i.name == "subgroup_size":
        return e.builtin("SubgroupSize")
    if i.name == "subgroup_local_id":
        return e.builtin("SubgroupLocalInvocationId")
    if i.name == "subgroup_linear_id":
        return e.builtin("SubgroupId")
    local = e.builtin_component("LocalInvocationId", axis)
    return e.emit("OpUDiv", e.u32, local, e.word(size)) if axis == 0 else local


@emits(ast.Builtin)
def _builtin(e: Emitter, i: ast.Builtin):
    word = _builtin_word(e, i)
    signed = e.emit("OpBitcast", e.m.type_int(32, True), word)
    held = e.value_type(i.type)
    return (Typed(signed if held == e.m.type_int(32, True) else e.emit("OpSConvert", held, signed), i.type),)


@emits(ast.SubgroupBroadcast)
def _broadcast(e: Emitter, i: ast.SubgroupBroadcast):
    value, lane = e.value(i.value), e.value(i.index)
    scope = e.m.enum_constant("Scope", "Subgroup")
    lane_word = e.emit("OpBitcast", e.u32, convert(e, lane, I32))
    return (Typed(e.emit("OpGroupNonUniformShuffle", e.value_type(i.type), scope, value.id, lane_word), i.type),)


GROUP_OPERATIONS = {"reduce": "Reduce", "inclusive_scan": "InclusiveScan", "exclusive_scan": "ExclusiveScan"}
GROUP_ARITHMETIC = {("add", "int"): "OpGroupNonUniformIAdd", ("add", "float"): "OpGroupNonUniformFAdd",
                    ("add", "complex"): "OpGroupNonUniformFAdd", ("max", "int"): "OpGroupNonUniformSMax",
                    ("max", "float"): "OpGroupNonUniformFMax", ("min", "int"): "OpGroupNonUniformSMin",
                    ("min", "float"): "OpGroupNonUniformFMin"}


@emits(ast.SubgroupOp)
def _subgroup_operation(e: Emitter, i: ast.SubgroupOp):
    value = e.value(i.operand)
    scope = e.m.enum_constant("Scope", "Subgroup")
    opname = GROUP_ARITHMETIC[(i.op, kind(i.type))]
    result = e.emit(opname, e.value_type(i.type), scope, GROUP_OPERATIONS[i.kind], value.id)
    return (finish(e, i.type, result),)
