"""What the GLSL and Slang writers share: the names an export declares, the layout of the file they write
(`write_source` over a `Language`), the input stage's function body and the activation functions, in the float scalar
syntax both languages read."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from coopnn.errors import InputError
from coopnn.export import activations
from coopnn.export.plan import ExportPlan
from coopnn.export.scalar import TABLE
from coopnn.export.weights import LayerRegions, Region
from coopnn.layouts.formats.format import WeightFormat


def check_name(name: str) -> str:
    """`name` when it is an identifier both languages and C accept (it prefixes every exported symbol)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name or "") or "__" in name:
        raise InputError(f"export name {name!r} must be a C identifier (a letter, then letters, digits and single "
                         f"underscores): it prefixes every symbol of the exported shader")
    return name


@dataclass(frozen=True)
class Export:
    """Everything a writer reads: the plan, its format, the file's regions, and the prefix of every symbol."""

    plan: ExportPlan
    format: WeightFormat
    regions: tuple[LayerRegions, ...]
    name: str
    tables: tuple[Region, ...] = ()

    @property
    def upper(self) -> str:
        return self.name.upper()

    def constant(self, layer: int, part: str) -> str:
        """The name of layer `layer`'s `part` ("MATRIX" or "BIAS") offset."""
        return f"{self.upper}_L{layer}_{part}"

    def spec_index(self, layer: int, part: str) -> int:
        """That offset's specialization constant id, past `NAME_SPEC_ID`."""
        return 2 * layer + (part == "BIAS")

    def table_constant(self, table: int) -> str:
        return f"{self.upper}_T{table}"

    def table_spec_index(self, table: int) -> int:
        """Table offsets follow the layers' among the specialization constants."""
        return 2 * len(self.regions) + table

    def offsets(self) -> list[tuple[str, int, int]]:
        """(constant name, specialization index, file offset) of every matrix, bias and table."""
        out = [(self.constant(i, part), self.spec_index(i, part), region.offset)
               for i, where in enumerate(self.regions) for part, region in (("MATRIX", where.matrix),
                                                                            ("BIAS", where.bias))]
        return out + [(self.table_constant(k), self.table_spec_index(k), t.offset) for k, t in enumerate(self.tables)]


def activation_functions(export: Export, scalar: str = "float") -> list[str]:
    """`scalar NAME_act<i>(scalar x)` for each layer with an activation."""
    lines = []
    for i, layer in enumerate(export.plan.layers):
        if layer.activation is not None:
            body = activations.body(layer.activation.op, layer.activation.attrs, f"Linear {layer.name!r}")
            lines.append(f"{scalar} {export.name}_act{i}({scalar} x) {{ return {body}; }}")
    return lines


def activated(export: Export, layer: int, value: str) -> str:
    """`value` after layer `layer`'s activation (itself without one)."""
    return f"{export.name}_act{layer}({value})" if export.plan.layers[layer].activation is not None else value


def stage_body(export: Export, encoded: str) -> list[str]:
    """The statements of the input stage, ending with the assignments of `encoded[i]`."""
    lines = [f"    {kind} {name} = {expression};" for kind, name, expression in export.plan.statements]
    lines += [f"    {encoded}[{i}] = {expression};" for i, expression in enumerate(export.plan.encoded)]
    return [line.replace(TABLE, f"{export.name}_table") for line in lines]


@dataclass(frozen=True)
class Language:
    """What a writer spells in its own language; `write_source` lays out the rest of the file around it."""

    suffix: str  # the file's extension, which also names its include guard
    note: str  # the end of the file's first comment line
    requirements: tuple[str, ...]  # lines the cooperative-vector variant needs before any declaration
    qualifier: str  # how an input array parameter is declared ("in " or nothing)
    declarations: Callable[[Export], list[str]]  # the INPUTS and OUTPUTS constants and the weights buffer
    offsets: Callable[[Export, bool], list[str]]  # every offset: constants, or specialization constants
    loads: Callable[[Export], list[str]]  # `NAME_load` and `NAME_table<k>`
    unsigned: str  # the suffix of an unsigned integer literal
    bias_at: Callable[[Export, int], str]  # where `NAME_load` finds element o of layer i's bias
    weight_at: Callable[[Export, int], str]  # where it finds element (o, k) of layer i's matrix
    coopvec: Callable[[Export], list[str]]  # the body of `NAME_eval` with cooperative vectors, weights in fp16


def write_source(export: Export, language: Language) -> str:
    """The exported source: `NAME_encode`, and `NAME_eval` in both variants, chosen by `NAME_PORTABLE`."""
    n, up, plan, guard = export.name, export.upper, export.plan, f"{export.upper}_{language.suffix.upper()}"
    lines = [f"// {n}.{language.suffix}: the network {plan.name!r} exported by coopnn{language.note}",
             f"// {n}_eval(inputs[{plan.inputs}], outputs[{plan.outputs}]) evaluates it. Define {up}_PORTABLE for the "
             f"variant without cooperative vectors;",
             f"// {up}_WEIGHTS_SET / {up}_WEIGHTS_BINDING place its weights buffer (default 0, 0) and {up}_SPEC_ID the "
             f"first of its specialization constants (default 0).",
             f"#ifndef {guard}", f"#define {guard}"]
    if language.requirements:
        lines += [f"#ifndef {up}_PORTABLE", *language.requirements, "#endif"]
    for macro, default in (("WEIGHTS_SET", 0), ("WEIGHTS_BINDING", 0), ("SPEC_ID", 0)):
        lines += [f"#ifndef {up}_{macro}", f"#define {up}_{macro} {default}", "#endif"]
    lines += language.declarations(export) + ["", f"#ifdef {up}_PORTABLE"]
    lines += language.offsets(export, False) + ["#else"] + language.offsets(export, True) + ["#endif"]
    lines += language.loads(export) + activation_functions(export)
    lines += ["", f"void {n}_encode({language.qualifier}float inputs[{plan.inputs}], out float "
                  f"encoded[{len(plan.encoded)}]) {{"]
    lines += stage_body(export, "encoded") + ["}", "", f"#ifdef {up}_PORTABLE"]
    lines += _eval(export, language, _portable(export, language)) + ["#else"] + _coopvec_eval(export, language)
    return "\n".join(lines + ["#endif", f"#endif  // {guard}", ""])


def _eval(export: Export, language: Language, body: list[str]) -> list[str]:
    plan = export.plan
    return [f"void {export.name}_eval({language.qualifier}float inputs[{plan.inputs}], out float "
            f"outputs[{plan.outputs}]) {{", *body, "}"]


def _portable(export: Export, language: Language) -> list[str]:
    """The body of `NAME_eval` in plain loops over the row-major file."""
    n, plan, u = export.name, export.plan, language.unsigned
    lines = [f"    float h0[{len(plan.encoded)}];", f"    {n}_encode(inputs, h0);"]
    for i, layer in enumerate(plan.layers):
        lines += [f"    float h{i + 1}[{layer.outputs}];",
                  f"    for (uint o = 0{u}; o < {layer.outputs}{u}; ++o) {{",
                  f"        float sum = {n}_load({language.bias_at(export, i)});",
                  f"        for (uint k = 0{u}; k < {layer.inputs}{u}; ++k)",
                  f"            sum += {n}_load({language.weight_at(export, i)}) * h{i}[k];",
                  f"        h{i + 1}[o] = {activated(export, i, 'sum')};", "    }"]
    return lines + [f"    for (int o = 0; o < {plan.outputs}; ++o) outputs[o] = h{len(plan.layers)}[o];"]


def _coopvec_eval(export: Export, language: Language) -> list[str]:
    """The cooperative-vector `NAME_eval`, or a compile error where the weights are not the fp16 it reads."""
    if export.format.name != "fp16":
        return [f'#error "{export.name} was exported with {export.format.name} weights; its cooperative-vector '
                f'variant reads fp16 (export with weights=fp16, or define {export.upper}_PORTABLE)"']
    return _eval(export, language, language.coopvec(export))
