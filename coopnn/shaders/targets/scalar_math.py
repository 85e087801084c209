"""What the SPIR-V targets lower kernel instructions to alike: the SPIR-V opcode or GLSL.std.450 instruction of the
instructions that are one, the tanh clamp, and scalar sequences several targets emit the same way."""

from __future__ import annotations

from typing import Callable
from coopnn.shaders.spirv.ops import Ops

ARITHMETIC = {"add": Ops.float_add, "sub": Ops.float_sub, "mul": Ops.float_mul, "div": Ops.float_div}
LOGICAL = {"and": Ops.logical_and, "or": Ops.logical_or, "xor": Ops.logical_not_equal}
COMPARISONS = {"cmp.lt": Ops.float_less, "cmp.le": Ops.float_at_most, "cmp.gt": Ops.float_greater,
               "cmp.ge": Ops.float_at_least, "cmp.eq": Ops.float_equal}
GLSL_UNARY = {"abs": "FAbs", "exp": "Exp", "log": "Log", "sin": "Sin", "cos": "Cos", "sqrt": "Sqrt", "floor": "Floor",
              "ceil": "Ceil", "sign": "FSign"}
# tanh(±10) is ±1 in float32; clamping first keeps implementations that compute tanh through exp from inf/inf.
TANH_LIMIT = 10.0


def numpy_pow(fn, f32, boolean, glsl: Callable, constant: Callable[[float], object], a, b):
    """numpy's power on float32 scalars: negative bases give a signed result for integer exponents and NaN
    otherwise (GLSL's Pow is undefined for them). `glsl(name, *args)` emits a float32 GLSL.std.450 instruction and
    `constant(x)` gives a float32 constant."""
    magnitude = glsl("Pow", glsl("FAbs", a), b)
    negative = fn.ops.float_less(boolean, a, constant(0.0))
    integral = fn.ops.float_equal(boolean, glsl("Floor", b), b)
    half = fn.ops.float_mul(f32, b, constant(0.5))
    odd = fn.ops.float_ordered_not_equal(boolean, glsl("Floor", half), half)
    signed = fn.ops.select(f32, odd, fn.ops.float_negate(f32, magnitude), magnitude)
    on_negative = fn.ops.select(f32, integral, signed, constant(float("nan")))
    return fn.ops.select(f32, negative, on_negative, magnitude)
