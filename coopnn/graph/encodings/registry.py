"""The encodings by tiny-cuda-nn `otype`: each module of this package that defines `ENCODINGS` (a tuple of Encoding
classes) adds its classes under their `otype` and `aliases`, matched case-insensitively as tiny-cuda-nn matches them.

Adding an encoding is adding a module here; nothing lists them.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from coopnn.errors import InputError
from coopnn.graph.encodings.base import Encoding
from coopnn.registry import package_modules

DEFAULT_OTYPE = "OneBlob"  # what tiny-cuda-nn makes of a config without an otype
MAX_INPUT_DIMS = 1 << 16


@functools.cache
def _classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for module in package_modules("coopnn.graph.encodings"):
        for cls in getattr(module, "ENCODINGS", ()):
            for name in (cls.otype, *getattr(cls, "aliases", ())):
                if name.lower() in found:
                    raise ValueError(f"encoding otype {name!r} registered twice")
                found[name.lower()] = cls
    return found


def otypes() -> list[str]:
    """Every otype spelling coopnn takes."""
    names = set()
    for cls in _classes().values():
        names.update((cls.otype, *getattr(cls, "aliases", ())))
    return sorted(names)


def from_config(config: Mapping[str, Any], n_input_dims: int, where: str = "encoding") -> Encoding:
    """The encoding a tiny-cuda-nn encoding config describes, over `n_input_dims` input columns; InputError naming
    the key for anything coopnn cannot build."""
    if not isinstance(config, Mapping):
        raise InputError(f"{where}: an encoding config is a JSON object (a dict), not {config!r}")
    if isinstance(n_input_dims, bool) or not isinstance(n_input_dims, int) or not 1 <= n_input_dims <= MAX_INPUT_DIMS:
        raise InputError(f"{where}: an encoding takes 1 to {MAX_INPUT_DIMS} input dimensions, not {n_input_dims!r}")
    otype = config.get("otype", DEFAULT_OTYPE)
    cls = _classes().get(otype.lower()) if isinstance(otype, str) else None
    if cls is None:
        raise InputError(f"{where}: key 'otype' is {otype!r}, which is not an encoding coopnn has; encodings: "
                         f"{', '.join(otypes())}")
    return cls.from_config(config, n_input_dims, where)
