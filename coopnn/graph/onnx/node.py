"""OnnxNode: a read-only view of an ONNX NodeProto with decoded attributes and the opset of its domain."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import onnx

DEFAULT_DOMAIN_ALIASES = ("", "ai.onnx")


def canonical_domain(domain: str) -> str:
    return "" if domain in DEFAULT_DOMAIN_ALIASES else domain


def _decode(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


@dataclass(frozen=True)
class OnnxNode:
    op_type: str
    name: str  # the ONNX name, or "<op_type>_<index>" for an unnamed node so that errors can point at it
    domain: str
    opset: int
    inputs: tuple[str, ...]  # "" marks an optional input left out
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]

    @classmethod
    def from_proto(cls, proto: onnx.NodeProto, index: int, opsets: Mapping[str, int]) -> "OnnxNode":
        domain = canonical_domain(proto.domain)
        attrs = {a.name: _decode(onnx.helper.get_attribute_value(a)) for a in proto.attribute}
        return cls(
            op_type=proto.op_type,
            name=proto.name or f"{proto.op_type}_{index}",
            domain=domain,
            opset=opsets.get(domain, 0),
            inputs=tuple(proto.input),
            outputs=tuple(proto.output),
            attrs=MappingProxyType(attrs),
        )

    def input(self, index: int) -> str | None:
        """The name of input `index`, or None when the node leaves that (optional) input out."""
        return self.inputs[index] if index < len(self.inputs) and self.inputs[index] else None

    def output(self, index: int) -> str | None:
        return self.outputs[index] if index < len(self.outputs) and self.outputs[index] else None

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)
