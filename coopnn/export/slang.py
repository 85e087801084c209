"""The Slang module of an export (`NAME.slang`, for `#include` or `import`): `NAME_eval(inputs, outputs)` over the
weights as a ByteAddressBuffer, with Slang's `CoopVec` (each layer one coopVecMatMulAdd over InferencingOptimal
matrices at offsets given as specialization constants) or, with `NAME_PORTABLE` defined, plain loops over the
row-major file.
"""

from __future__ import annotations

from coopnn.export.source import Export, Language, activated, write_source


def write_slang(export: Export) -> str:
    return write_source(export, SLANG)


def _declarations(export: Export) -> list[str]:
    n, up, plan = export.name, export.upper, export.plan
    return [f"static const int {up}_INPUTS = {plan.inputs};", f"static const int {up}_OUTPUTS = {plan.outputs};",
            f"[[vk::binding({up}_WEIGHTS_BINDING, {up}_WEIGHTS_SET)]] ByteAddressBuffer {n}_weights;"]


def _offsets(export: Export, specialized: bool) -> list[str]:
    """Every offset: row-major file offsets as constants, or specialization constants defaulting to them."""
    if specialized:
        return [f"[[vk::constant_id({export.upper}_SPEC_ID + {index})]] const uint {name} = {offset};"
                for name, index, offset in export.offsets()]
    return [f"static const uint {name} = {offset};" for name, _, offset in export.offsets()]


def _loads(export: Export) -> list[str]:
    """`NAME_load(offset)`: the element at byte `offset`, widened; `NAME_table<k>(element)`: element of table k."""
    n, element = export.name, export.format.bits // 8
    if element == 2:
        # widened with integer operations: f16tof32 becomes 16-bit SPIR-V types, which need shaderFloat16 and
        # shaderInt16, and the portable variant asks for no feature
        lines = [f"float {n}_load(uint offset) {{",
                 f"    uint word = {n}_weights.Load(offset & ~3u);",
                 "    uint bits = ((offset & 2u) != 0u ? word >> 16 : word) & 0xFFFFu;",
                 "    uint sign = (bits & 0x8000u) << 16, exponent = (bits >> 10) & 0x1Fu, mantissa = bits & 0x3FFu;",
                 "    if (exponent == 0u) return asfloat(sign | asuint(float(mantissa) * 5.9604645e-08));",
                 "    if (exponent == 31u) return asfloat(sign | 0x7F800000u | (mantissa << 13));",
                 "    return asfloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));", "}"]
    else:
        lines = [f"float {n}_load(uint offset) {{ return asfloat({n}_weights.Load(offset)); }}"]
    return lines + [f"float {n}_table{k}(uint element) {{ return {n}_load({export.table_constant(k)} + element * "
                    f"{element}); }}" for k in range(len(export.tables))]


def _bias_at(export: Export, layer: int) -> str:
    return f"{export.constant(layer, 'BIAS')} + o * {export.format.bits // 8}"


def _weight_at(export: Export, layer: int) -> str:
    """Byte offsets, as the ByteAddressBuffer loads: rows `stride` bytes apart."""
    stride = export.regions[layer].matrix.stride
    return f"{export.constant(layer, 'MATRIX')} + o * {stride} + k * {export.format.bits // 8}"


def _coopvec(export: Export) -> list[str]:
    n, plan = export.name, export.plan
    half = "CoopVecComponentType.Float16"
    first = export.regions[0].matrix.columns
    lines = [f"    float encoded[{len(plan.encoded)}];", f"    {n}_encode(inputs, encoded);",
              # built from every component: Slang makes a default-constructed or splatted CoopVec with
              # OpCompositeConstructReplicateEXT, which would need the shaderReplicatedComposites feature
              f"    CoopVec<half, {first}> v0 = CoopVec<half, {first}>("]
    components = [f"half(encoded[{k}])" for k in range(len(plan.encoded))]
    components += ["half(0.0)"] * (first - len(plan.encoded))
    lines += [f"        {', '.join(components[k:k + 8])}{',' if k + 8 < first else ');'}" for k in range(0, first, 8)]
    for i, (layer, where) in enumerate(zip(plan.layers, export.regions)):
        rows = where.matrix.rows
        lines.append(f"    CoopVec<half, {rows}> v{i + 1} = coopVecMatMulAdd<half, {rows}>(v{i}, {half}, {n}_weights, "
                     f"{export.constant(i, 'MATRIX')}, {half}, {n}_weights, {export.constant(i, 'BIAS')}, {half}, "
                     f"CoopVecMatrixLayout.InferencingOptimal, false, 0);")
        if layer.activation is not None:
            lines.append(f"    for (int o = 0; o < {rows}; ++o) "
                         f"v{i + 1}[o] = half({activated(export, i, f'float(v{i + 1}[o])')});")
    last = len(plan.layers)
    lines += [f"    for (int o = 0; o < {plan.outputs}; ++o) outputs[o] = float(v{last}[o]);"]
    return lines


SLANG = Language(suffix="slang", note=".", requirements=(), qualifier="", declarations=_declarations,
                 offsets=_offsets, loads=_loads, unsigned="", bias_at=_bias_at, weight_at=_weight_at, coopvec=_coopvec)
