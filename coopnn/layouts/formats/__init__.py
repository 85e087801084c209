"""The weight formats: one module per format in this package (fp32.py, fp16.py, ...), each defining one
`WeightFormat` as `FORMAT`, found here; `weight_format` resolves the name a user passes as `weights=`, once.

Adding a format takes a module here and the format in the `formats` of each backend that runs it
(`coopnn.backends.base.Backend`); nothing else lists formats.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from coopnn.errors import InputError
from coopnn.layouts.formats.format import WeightFormat


@functools.cache
def _formats() -> dict[str, WeightFormat]:
    found: dict[str, WeightFormat] = {}
    for module in pkgutil.iter_modules(__path__):
        fmt = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FORMAT", None)
        if fmt is None:
            continue
        if fmt.name in found:
            raise ValueError(f"weight format {fmt.name!r} defined twice")
        found[fmt.name] = fmt
    return found


def format_names() -> list[str]:
    return sorted(_formats())


def weight_format(weights: str | WeightFormat) -> WeightFormat:
    """The format named `weights` (a WeightFormat passes through); InputError naming the formats when there is none
    (a name the caller mistyped, whatever the model)."""
    if isinstance(weights, WeightFormat):
        return weights
    fmt = _formats().get(weights) if isinstance(weights, str) else None
    if fmt is None:
        raise InputError(f"unknown weight format {weights!r}; supported: {', '.join(format_names())}")
    return fmt


__all__ = ["WeightFormat", "format_names", "weight_format"]
