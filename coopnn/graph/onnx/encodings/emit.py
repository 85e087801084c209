"""`Emitter`: writes one encoding node as standard ONNX operators, every node named under the encoding node's name
(`{name}/...`, the last one `{name}` itself) so that `coopnn.graph.onnx.fuse_encodings` can find them again."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np
from onnx import TensorProto

INT64 = TensorProto.INT64
U32_RANGE = 1 << 32


class Writer(Protocol):
    """What the exporter's writer offers: nodes, initializers and fresh names."""

    def add(self, op_type: str, inputs: list[str], output: str, name: str, **attrs: Any) -> str: ...

    def constant(self, array: np.ndarray, base: str) -> str: ...

    def fresh(self, base: str) -> str: ...


class Emitter:
    """Nodes and constants of the encoding node `name`, through the exporter's writer."""

    def __init__(self, writer: Writer, name: str):
        self.writer, self.name = writer, name

    def op(self, op_type: str, inputs: Sequence[str], hint: str | None = None, **attrs: Any) -> str:
        base = f"{self.name}/{hint or op_type.lower()}"
        return self.writer.add(op_type, list(inputs), self.writer.fresh(base), self.writer.fresh(base), **attrs)

    def last(self, op_type: str, inputs: Sequence[str], output: str, **attrs: Any) -> str:
        return self.writer.add(op_type, list(inputs), output, self.name, **attrs)

    def f32(self, value: Any, hint: str = "c") -> str:
        return self.writer.constant(np.asarray(value, np.float32), f"{self.name}/{hint}")

    def i64(self, value: Any, hint: str = "i") -> str:
        return self.writer.constant(np.asarray(value, np.int64), f"{self.name}/{hint}")

    def unsqueeze(self, x: str, axis: int) -> str:
        return self.op("Unsqueeze", [x, self.i64([axis], "axes")])

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        return self.op("Reshape", [x, self.i64(list(shape), "shape")])

    def column(self, x: str, index: int, axis: int) -> str:
        """x with axis `axis` reduced to its element `index`."""
        return self.op("Gather", [x, self.i64(index, "index")], axis=axis)

    def slice(self, x: str, start: int, stop: int, axis: int) -> str:
        return self.op("Slice", [x, self.i64([start], "starts"), self.i64([stop], "ends"), self.i64([axis], "axes")])

    def times_u32(self, a: str, factor: int) -> str:
        """(a * factor) mod 2^32 for int64 a in [0, 2^32), in int64 without overflow: the factor's 16-bit halves."""
        low, high = factor & 0xFFFF, factor >> 16
        product = self.op("Mul", [a, self.i64(low)]) if low != 1 else a
        if high:
            upper = self.op("Mod", [self.op("Mul", [a, self.i64(high)]), self.i64(1 << 16)])
            product = self.op("Add", [self.op("Mul", [upper, self.i64(1 << 16)]), product])
        return self.op("Mod", [product, self.i64(U32_RANGE)])
