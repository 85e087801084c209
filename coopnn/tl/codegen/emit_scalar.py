"""Emitting the scalar instructions: arithmetic and comparison through op tables by kind of type, math through
GLSL.std.450 (float64 in float32: the set has no double precision transcendentals), casts, constants, builtins and
subgroup operations. Complex values are two-component vectors; bf16 results are rounded after each operation."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.codegen.emitter import CoopValue, Emitter, Typed, emits
from coopnn.tl.codegen.types import constant, round_bf16
from coopnn.tl.types import F32, I32, CoopMatrixType, ScalarType
from coopnn.shaders.spirv.ops import Ops


def kind(t: ScalarType) -> str:
    return "bool" if t.is_bool else "int" if t.is_integer else "complex" if t.is_complex else "float"


BINARY = {  # (op, kind) -> SPIR-V instruction, or ("GLSL", name)
    ("add", "int"): Ops.int_add, ("add", "float"): Ops.float_add, ("add", "complex"): Ops.float_add,
    ("sub", "int"): Ops.int_sub, ("sub", "float"): Ops.float_sub, ("sub", "complex"): Ops.float_sub,
    ("mul", "int"): Ops.int_mul, ("mul", "float"): Ops.float_mul,
    ("div", "int"): Ops.int_div, ("div", "float"): Ops.float_div,
    ("rem", "float"): Ops.float_rem,
    ("max", "int"): ("GLSL", "SMax"), ("max", "float"): ("GLSL", "FMax"),
    ("min", "int"): ("GLSL", "SMin"), ("min", "float"): ("GLSL", "FMin"),
    ("shl", "int"): Ops.shift_left, ("shr", "int"): Ops.shift_right_arithmetic,
    ("and", "int"): Ops.bitwise_and, ("or", "int"): Ops.bitwise_or, ("xor", "int"): Ops.bitwise_xor,
    ("and", "bool"): Ops.logical_and, ("or", "bool"): Ops.logical_or, ("xor", "bool"): Ops.logical_not_equal,
}
COMPARE = {
    ("equal", "int"): Ops.int_equal, ("not_equal", "int"): Ops.int_not_equal,
    ("greater_than", "int"): Ops.int_greater, ("greater_than_equal", "int"): Ops.int_at_least,
    ("less_than", "int"): Ops.int_less, ("less_than_equal", "int"): Ops.int_at_most,
    ("equal", "float"): Ops.float_equal, ("not_equal", "float"): Ops.float_not_equal,
    ("greater_than", "float"): Ops.float_greater, ("greater_than_equal", "float"): Ops.float_at_least,
    ("less_than", "float"): Ops.float_less, ("less_than_equal", "float"): Ops.float_at_most,
}
MATH = {"cos": "Cos", "sin": "Sin", "exp": "Exp", "exp2": "Exp2", "log": "Log", "log2": "Log2"}


def finish(e: Emitter, t: ScalarType, value) -> Typed:
    return Typed(round_bf16(e.fn, value) if t.name == "bf16" else value, t)


def _complex_parts(e: Emitter, t: ScalarType, value):
    part = e.value_type(t.component())
    return (e.fn.ops.extract(part, value, 0), e.fn.ops.extract(part, value, 1))


def _complex(e: Emitter, t: ScalarType, real, imaginary):
    return e.fn.ops.construct(e.value_type(t), real, imaginary)


def complex_multiply(e: Emitter, t: ScalarType, a, b):
    part = e.value_type(t.component())
    (ar, ai), (br, bi) = _complex_parts(e, t, a), _complex_parts(e, t, b)
    real = e.fn.ops.float_sub(part, e.fn.ops.float_mul(part, ar, br), e.fn.ops.float_mul(part, ai, bi))
    imaginary = e.fn.ops.float_add(part, e.fn.ops.float_mul(part, ar, bi), e.fn.ops.float_mul(part, ai, br))
    return _complex(e, t, real, imaginary)


def _complex_divide(e: Emitter, t: ScalarType, a, b):
    part = e.value_type(t.component())
    br, bi = _complex_parts(e, t, b)
    norm = e.fn.ops.float_add(part, e.fn.ops.float_mul(part, br, br), e.fn.ops.float_mul(part, bi, bi))
    conjugate = _complex(e, t, br, e.fn.ops.float_negate(part, bi))
    product = complex_multiply(e, t, a, conjugate)
    return e.fn.ops.float_div(e.value_type(t), product, e.fn.ops.construct(e.value_type(t), norm, norm))


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
    return instruction(e.fn.ops, e.value_type(t), a, b)


def _integer_remainder(e: Emitter, t: ScalarType, a, b):
    """a - (a / b) b, the remainder with the dividend's sign: NVIDIA's driver computed OpSRem of negative operands as
    an unsigned remainder (bench/results/nvidia-h200-2026-12-02-tl-remainder.md), so it is built from OpSDiv."""
    kind_type = e.value_type(t)
    return e.fn.ops.int_sub(kind_type, a, e.fn.ops.int_mul(kind_type, e.fn.ops.int_div(kind_type, a, b), b))


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
                "neg": lambda: e.fn.ops.float_negate(e.value_type(t), a.id),
                "conj": lambda: _complex(e, t, real, e.fn.ops.float_negate(part, imaginary))}[i.op]()
    if i.op == "abs":
        return e.fn.ext_inst(e.value_type(t), "SAbs" if t.is_integer else "FAbs", a.id)
    if i.op == "neg":
        return (Ops.int_negate if t.is_integer else Ops.float_negate)(e.fn.ops, e.value_type(t), a.id)
    return (Ops.logical_not if t.is_bool else Ops.bitwise_not)(e.fn.ops, e.value_type(t), a.id)


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
        same = e.fn.ops.float_equal(vector, a.id, b.id)
        equal = e.fn.ops.all_true(e.bool, same)
        return (Typed(equal if i.op == "equal" else e.fn.ops.logical_not(e.bool, equal), ScalarType("bool")),)
    if t.is_bool:
        compare = Ops.logical_equal if i.op == "equal" else Ops.logical_not_equal
    else:
        compare = COMPARE[(i.op, kind(t))]
    return (Typed(compare(e.fn.ops, e.bool, a.id, b.id), ScalarType("bool")),)


def _exp(e: Emitter, t: ScalarType, value, base_two: bool):
    """exp of a complex value: e^re (cos im + i sin im); base two scales by ln 2 first."""
    part_type = t.component()
    part = e.value_type(part_type)
    real, imaginary = _complex_parts(e, t, value)
    if base_two:
        ln2 = constant(e.m, part_type, 0.6931471805599453)
        real, imaginary = e.fn.ops.float_mul(part, real, ln2), e.fn.ops.float_mul(part, imaginary, ln2)
    magnitude = math_in_float32(e, part_type, "Exp", real)
    cos, sin = (math_in_float32(e, part_type, name, imaginary) for name in ("Cos", "Sin"))
    return _complex(e, t, e.fn.ops.float_mul(part, magnitude, cos), e.fn.ops.float_mul(part, magnitude, sin))


def math_in_float32(e: Emitter, t: ScalarType, name: str, value):
    if t.name != "f64":
        return e.fn.ext_inst(e.value_type(t), name, value)
    f32 = e.value_type(F32)
    narrow = e.fn.ext_inst(f32, name, e.fn.ops.float_convert(f32, value))
    return e.fn.ops.float_convert(e.value_type(t), narrow)


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
            return e.fn.ops.float_convert(e.value_type(target), value.id)
        real = convert(e, value, part)
        return _complex(e, target, real, constant(e.m, part, 0.0))
    conversion = {("int", "int"): Ops.int_convert, ("float", "float"): Ops.float_convert,
                  ("int", "float"): Ops.int_to_float, ("float", "int"): Ops.float_to_int}[(kind(source), kind(target))]
    held = e.value_type(target)
    if conversion in (Ops.int_convert, Ops.float_convert) and held == e.value_type(source):
        return value.id
    result = conversion(e.fn.ops, held, value.id)
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
    return e.fn.ops.uint_div(e.u32, local, e.word(size)) if axis == 0 else local


@emits(ast.Builtin)
def _builtin(e: Emitter, i: ast.Builtin):
    word = _builtin_word(e, i)
    signed = e.fn.ops.bitcast(e.m.type_int(32, True), word)
    held = e.value_type(i.type)
    return (Typed(signed if held == e.m.type_int(32, True) else e.fn.ops.int_convert(held, signed), i.type),)


@emits(ast.SubgroupBroadcast)
def _broadcast(e: Emitter, i: ast.SubgroupBroadcast):
    value, lane = e.value(i.value), e.value(i.index)
    scope = e.m.enum_constant("Scope", "Subgroup")
    lane_word = e.fn.ops.bitcast(e.u32, convert(e, lane, I32))
    return (Typed(e.fn.ops.group_shuffle(e.value_type(i.type), scope, value.id, lane_word), i.type),)


GROUP_OPERATIONS = {"reduce": "Reduce", "inclusive_scan": "InclusiveScan", "exclusive_scan": "ExclusiveScan"}
GROUP_ARITHMETIC = {("add", "int"): Ops.group_int_add, ("add", "float"): Ops.group_float_add,
                    ("add", "complex"): Ops.group_float_add, ("max", "int"): Ops.group_int_max,
                    ("max", "float"): Ops.group_float_max, ("min", "int"): Ops.group_int_min,
                    ("min", "float"): Ops.group_float_min}


@emits(ast.SubgroupOp)
def _subgroup_operation(e: Emitter, i: ast.SubgroupOp):
    value = e.value(i.operand)
    scope = e.m.enum_constant("Scope", "Subgroup")
    group = GROUP_ARITHMETIC[(i.op, kind(i.type))]
    result = group(e.fn.ops, e.value_type(i.type), scope, GROUP_OPERATIONS[i.kind], value.id)
    return (finish(e, i.type, result),)
