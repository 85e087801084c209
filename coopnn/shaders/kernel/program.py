"""The kernel program: a tensor-language function that carries one sample per invocation through a whole network.

It is a subset of the tensor language (`func` on memrefs, `foreach`, `load`/`store`, `gemv`, arithmetic, math,
`cmp`, `cast`, `constant`) plus one extension, the per-invocation vector type `coopvector<f32xN>`: every value
inside the `foreach` over samples is a coopvector, and instructions act on it component-wise. The extension's
instructions, documented in `coopnn/shaders/kernel/README.md`, are `gemv` returning a value, `select`, `gather`
(components picked from several vectors by constant indices), `reduce_sum`/`reduce_max` over contiguous groups,
and the math functions the targets provide (tanh, sqrt, pow, ...).

Training kernels add four things: `gemv` with `transpose=True` (the product with the matrix's transpose, for
gradients), parameters of role "tape" (`store` into them carries `start`, `width` and `layout`, see
`coopnn.shaders.training.layout`), "loss" (one float32 per sample) and "state" (the training state words the kernels
of a step share on the device, `TRAINING_STATE_FIELDS` of `coopnn.shaders.targets.base`), `uniform` (a value every
invocation shares: a push constant, or a state word such as the loss scale; splatted over a vector) and
`sample_mask` (1 for samples of the batch, 0 for padding a target adds).

Weights and constant vectors are function parameters (`memref<f32xMxK>`, `memref<f32xN>`); how they are laid out
in device memory (one buffer, offsets, f16, InferencingOptimal) is the packer's and the target's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from coopnn.graph.ir import freeze_attrs


@dataclass(frozen=True)
class VecType:
    """coopvector<dtype x size>: one invocation's vector."""

    dtype: str  # "f32" or "bool"
    size: int

    def __str__(self) -> str:
        return f"coopvector<{self.dtype}x{self.size}>"


@dataclass(frozen=True)
class Param:
    """A function parameter: a per-sample input or output (memref<f32xFx?>) or a constant tensor."""

    name: str
    role: str  # "input", "output", "matrix" (rows x cols, row-major), "vector", "tape", "loss", "state"
    shape: tuple[int, ...]  # input/output: (features,); matrix: (rows, cols); vector: (size,)
    graph_name: str = ""  # the graph value (input/output) or constant it stands for

    @property
    def memref(self) -> str:
        if self.role in ("input", "output", "tape", "loss"):
            return f"memref<f32x{self.shape[0]}x?>"
        return "memref<f32x" + "x".join(str(d) for d in self.shape) + ">"


@dataclass(frozen=True)
class Instr:
    """One instruction: `op` names a row of the instruction table (`coopnn.shaders.kernel.ops`), which says what
    `args` (value and parameter names) and `attrs` it takes; `KernelBuilder.emit` checks them against it."""

    op: str
    result: str | None
    type: VecType | None
    args: tuple[str, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "attrs", freeze_attrs(self.attrs))


@dataclass(frozen=True)
class KernelProgram:
    """A kernel: parameters, the body run per sample, and the constant data bound to the constant parameters."""

    name: str
    params: tuple[Param, ...]
    body: tuple[Instr, ...]
    constants: Mapping[str, np.ndarray]  # param name -> float32 array of the param's shape
    # param name -> the graph constants it holds unchanged (several where identical constants share one parameter);
    # what lets a trainer write new values of a graph constant straight into a compiled model's weights
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def params_of(self, *roles: str) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.role in roles)

    def value_types(self) -> dict[str, VecType]:
        return {i.result: i.type for i in self.body if i.result is not None}
