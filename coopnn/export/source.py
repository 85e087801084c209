"""What the GLSL and Slang writers share: the names an export declares, the input stage's function body and the
activation functions, in the float scalar syntax both languages read."""

from __future__ import annotations

import re
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
