"""How the cooperative-vector target holds a kernel value: as a cooperative vector, as loose scalars, or both.

Whole-vector instructions (arithmetic, FMax, Exp, Tanh, the matrix-vector product) want an
`OpTypeCooperativeVectorNV`; what the extension does not allow on cooperative vectors (Sin, comparisons, selects,
gathers, booleans) works on the components one by one. A `Held` value keeps whichever forms have been made, in
float16 or float32, and `Forms` makes a missing one on demand (OpCompositeExtract / OpCompositeConstruct /
OpFConvert), once. Compile-time constants are made as constants in any form.

A value's `dtype` is the type its components are exact in: "f16" says every component is a float16 number, so
float32 forms are exact conversions of it; "bool" values only ever exist as scalars.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from coopnn.layouts.formats.fp16 import round_fp16
from coopnn.shaders.spirv import Function, Id, Module


@dataclass
class Held:
    dtype: str  # "f16", "f32" or "bool"
    size: int
    vectors: dict[str, Id] = field(default_factory=dict)  # component dtype -> cooperative vector
    scalars: dict[str, list[Id]] = field(default_factory=dict)  # component dtype -> one id per component
    constant: np.ndarray | None = None  # the values, when known at compile time

    @property
    def is_f16(self) -> bool:
        return self.dtype == "f16"


def float16_exact(values: np.ndarray) -> bool:
    values = np.asarray(values, np.float32)
    return bool(np.array_equal(round_fp16(values), values))


class Forms:
    """Types and conversions between the forms of held values, emitting into `fn`."""

    def __init__(self, module: Module, fn: Function):
        self.m, self.fn = module, fn
        self.scalar_types = {"f16": module.type_float(16), "f32": module.type_float(32), "bool": module.type_bool()}

    def vector_type(self, dtype: str, size: int) -> Id:
        return self.m.type_cooperative_vector_nv(self.scalar_types[dtype], size)

    def constant(self, dtype: str, value) -> Id:
        if dtype == "bool":
            return self.m.constant(self.scalar_types["bool"], bool(value))
        with np.errstate(over="ignore"):
            stored = np.float16(value) if dtype == "f16" else np.float32(value)
        return self.m.constant(self.scalar_types[dtype], float(stored))

    # ----- making held values ---------------------------------------------------------------------------------------

    def known(self, values: np.ndarray, dtype: str = "f32") -> Held:
        """A compile-time constant; float values exact in float16 are held as f16."""
        values = np.asarray(values, bool if dtype == "bool" else np.float32).reshape(-1)
        if dtype != "bool" and float16_exact(values):
            dtype = "f16"
        return Held(dtype, values.size, constant=values)

    def from_vector(self, dtype: str, size: int, vector: Id) -> Held:
        return Held(dtype, size, vectors={dtype: vector})

    def from_scalars(self, dtype: str, scalars: list[Id]) -> Held:
        return Held(dtype, len(scalars), scalars={dtype: list(scalars)})

    # ----- forms on demand ------------------------------------------------------------------------------------------

    def vector(self, held: Held, dtype: str) -> Id:
        """`held` as a cooperative vector of `dtype` components (rounded to nearest if narrower)."""
        if dtype in held.vectors:
            return held.vectors[dtype]
        vector_type = self.vector_type(dtype, held.size)
        if held.constant is not None:
            made = self.m.constant(vector_type, [self.constant(dtype, v) for v in held.constant])
        elif held.vectors:
            made = self.fn.ops.float_convert(vector_type, next(iter(held.vectors.values())))
        elif dtype in held.scalars:
            made = self.fn.ops.construct(vector_type, *held.scalars[dtype])
        else:
            made = self.fn.ops.float_convert(vector_type, self.vector(held, held.dtype))
        held.vectors[dtype] = made
        return made

    def components(self, held: Held, dtype: str) -> list[Id]:
        """`held` as one scalar id of `dtype` per component."""
        if dtype in held.scalars:
            return held.scalars[dtype]
        scalar = self.scalar_types[dtype]
        if held.constant is not None:
            made = [self.constant(dtype, v) for v in held.constant]
        elif held.vectors:
            vector = self.vector(held, dtype)
            made = [self.fn.ops.extract(scalar, vector, i) for i in range(held.size)]
        else:
            made = [self.fn.ops.float_convert(scalar, s) for s in self.components(held, held.dtype)]
        held.scalars[dtype] = made
        return made

    def padded_vector(self, held: Held, size: int) -> Id:
        """`held` as a float16 cooperative vector of `size` >= held.size components, the extra ones zero."""
        if size == held.size:
            return self.vector(held, "f16")
        zero = self.constant("f16", 0.0)
        return self.fn.ops.construct(self.vector_type("f16", size),
                                     *self.components(held, "f16"), *[zero] * (size - held.size))
