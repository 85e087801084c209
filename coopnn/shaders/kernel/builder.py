"""KernelBuilder: the instruction-emitting helper that lowering functions write kernel programs with; every
instruction is checked against the instruction table (`coopnn.shaders.kernel.ops`), which gives its result type."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from coopnn.graph.ir import Op
from coopnn.shaders.kernel import activations
from coopnn.shaders.kernel.ops import KERNEL_OPS, VALUE
from coopnn.shaders.kernel.program import Instr, Param, KernelProgram, VecType


class KernelBuilder:
    """Accumulates parameters and instructions; constant parameters with equal contents and the same source are
    shared."""

    def __init__(self, name: str):
        self.name = name
        self.params: list[Param] = []
        self.param_by_name: dict[str, Param] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.body: list[Instr] = []
        self.types: dict[str, VecType] = {}
        self._by_content: dict[tuple, str] = {}
        self.sources: dict[str, tuple[str, ...]] = {}
        self._splats: dict[tuple, str] = {}

    # ----- parameters ---------------------------------------------------------------------------------------------

    def add_param(self, name: str, role: str, shape: tuple[int, ...], graph_name: str = "") -> Param:
        param = Param(name, role, tuple(int(d) for d in shape), graph_name)
        self.params.append(param)
        self.param_by_name[name] = param
        return param

    def constant_param(self, array: np.ndarray, role: str, prefix: str, source: str = "") -> str:
        """A matrix or vector parameter holding `array` (the graph constant `source`, where it is one unchanged);
        parameters with identical contents are shared, except between different graph constants, whose values
        may be trained apart (a shared entry could not follow both)."""
        array = np.ascontiguousarray(array, dtype=np.float32)
        key = (role, array.shape, array.tobytes(), source)
        name = self._by_content.get(key)
        if name is None:
            name = f"{prefix}{len(self.constants)}"
            self.add_param(name, role, array.shape)
            self.constants[name] = array
            self._by_content[key] = name
        if source and source not in self.sources.get(name, ()):
            self.sources[name] = self.sources.get(name, ()) + (source,)
        return name

    def own_param(self, name: str, array: np.ndarray, role: str) -> str:
        """A matrix or vector parameter holding `array`, never shared (trained weights change independently)."""
        self.add_param(name, role, np.shape(array))
        self.constants[name] = np.ascontiguousarray(array, dtype=np.float32)
        return name

    # ----- instructions -------------------------------------------------------------------------------------------

    def emit(self, op: str, type: VecType | None, args: Sequence[str] = (), **attrs: Any) -> str | None:
        """Append instruction `op` and return its result. `type` may be None where the table's type rule infers it
        (every instruction but constant, cast, uniform and sample_mask); a stated one must agree with the rule."""
        definition = KERNEL_OPS.get(op)
        if definition is None:
            raise ValueError(f"unknown kernel instruction {op!r}")
        kinds = definition.kinds(len(args))
        if kinds is None:
            raise ValueError(f"kernel instruction {op} does not take {len(args)} operands")
        operands = [self.types[a] if kind == VALUE else self.param_by_name[a] for a, kind in zip(args, kinds)]
        try:
            inferred = definition.result_type(operands, attrs, type)
        except ValueError as e:
            raise ValueError(f"kernel instruction {op}: {e}") from None
        if type is not None and type != inferred:
            raise ValueError(f"kernel instruction {op} gives {inferred}, not the stated {type}")
        type = inferred
        result = None if type is None else str(len(self.types))
        self.body.append(Instr(op, result, type, tuple(args), attrs))
        if result is not None:
            self.types[result] = type
        return result

    def type_of(self, value: str) -> VecType:
        return self.types[value]

    def splat(self, value: float, size: int, dtype: str = "f32") -> str:
        """A vector with every component `value` (emitted once per value and size)."""
        key = (float(value), size, dtype)
        if key not in self._splats:
            self._splats[key] = self.emit("constant", VecType(dtype, size), value=float(value))
        return self._splats[key]

    def unary(self, op: str, x: str) -> str:
        return self.emit(op, None, (x,))

    def binary(self, op: str, a: str, b: str) -> str:
        return self.emit(op, None, (a, b))

    def scalar(self, op: str, x: str, value: float, *, left: bool = False) -> str:
        """`x op value` (or `value op x` with left=True) with `value` broadcast to x's size."""
        c = self.splat(value, self.type_of(x).size)
        return self.binary(op, c, x) if left else self.binary(op, x, c)

    def compare(self, op: str, a: str, b: str) -> str:
        return self.emit(op, None, (a, b))

    def select(self, cond: str, a: str, b: str) -> str:
        return self.emit("select", None, (cond, a, b))

    def gather(self, sources: Sequence[str], index: Sequence[tuple[int, int]]) -> str:
        """A vector whose component i is component index[i][1] of sources[index[i][0]]."""
        index = tuple((int(s), int(c)) for s, c in index)
        if len(sources) == 1 and index == tuple((0, i) for i in range(self.type_of(sources[0]).size)):
            return sources[0]
        return self.emit("gather", None, tuple(sources), index=index)

    def reduce(self, op: str, x: str, group: int) -> str:
        return self.emit(op, None, (x,), group=group)

    def activation(self, op: Op, x: str, attrs: Mapping[str, Any]) -> str:
        """The graph activation `op` (with `attrs`) applied to x, written as kernel instructions."""
        return activations.apply(self, op, x, attrs)

    def function(self, function, *arguments: str) -> tuple:
        """A tensor-language model function on the values `arguments`, its body fused as kernel instructions."""
        from coopnn.tl.functions.lower import apply  # coopnn.tl reads the kernel level: imported when used

        return apply(self, function, arguments)

    def build(self) -> KernelProgram:
        return KernelProgram(self.name, tuple(self.params), tuple(self.body), dict(self.constants), dict(self.sources))
