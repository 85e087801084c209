"""onnxruntime baselines: the model's ONNX file itself, on the CPU and, where the installed build has it, CUDA.

onnxruntime runs the float32 file as exported; its host time covers the whole `session.run` with numpy in and out.
It reports no GPU time of its own.
"""

from __future__ import annotations

import importlib.util
from typing import Callable, Mapping

import numpy as np

from coopnn.bench.models import BenchModel


def provider_unavailable_reason(provider: str) -> Callable[[], str | None]:
    def reason() -> str | None:
        if importlib.util.find_spec("onnxruntime") is None:
            return "onnxruntime is not installed (pip install onnxruntime, or onnxruntime-gpu for CUDA)"
        import onnxruntime

        available = onnxruntime.get_available_providers()
        if provider not in available:
            return f"onnxruntime {onnxruntime.__version__} has no {provider} (it has {', '.join(available)})"
        return None

    return reason


class OnnxRuntimeRunner:
    def __init__(self, model: BenchModel, provider: str):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(str(model.path), providers=[provider])
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], None]:
        return dict(zip(self.names, self.session.run(self.names, dict(feeds)))), None

    def close(self) -> None:
        self.session = None
