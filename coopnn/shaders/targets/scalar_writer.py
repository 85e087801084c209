"""Kernel rules (activations, their derivatives, loss terms) emitted as float32 SPIR-V scalars.

`ScalarWriter` offers the helpers the rules are written with (`coopnn.shaders.kernel.ops.KernelWriter`) and emits
each instruction on one float32 (or bool) scalar id, so the tiled step kernel applies the one definition of every
activation, derivative and loss to the elements of its tiles, and the cooperative-matrix tile targets their
epilogues to matrix components. The opcodes are the targets' shared ones (`coopnn.shaders.targets.scalar_math`); max
and min are GLSL FMax/FMin as on the cooperative-vector target.
"""

from __future__ import annotations

from typing import Any, Mapping

from coopnn.graph.ir import Op
from coopnn.shaders.kernel import activations
from coopnn.shaders.kernel.program import VecType
from coopnn.shaders.targets.scalar_math import ARITHMETIC, COMPARISONS, GLSL_UNARY, LOGICAL, TANH_LIMIT, numpy_pow

_MINMAX = {"max": "FMax", "min": "FMin"}


class ScalarWriter:
    def __init__(self, module, fn):
        self.m, self.fn = module, fn
        self.f32, self.boolean = module.type_float(32), module.type_bool()
        self.bools: set = set()  # ids of bool results

    def constant(self, value: float):
        return self.m.constant(self.f32, float(value))

    def glsl(self, name: str, *args):
        return self.fn.ext_inst(self.f32, name, *args)

    # ----- KernelWriter -----------------------------------------------------------------------------------------------

    def type_of(self, value) -> VecType:
        return VecType("bool" if value in self.bools else "f32", 1)

    def splat(self, value: float, size: int, dtype: str = "f32"):
        if not isinstance(value, (bool, int, float)):  # a value already (rules splat whatever operand they get)
            return value
        if dtype == "bool":
            made = self.m.constant(self.boolean, bool(value))
            self.bools.add(made)
            return made
        return self.constant(value)

    def _bool(self, made):
        self.bools.add(made)
        return made

    def unary(self, op: str, x):
        if op == "neg":
            return self.fn.ops.float_negate(self.f32, x)
        if op == "not":
            return self._bool(self.fn.ops.logical_not(self.boolean, x))
        if op == "positive":
            return self.select(self.fn.ops.float_greater(self.boolean, x, self.constant(0.0)),
                               self.constant(1.0), self.constant(0.0))
        if op == "tanh":
            # clamped first, as every target does (TANH_LIMIT)
            return self.glsl("Tanh", self.glsl("FClamp", x, self.constant(-TANH_LIMIT), self.constant(TANH_LIMIT)))
        return self.glsl(GLSL_UNARY[op], x)

    def binary(self, op: str, a, b):
        if op in ARITHMETIC:
            return ARITHMETIC[op](self.fn.ops, self.f32, a, b)
        if op in _MINMAX:
            return self.glsl(_MINMAX[op], a, b)
        if op in LOGICAL:
            return self._bool(LOGICAL[op](self.fn.ops, self.boolean, a, b))
        if op == "pow":
            return numpy_pow(self.fn, self.f32, self.boolean, self.glsl, self.constant, a, b)
        raise ValueError(f"no scalar form of kernel instruction {op!r}")

    def scalar(self, op: str, x, value: float, *, left: bool = False):
        c = self.constant(value)
        return self.binary(op, c, x) if left else self.binary(op, x, c)

    def compare(self, op: str, a, b):
        return self._bool(COMPARISONS[op](self.fn.ops, self.boolean, a, b))

    def select(self, cond, a, b):
        result_type = self.boolean if a in self.bools else self.f32
        made = self.fn.ops.select(result_type, cond, a, b)
        return self._bool(made) if result_type == self.boolean else made

    def cast(self, x, dtype: str):
        """The kernel's `cast`: float32 to bool is true for non-zero and NaN (numpy's bool(x)); bool to 1.0 or 0.0."""
        if dtype == "bool":
            return self._bool(self.fn.ops.float_not_equal(self.boolean, x, self.constant(0.0)))
        return self.fn.ops.select(self.f32, x, self.constant(1.0), self.constant(0.0))

    def activation(self, op: Op, x, attrs: Mapping[str, Any]):
        return activations.apply(self, op, x, attrs)

    def function(self, function, *arguments) -> tuple:
        from coopnn.tl.functions.lower import apply  # coopnn.tl reads the kernel level: imported when used

        return apply(self, function, arguments)
