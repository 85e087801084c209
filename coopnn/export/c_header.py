"""`NAME.h`: the weights file's layout for C and C++ engines (the offsets the portable variant uses as constants, and
the `CoopnnNetwork` that `coopnn_weights.h` converts and uploads), and that helper's own source, shipped beside this
module."""

from __future__ import annotations

from pathlib import Path

from coopnn.export.source import Export

HELPER_NAME = "coopnn_weights.h"
COMPONENT_TYPES = {"fp16": 0, "fp32": 1}  # VkComponentTypeKHR


def helper_source() -> str:
    return (Path(__file__).parent / HELPER_NAME).read_text()


def write_header(export: Export, manifest: dict) -> str:
    n, up, plan = export.name, export.upper, export.plan
    weights = manifest["weights"]
    lines = [f"/* {n}.h: the layout of {weights['file']} ({weights['format']}), written by coopnn's shader export of "
             f"{plan.name!r}; read it with {HELPER_NAME}. */",
             f"#ifndef {up}_H", f"#define {up}_H", "", f'#include "{HELPER_NAME}"', "",
             f"#define {up}_INPUTS {plan.inputs}", f"#define {up}_OUTPUTS {plan.outputs}",
             f"#define {up}_LAYERS {len(plan.layers)}", f'#define {up}_WEIGHTS_FILE "{weights["file"]}"',
             f"#define {up}_WEIGHTS_SIZE {weights['size']}u", f"#define {up}_WEIGHTS_FNV1A64 0x{weights['fnv1a64']}ull",
             f"/* Offsets in the file (the portable variant's constants); the cooperative-vector variant's come "
             f"from coopnn_weights_layout. */"]
    for i, where in enumerate(export.regions):
        lines += [f"#define {export.constant(i, 'MATRIX')} {where.matrix.offset}u",
                  f"#define {export.constant(i, 'BIAS')} {where.bias.offset}u"]
    matrices = ", ".join(f"{{{m.offset}u, {m.size}u, {m.rows}u, {m.columns}u, {m.stride}u}}"
                         for m in (w.matrix for w in export.regions))
    biases = ", ".join(f"{{{b.offset}u, {b.size}u}}" for b in (w.bias for w in export.regions))
    lines += [f"#define {export.table_constant(k)} {t.offset}u" for k, t in enumerate(export.tables)]
    lines += ["", f"static const CoopnnMatrix {n}_matrices[{up}_LAYERS] = {{{matrices}}};",
              f"static const CoopnnVector {n}_biases[{up}_LAYERS] = {{{biases}}};"]
    if export.tables:
        tables = ", ".join(f"{{{t.offset}u, {t.size}u}}" for t in export.tables)
        lines.append(f"static const CoopnnVector {n}_tables[{len(export.tables)}] = {{{tables}}};")
    lines += [f'static const CoopnnNetwork {n}_network = {{"{n}", {up}_LAYERS, {n}_matrices, {n}_biases, '
              f"{len(export.tables)}, {f'{n}_tables' if export.tables else 'NULL'}, {up}_WEIGHTS_SIZE, "
              f"{up}_WEIGHTS_FNV1A64, {COMPONENT_TYPES[export.format.name]}}};",
              "", f"#endif /* {up}_H */", ""]
    return "\n".join(lines)
