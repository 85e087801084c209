"""PyTorch baselines: the coopnn graph run by `TorchGraph`, fp16 under CUDA graphs on a CUDA device, fp32 on the CPU.

The CUDA runner is what a PyTorch user would ship for inference: the network in half precision, its forward captured
once per batch size in a CUDA graph and replayed. It takes and returns float32 host arrays like `coopnn.Model.run`; its
host time covers the copies in and out, its GPU time is the graph replay alone, between two CUDA events.
"""

from __future__ import annotations

import importlib.util
from typing import Mapping

import numpy as np

from coopnn.bench.models import BenchModel

# Forward passes on a side stream before capture, as torch.cuda.graphs asks, so lazy initialisation is not captured.
CAPTURE_WARMUP = 2


def torch_unavailable_reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed (pip install torch)"
    return None


def cuda_unavailable_reason() -> str | None:
    why = torch_unavailable_reason()
    if why:
        return why
    import torch

    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} sees no CUDA device"
    return None


def _host_outputs(outputs) -> dict[str, np.ndarray]:
    return {name: t.cpu().numpy() for name, t in outputs.items()}


class TorchCpuRunner:
    """Eager float32 on the CPU, with torch's default threads."""

    def __init__(self, model: BenchModel):
        import torch

        from coopnn.bench.torch_graph import TorchGraph

        self.torch = torch
        self.program = TorchGraph(model.graph, torch.float32, "cpu")

    def run(self, feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], None]:
        with self.torch.no_grad():
            outputs = self.program({k: self.torch.from_numpy(v) for k, v in feeds.items()})
        return {k: v.numpy() for k, v in outputs.items()}, None

    def close(self) -> None:
        self.program = None


class TorchCudaGraphRunner:
    """fp16 on the current CUDA device, one captured CUDA graph for the batch size in use (recaptured on change)."""

    def __init__(self, model: BenchModel):
        import torch

        from coopnn.bench.torch_graph import TorchGraph

        self.torch = torch
        self.device = torch.device("cuda")
        self.graph = model.graph
        self.program = TorchGraph(model.graph, torch.float16, self.device)
        self.batch: int | None = None
        self.cuda_graph = None
        self.static_inputs: dict = {}
        self.static_outputs: dict = {}
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def _forward(self):
        half = {name: t.to(self.torch.float16) for name, t in self.static_inputs.items()}
        outputs = self.program(half)
        return {name: t.float() if t.is_floating_point() else t for name, t in outputs.items()}

    def _capture(self, batch: int) -> None:
        torch = self.torch
        self.cuda_graph, self.static_outputs = None, {}
        torch.cuda.empty_cache()
        self.static_inputs = {v.name: torch.zeros((batch,) + v.features, dtype=torch.float32, device=self.device)
                              for v in self.graph.inputs}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad():
            with torch.cuda.stream(side):
                for _ in range(CAPTURE_WARMUP):
                    self._forward()
            torch.cuda.current_stream().wait_stream(side)
            self.cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.cuda_graph):
                self.static_outputs = self._forward()
        self.batch = batch

    def run(self, feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
        batch = next(iter(feeds.values())).shape[0]
        if batch != self.batch:
            self._capture(batch)
        for name, array in feeds.items():
            self.static_inputs[name].copy_(self.torch.from_numpy(array))
        self.start.record()
        self.cuda_graph.replay()
        self.end.record()
        outputs = _host_outputs(self.static_outputs)  # waits for the replay
        self.end.synchronize()
        return outputs, self.start.elapsed_time(self.end)

    def close(self) -> None:
        self.cuda_graph, self.static_inputs, self.static_outputs, self.program = None, {}, {}, None
        self.torch.cuda.empty_cache()
