"""What the SPIR-V targets lower kernel instructions to alike: the SPIR-V opcode or GLSL.std.450 instruction of the
instructions that are one, the tanh clamp, and scalar sequences several targets emit the same way."""

from __future__ import annotations

from typing import Callable

ARITHMETIC = {"add": "OpFAdd", "sub": "OpFSub", "mul": "OpFMul", "div": "OpFDiv"}
LOGICAL = {"and": "OpLogicalAnd", "or": "OpLogicalOr", "xor": "OpLogicalNotEqual"}
COMPARISONS = {"cmp.lt": "OpFOrdLessThan", "cmp.le": "OpFOrdLessThanEqual", "cmp.gt": "OpFOrdGreaterThan",
               "cmp.ge": "OpFOrdGreaterThanEqual", "cmp.eq": "OpFOrdEqual"}
GLSL_UNARY = {"abs": "FAbs", "exp": "Exp", "log": "Log", "sin": "Sin", "cos": "Cos", "sqrt": "Sqrt", "floor": "Floor",
              "ceil": "Ceil", "sign": "FSign"}
# tanh(±10) is ±1 in float32; clamping first keeps implementations that compute tanh through exp from inf/inf.
TANH_LIMIT = 10.0


def numpy_pow(fn, f32, boolean, glsl: Callable, constant: Callable[[float], object], a, b):
    """numpy's power on float32 scalars: negative bases give a signed result for integer exponents and NaN
    otherwise (GLSL's Pow is undefined for them). `glsl(name, *args)` emits a float32 GLSL.std.450 instruction and
    `constant(x)` gives a float32 constant."""
    magnitude = glsl("Pow", glsl("FAbs", a), b)
    negative = fn.emit("OpFOrdLessThan", boolean, a, constant(0.0))
    integral = fn.emit("OpFOrdEqual", boolean, glsl("Floor", b), b)
    half = fn.emit("OpFMul", f32, b, constant(0.5))
    odd = fn.emit("OpFOrdNotEqual", boolean, glsl("Floor", half), half)
    signed = fn.emit("OpSelect", f32, odd, fn.emit("OpFNegate", f32, magnitude), magnitude)
    on_negative = fn.emit("OpSelect", f32, integral, signed, constant(float("nan")))
    return fn.emit("OpSelect", f32, negative, on_negative, magnitude)
