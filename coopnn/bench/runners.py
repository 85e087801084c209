"""What can be benchmarked: every registered coopnn backend, and the baselines a user would pick instead.

A runner takes float32 feeds keyed by input name and returns the outputs keyed by name and the GPU milliseconds of
the run (None where the runner has no GPU clock); the harness times the host side itself. coopnn backends come from
the backend registry, so a newly registered backend is benchmarked without any change here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

import numpy as np

from coopnn.bench.models import BenchModel
from coopnn.bench.ort_runners import OnnxRuntimeRunner, provider_unavailable_reason
from coopnn.bench.torch_runners import (
    TorchCpuRunner,
    TorchCudaGraphRunner,
    cuda_unavailable_reason,
    torch_unavailable_reason,
)
from coopnn.errors import BackendUnavailableError
from coopnn.layouts.formats import weight_format
from coopnn import backends


class Runner(Protocol):
    def run(self, feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float | None]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RunnerSpec:
    name: str
    kind: str  # "coopnn": a coopnn backend; "baseline": what a user would run instead
    description: str
    precision: str | None  # a baseline's fixed arithmetic; None for coopnn, which uses the weight format asked for
    unavailable_reason: Callable[[], str | None]
    unsupported_reason: Callable[[BenchModel, str], str | None]  # (model, weights)
    prepare: Callable[[BenchModel, str], Runner]  # (model, weights)

    def record(self) -> dict:
        why = self.unavailable_reason()
        return {"name": self.name, "kind": self.kind, "description": self.description, "precision": self.precision,
                "available": why is None, "reason": why or ""}


class CoopnnRunner:
    """A coopnn Model on one backend; GPU time from its timestamp queries."""

    def __init__(self, model: BenchModel, backend: str, weights: str, calibration=None):
        from coopnn.model import prepare

        self.model = prepare(model.graph, backend=backend, weights=weights, calibration=calibration)

    def run(self, feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float | None]:
        out = self.model.run(feeds)
        return (out if isinstance(out, dict) else {self.model.outputs[0].name: out}), self.model.last_gpu_ms

    def close(self) -> None:
        self.model.close()


def _coopnn_unsupported_reason(backend, model: BenchModel, weights: str) -> str | None:
    """Why `backend` cannot run `model` with the weight format named `weights` (InputError for an unknown name), or
    None."""
    return backends.examine(backend, model.graph, weight_format(weights), None).reason


def _coopnn_spec(backend) -> RunnerSpec:
    return RunnerSpec(
        name=backend.name,
        kind="coopnn",
        description=backend.description,
        precision=None,
        unavailable_reason=backend.unavailable_reason,
        unsupported_reason=lambda model, weights: _coopnn_unsupported_reason(backend, model, weights),
        prepare=lambda model, weights: CoopnnRunner(model, backend.name, weights),
    )


def _always_supported(model: BenchModel, weights: str) -> None:
    return None


BASELINES: tuple[RunnerSpec, ...] = (
    RunnerSpec("torch-cuda-fp16", "baseline", "PyTorch, fp16 network, forward captured in a CUDA graph", "fp16",
               cuda_unavailable_reason, _always_supported, lambda model, weights: TorchCudaGraphRunner(model)),
    RunnerSpec("onnxruntime-cuda", "baseline", "onnxruntime, CUDAExecutionProvider, the fp32 ONNX file", "fp32",
               provider_unavailable_reason("CUDAExecutionProvider"), _always_supported,
               lambda model, weights: OnnxRuntimeRunner(model, "CUDAExecutionProvider")),
    RunnerSpec("torch-cpu-fp32", "baseline", "PyTorch on the CPU, fp32, eager", "fp32",
               torch_unavailable_reason, _always_supported, lambda model, weights: TorchCpuRunner(model)),
    RunnerSpec("onnxruntime-cpu", "baseline", "onnxruntime, CPUExecutionProvider, the fp32 ONNX file", "fp32",
               provider_unavailable_reason("CPUExecutionProvider"), _always_supported,
               lambda model, weights: OnnxRuntimeRunner(model, "CPUExecutionProvider")),
)

# The baseline speed-ups are quoted against: the first of these with a result, the one a user would most likely pick.
REFERENCE_ORDER = tuple(spec.name for spec in BASELINES)


def coopnn_specs() -> list[RunnerSpec]:
    return [_coopnn_spec(b) for b in backends.all_backends()]


def all_specs() -> list[RunnerSpec]:
    return coopnn_specs() + list(BASELINES)


def _pick(pool: list[RunnerSpec], request: str, what: str) -> list[RunnerSpec]:
    """`request` is "all", "none" or comma-separated names; named runners must be available here."""
    if request == "all":
        return pool
    if request == "none":
        return []
    by_name = {spec.name: spec for spec in pool}
    chosen = []
    for name in (n.strip() for n in request.split(",") if n.strip()):
        if name not in by_name:
            raise BackendUnavailableError(f"unknown {what} {name!r}; known: all, {', '.join(by_name)}")
        why = by_name[name].unavailable_reason()
        if why:
            raise BackendUnavailableError(f"{what} {name!r} is unavailable: {why}")
        chosen.append(by_name[name])
    return chosen


def select_runners(backend: str = "all", baseline: str = "none") -> list[RunnerSpec]:
    """The coopnn backends (`backend`) and baselines (`baseline`) asked for, each "all", "none" or names; with "all"
    the unavailable ones are kept so that the results say why they did not run."""
    return _pick(coopnn_specs(), backend, "backend") + _pick(list(BASELINES), baseline, "baseline")
