"""A model under benchmark: its optimised graph, the work per sample (FLOPs, bytes in and out) and its inputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from coopnn.graph.ir import Graph
from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.graph.summary import flop_count


def _itemsize(dtype: str) -> int:
    return np.dtype(np.bool_ if dtype == "bool" else np.float32).itemsize


@dataclass(frozen=True)
class BenchModel:
    name: str
    path: Path
    graph: Graph
    flops_per_sample: int
    io_bytes_per_sample: int  # inputs read and outputs written per sample, as the caller hands them over (float32)
    parameters: int

    @classmethod
    def load(cls, path: str | Path) -> "BenchModel":
        path = Path(path)
        graph = optimize(import_model(path))
        io_bytes = sum(v.feature_size * _itemsize(v.dtype) for v in graph.inputs + graph.outputs)
        return cls(path.stem, path, graph, flop_count(graph), io_bytes, graph.parameter_count())

    def feeds(self, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
        """Inputs in [-1, 1) for every input, float32, generated without a float64 copy (batches reach 2^21)."""
        rng = np.random.default_rng(seed)
        feeds = {}
        for v in self.graph.inputs:
            array = rng.random((batch,) + v.features, dtype=np.float32)
            array *= 2
            array -= 1
            feeds[v.name] = array
        return feeds

    def record(self) -> dict:
        return {
            "name": self.name,
            "path": str(self.path),
            "inputs": {v.name: list(v.features) for v in self.graph.inputs},
            "outputs": {v.name: list(v.features) for v in self.graph.outputs},
            "parameters": self.parameters,
            "flops_per_sample": self.flops_per_sample,
            "io_bytes_per_sample": self.io_bytes_per_sample,
        }
