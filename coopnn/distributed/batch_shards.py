"""Cutting a batch into contiguous shards and joining the shards' outputs back in order, for `ShardedModel`."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def shard_bounds(rows: int, shards: int) -> list[tuple[int, int]]:
    """(start, stop) of each non-empty shard of `rows` samples cut into at most `shards` near-equal parts."""
    bounds = np.linspace(0, rows, shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def shard_of(named: Mapping[str, Any], x: Any, start: int, stop: int) -> Any:
    """Rows `start` to `stop` of the batch, in the form the caller gave it (an array, or a dict by input name)."""
    if isinstance(x, Mapping):
        return {k: v[start:stop] for k, v in named.items()}
    return next(iter(named.values()))[start:stop]


def joined(parts: list, concatenate) -> Any:
    """The shards' outputs joined in order with `concatenate`: arrays, or dicts of arrays by output name."""
    if isinstance(parts[0], Mapping):
        return {k: concatenate([p[k] for p in parts]) for k in parts[0]}
    return concatenate(parts)
