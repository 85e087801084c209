"""The numpy reference backend: interprets the graph IR in float32, chunk by chunk along the batch axis."""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from coopnn.graph import ops
from coopnn.graph.ir import Graph

# Samples per chunk: bounds the interpreter's working set (a few MB per feature column) whatever the batch size.
DEFAULT_CHUNK = 1 << 16


Evaluator = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]  # a chunk's feeds -> its outputs


def run_graph(graph: Graph, feeds: Mapping[str, np.ndarray], chunk: int = DEFAULT_CHUNK,
              out: Mapping[str, np.ndarray] | None = None, evaluate: Evaluator | None = None) -> dict[str, np.ndarray]:
    """Evaluate every graph output for `feeds` keyed by input name (float arrays with the same batch size, converted
    to float32 chunk by chunk), into the arrays of `out` where given; `evaluate` replaces the float32 interpreter
    (a weight format's own arithmetic, `coopnn.layouts.formats.emulation.Float16Emulation.run`)."""
    batch = _batch(feeds)
    out = out or {}
    outputs = {v.name: out[v.name] if v.name in out else
               np.empty((batch,) + v.features, np.bool_ if v.dtype == "bool" else np.float32)
               for v in graph.outputs}
    for start in range(0, max(batch, 1), chunk):
        stop = min(start + chunk, batch)
        part_feeds = {k: np.ascontiguousarray(v[start:stop], np.float32) for k, v in feeds.items()}
        part = evaluate(part_feeds) if evaluate else _run_chunk(graph, part_feeds, stop - start)
        for name, array in part.items():
            outputs[name][start:stop] = array
    return outputs


def _run_chunk(graph: Graph, feeds: Mapping[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
    env: dict[str, np.ndarray] = dict(graph.constants)
    env.update(feeds)
    last_use = {}
    for i, node in enumerate(graph.nodes):
        for name in node.inputs:
            last_use[name] = i
    keep = {v.name for v in graph.outputs}
    for i, node in enumerate(graph.nodes):
        result = ops.evaluate(node.op, [env[n] for n in node.inputs], node.attrs)
        env[node.outputs[0]] = result
        for name in set(node.inputs):  # a node may read one value twice (x * x)
            # free intermediates early: chunks of wide layers are the backend's whole memory footprint
            if last_use.get(name) == i and name not in keep and name not in graph.constants and name not in feeds:
                del env[name]
    return {v.name: np.broadcast_to(env[v.name], (batch,) + v.features) for v in graph.outputs}


def _batch(feeds: Mapping[str, np.ndarray]) -> int:
    return next(iter(feeds.values())).shape[0] if feeds else 1


class NumpyExecutable:
    def __init__(self, graph: Graph, evaluate: Evaluator | None = None):
        self.graph = graph
        self.evaluate = evaluate

    def run(self, feeds: Mapping[str, np.ndarray],
            out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        return run_graph(self.graph, feeds, out=out, evaluate=self.evaluate)

    def close(self) -> None:
        self.graph = self.evaluate = None
