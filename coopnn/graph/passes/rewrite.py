"""Bookkeeping the rewriting passes share: how often each value is read, and fresh names for what they create."""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from coopnn.graph.ir import Graph


def use_counts(graph: Graph) -> Counter[str]:
    """How many times each value is read: once per node input slot, and once for being a graph output."""
    counts: Counter[str] = Counter()
    for node in graph.nodes:
        counts.update(node.inputs)
    counts.update(v.name for v in graph.outputs)
    return counts


class NameScope:
    """The node and value names a graph (or a list of names) already uses; hands out new ones derived from a base
    name."""

    def __init__(self, graph: Graph | None = None, taken: Iterable[str] = ()):
        self._taken = set(taken)
        if graph is not None:
            self._taken.update(node.name for node in graph.nodes)
            self._taken.update(graph.values, graph.constants)
            self._taken.update(v.name for v in graph.inputs + graph.outputs)

    def fresh(self, base: str) -> str:
        """`base` itself when it is free, else `base_1`, `base_2`, ...; the name returned is taken from then on."""
        name, suffix = base, 0
        while name in self._taken:
            suffix += 1
            name = f"{base}_{suffix}"
        self._taken.add(name)
        return name
