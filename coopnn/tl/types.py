"""The tensor language's types as plain frozen dataclasses: scalars, memrefs, groups and cooperative matrices, with the
reference's size table, its promotion order and the packed column-major default layout.

A memref always holds its strides: the default layout is computed when none is written, so `memref<f32x5x6>` and
`memref<f32x5x6,strided<1,5>>` are one value (the reference says they are the same type); the printer drops the
strides again where they are the default.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

INTEGER_TYPES = ("i8", "i16", "i32", "i64", "index")
FLOATING_TYPES = ("bf16", "f16", "f32", "f64")
COMPLEX_TYPES = ("c32", "c64")
NUMBER_TYPES = INTEGER_TYPES + FLOATING_TYPES + COMPLEX_TYPES
MATRIX_USES = ("matrix_a", "matrix_b", "matrix_acc")
ADDRESS_SPACES = ("global", "local")

SIZE_BYTES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "index": 8, "bf16": 2, "f16": 2, "f32": 4, "f64": 8,
              "c32": 8, "c64": 16, "bool": 1}
NUMPY_DTYPES = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "index": np.int64,
                "bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64,
                "c32": np.complex64, "c64": np.complex128, "bool": np.bool_}
# Bits of precision each type represents exactly (sign aside): what the promotion order is built from.
_PRECISION = {"i8": 7, "i16": 15, "i32": 31, "i64": 63, "bf16": 8, "f16": 11, "f32": 24, "f64": 53}
_EXPONENT_RANGE = {"bf16": 127, "f16": 15, "f32": 127, "f64": 1023}


@dataclass(frozen=True)
class ScalarType:
    """A boolean or number type: `bool`, `i8`..`i64`, `index`, `bf16`, `f16`, `f32`, `f64`, `c32`, `c64`."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def is_integer(self) -> bool:
        return self.name in INTEGER_TYPES

    @property
    def is_floating(self) -> bool:
        return self.name in FLOATING_TYPES

    @property
    def is_complex(self) -> bool:
        return self.name in COMPLEX_TYPES

    @property
    def is_number(self) -> bool:
        return self.name in NUMBER_TYPES

    @property
    def size(self) -> int:
        return SIZE_BYTES[self.name]

    @property
    def numpy(self):
        return np.dtype(NUMPY_DTYPES[self.name])

    def component(self) -> ScalarType:
        """The floating type of a complex type's parts; the type itself otherwise."""
        return {"c32": F32, "c64": F64}.get(self.name, self)


@dataclass(frozen=True)
class VoidType:
    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True)
class MemrefType:
    """`memref<element x shape, strided<...>, space>`; None in shape or strides is a dynamic `?`."""

    element: ScalarType
    shape: tuple[int | None, ...]
    strides: tuple[int | None, ...]
    space: str = "global"

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def is_default_layout(self) -> bool:
        return self.strides == default_strides(self.shape)

    def __str__(self) -> str:
        shape = "".join("x" + _dim(s) for s in self.shape)
        layout = "" if self.is_default_layout else ",strided<" + ",".join(_dim(s) for s in self.strides) + ">"
        space = "" if self.space == "global" else f",{self.space}"
        return f"memref<{self.element}{shape}{layout}{space}>"


@dataclass(frozen=True)
class GroupType:
    """`group<memref x size, offset: n>`: pointers to memrefs; None is a dynamic `?`."""

    memref: MemrefType
    size: int | None
    offset: int | None = 0

    def __str__(self) -> str:
        offset = "" if self.offset == 0 else f", offset: {_dim(self.offset)}"
        return f"group<{self.memref}x{_dim(self.size)}{offset}>"


@dataclass(frozen=True)
class CoopMatrixType:
    """`coopmatrix<component x rows x columns, use>`, a matrix spread over a subgroup."""

    component: ScalarType
    rows: int
    columns: int
    use: str

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.columns)

    def __str__(self) -> str:
        return f"coopmatrix<{self.component}x{self.rows}x{self.columns},{self.use}>"


@dataclass(frozen=True)
class CoopVectorType:
    """coopnn's extension: `coopvector<dtype x size>`, one invocation's vector (f32, f16 or bool components)."""

    dtype: str
    size: int

    def __str__(self) -> str:
        return f"coopvector<{self.dtype}x{self.size}>"


Type = ScalarType | VoidType | MemrefType | GroupType | CoopMatrixType | CoopVectorType

BOOL = ScalarType("bool")
INDEX = ScalarType("index")
I32 = ScalarType("i32")
F32 = ScalarType("f32")
F64 = ScalarType("f64")


def _dim(value: int | None) -> str:
    return "?" if value is None else str(value)


def default_strides(shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """The packed dense column-major strides of `shape`: 1, s1, s1*s2, ...; dynamic past the first dynamic mode."""
    strides, running = [], 1
    for size in shape:
        strides.append(running)
        running = None if running is None or size is None else running * size
    return tuple(strides)


def _integer_fits(alpha: str, beta: str) -> bool:
    if beta in INTEGER_TYPES:
        return _PRECISION["i64" if beta == "index" else beta] >= _PRECISION["i64" if alpha == "index" else alpha]
    component = {"c32": "f32", "c64": "f64"}.get(beta, beta)
    return _PRECISION["i64" if alpha == "index" else alpha] <= _PRECISION[component]


def promotable(alpha: ScalarType, beta: ScalarType) -> bool:
    """alpha ⪯ beta: every value of alpha is exactly a value of beta (the reference's relation matrix, read as the
    rule its text states; index counts as i64)."""
    a, b = alpha.name, beta.name
    if a == b:
        return True
    if a == "bool" or b == "bool":
        return False
    if a in INTEGER_TYPES:
        return _integer_fits(a, b)
    if b in INTEGER_TYPES:
        return False
    if a in COMPLEX_TYPES:
        return b == "c64"
    component = {"c32": "f32", "c64": "f64"}.get(b, b)
    return _PRECISION[a] <= _PRECISION[component] and _EXPONENT_RANGE[a] <= _EXPONENT_RANGE[component]


def promote(alpha: ScalarType, beta: ScalarType) -> ScalarType | None:
    """The reference's promote(alpha, beta); None where it says fail."""
    if promotable(alpha, beta):
        return beta
    if promotable(beta, alpha):
        return alpha
    return None
