"""The GLSL include of an export (`NAME.glsl`): `NAME_eval(inputs, outputs)` over the weights buffer, with
GL_NV_cooperative_vector (each layer one coopVecMatMulAddNV over InferencingOptimal matrices at offsets given as
specialization constants) or, with `NAME_PORTABLE` defined, plain loops over the row-major file (any GPU).
"""

from __future__ import annotations

from coopnn.export.source import Export, Language, activated, write_source

COOPVEC_EXTENSIONS = ("GL_NV_cooperative_vector", "GL_EXT_shader_explicit_arithmetic_types_float16")


def write_glsl(export: Export) -> str:
    return write_source(export, GLSL)


def _declarations(export: Export) -> list[str]:
    n, up, plan = export.name, export.upper, export.plan
    return [f"const int {up}_INPUTS = {plan.inputs};", f"const int {up}_OUTPUTS = {plan.outputs};",
            f"layout(set = {up}_WEIGHTS_SET, binding = {up}_WEIGHTS_BINDING, std430) readonly buffer {n}_Weights "
            f"{{ uint {n}_weights[]; }};"]


def _offsets(export: Export, specialized: bool) -> list[str]:
    """Every offset: row-major file offsets as constants, or specialization constants defaulting to them."""
    lines = []
    for name, index, offset in export.offsets():
        layout = f"layout(constant_id = {export.upper}_SPEC_ID + {index}) " if specialized else ""
        lines.append(f"{layout}const uint {name} = {offset}u;")
    return lines


def _loads(export: Export) -> list[str]:
    """`NAME_load(element)`: element `element` of the buffer, widened; `NAME_table<k>(element)`: of table k."""
    n, element = export.name, export.format.bits // 8
    if element == 2:
        lines = [f"float {n}_load(uint element) {{",
                 f"    uint word = {n}_weights[element >> 1];",
                 "    return unpackHalf2x16((element & 1u) != 0u ? word >> 16 : word).x;", "}"]
    else:
        lines = [f"float {n}_load(uint element) {{ return uintBitsToFloat({n}_weights[element]); }}"]
    return lines + [f"float {n}_table{k}(uint element) {{ return {n}_load({export.table_constant(k)} / {element}u + "
                    f"element); }}" for k in range(len(export.tables))]


def _bias_at(export: Export, layer: int) -> str:
    return f"({export.constant(layer, 'BIAS')} / {export.format.bits // 8}u) + o"


def _weight_at(export: Export, layer: int) -> str:
    """Element indices: the file's byte offsets over the element size, rows of `columns` elements."""
    columns = export.regions[layer].matrix.columns
    return f"({export.constant(layer, 'MATRIX')} / {export.format.bits // 8}u) + o * {columns}u + k"


def _coopvec(export: Export) -> list[str]:
    n, plan = export.name, export.plan
    half = "gl_ComponentTypeFloat16NV"
    first = export.regions[0].matrix.columns
    lines = [f"    float encoded[{len(plan.encoded)}];", f"    {n}_encode(inputs, encoded);",
              f"    coopvecNV<float16_t, {first}> v0;",
              f"    for (int k = 0; k < {len(plan.encoded)}; ++k) v0[k] = float16_t(encoded[k]);",
              # zeros filled element by element: a splat is OpCompositeConstructReplicateEXT, which would need
              # the shaderReplicatedComposites feature
              f"    for (int k = {len(plan.encoded)}; k < {first}; ++k) v0[k] = float16_t(0.0);"]
    for i, (layer, where) in enumerate(zip(plan.layers, export.regions)):
        rows, columns = where.matrix.rows, where.matrix.columns
        lines += [f"    coopvecNV<float16_t, {rows}> v{i + 1};",
                  f"    coopVecMatMulAddNV(v{i + 1}, v{i}, {half}, {n}_weights, {export.constant(i, 'MATRIX')}, "
                  f"{half}, {n}_weights, {export.constant(i, 'BIAS')}, {half}, {rows}, {columns}, "
                  f"gl_CooperativeVectorMatrixLayoutInferencingOptimalNV, false, 0);"]
        if layer.activation is not None:
            lines.append(f"    for (int o = 0; o < {rows}; ++o) "
                         f"v{i + 1}[o] = float16_t({activated(export, i, f'float(v{i + 1}[o])')});")
    last = len(plan.layers)
    lines += [f"    for (int o = 0; o < {plan.outputs}; ++o) outputs[o] = float(v{last}[o]);"]
    return lines


GLSL = Language(suffix="glsl", note="; include it right after #version.",
                requirements=tuple(f"#extension {e} : require" for e in COOPVEC_EXTENSIONS), qualifier="in ",
                declarations=_declarations, offsets=_offsets, loads=_loads, unsigned="u", bias_at=_bias_at,
                weight_at=_weight_at, coopvec=_coopvec)
