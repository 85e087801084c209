"""The input stage as a scalar program: every value of the graph's prefix held as a numpy array of scalar expression
names (one per feature, in the value's feature shape), and the statements that compute them.

Shape operators (reshape, concat, slice, transpose) only rearrange names, so they cost nothing in the shader;
elementwise operators add one statement per element. Graph constants reach the lowerings as numeric arrays and
become literals where a lowering reads them (`ScalarProgram.expressions`); a lowering that reads a large constant
element by element (a grid's feature vectors) puts it in a table instead (`ScalarProgram.table`). The statements use
the syntax GLSL and Slang share for float and uint scalars (`sin(t3)`, `t1 * 6.2831855`, `(x >= 0.0 ? a : b)`,
`(t4 * 2654435761u) % 1024u`), so one program serves both languages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def literal(value: float) -> str:
    """A float32 literal both languages read exactly (the shortest repr of the float32 value)."""
    value = np.float32(value)
    if not np.isfinite(value):
        raise ValueError(f"{value} has no literal")
    text = str(value)
    return text if ("." in text or "e" in text) else text + ".0"


TABLE = "@table"  # `@table<k>(element)` reads element `element` of table k; the writers name the function


@dataclass
class ScalarProgram:
    """Statements `type name = expression;` in order (type "float" or "uint"), and the tables (float32 vectors the
    weights file holds after the layers) the statements read through `@table<k>(element)`."""

    statements: list[tuple[str, str, str]] = field(default_factory=list)
    tables: list[tuple[str, np.ndarray]] = field(default_factory=list)

    def assign(self, expression: str, type: str = "float") -> str:
        """A new temporary holding `expression`; its name."""
        name = f"t{len(self.statements)}"
        self.statements.append((type, name, expression))
        return name

    def table(self, name: str, values: np.ndarray) -> str:
        """Register `values` (named after the node that reads them) as a table; the function that reads it."""
        self.tables.append((name, np.asarray(values, np.float32).ravel()))
        return f"{TABLE}{len(self.tables) - 1}"

    @staticmethod
    def expressions(operand: np.ndarray) -> np.ndarray:
        """`operand` as expressions: computed values (object arrays) as they are, a graph constant (a numeric array,
        converted only here, so that a large one a lowering never reads costs nothing) as literals."""
        if operand.dtype == object:
            return operand
        flat = [literal(v) for v in np.asarray(operand, np.float32).ravel()]
        return np.array(flat, dtype=object).reshape(np.shape(operand))

    def apply(self, function, *operands: np.ndarray) -> np.ndarray:
        """One statement per element of the broadcast `operands`: `function(*names)` gives its expression."""
        broadcast = np.broadcast_arrays(*[self.expressions(o) for o in operands])
        out = np.empty(broadcast[0].shape, dtype=object)
        for index in np.ndindex(out.shape):
            out[index] = self.assign(function(*(b[index] for b in broadcast)))
        return out
