"""The converter registry: (domain, op_type, since_version) → the function that turns such an ONNX node into IR.

A converter registered with since=(11, 13) handles the operator's versions 11 and 13 (ONNX numbers an operator's
versions by the opset that introduced them). For a model's opset the lookup picks the converter registered with the
highest since_version not above it. Converter modules are listed in `coopnn.graph.onnx.converters`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from coopnn.graph.onnx.context import ConversionContext
    from coopnn.graph.onnx.node import OnnxNode

Converter = Callable[["OnnxNode", "ConversionContext"], None]

DEFAULT_DOMAIN = ""

_TABLE: dict[tuple[str, str], dict[int, Converter]] = {}


@dataclass(frozen=True)
class Registration:
    domain: str
    op_type: str
    since: int
    convert: Converter


def converter(op_type: str, since: int | Iterable[int],
              domain: str = DEFAULT_DOMAIN) -> Callable[[Converter], Converter]:
    """Register the decorated function for `op_type` at each operator version in `since`."""
    versions = (since,) if isinstance(since, int) else tuple(since)

    def register(fn: Converter) -> Converter:
        table = _TABLE.setdefault((domain, op_type), {})
        for version in versions:
            if version in table:
                raise ValueError(f"two converters for {op_type} (domain {domain!r}) since version {version}")
            table[version] = fn
        return fn

    return register


def lookup(domain: str, op_type: str, opset: int) -> Converter | None:
    """The converter for `op_type` in a model importing `domain` at `opset`, or None."""
    table = _TABLE.get((domain, op_type), {})
    eligible = [v for v in table if v <= opset]
    return table[max(eligible)] if eligible else None


def first_version(domain: str, op_type: str) -> int | None:
    """The lowest opset at which `op_type` has a converter, or None when it has none at all."""
    table = _TABLE.get((domain, op_type))
    return min(table) if table else None


def registrations() -> list[Registration]:
    return [Registration(d, op, v, fn) for (d, op), table in sorted(_TABLE.items()) for v, fn in sorted(table.items())]


def supported_operators() -> list[str]:
    """Operator names coopnn imports (domain-qualified outside the default ONNX domain), sorted."""
    return sorted(f"{domain}::{op}" if domain else op for domain, op in _TABLE)
