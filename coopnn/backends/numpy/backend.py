"""The numpy backend's record: always available, the oracle for tests and the fallback where no Vulkan device
exists; it trains with the numpy reverse mode (`coopnn.train.backward`)."""

from __future__ import annotations

from coopnn.backends.base import Examined
from coopnn.backends.numpy.inference import NumpyExecutable
from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.graph.ir import Graph
from coopnn.layouts.formats import FORMATS, emulate_weights


class NumpyBackend:
    name = "numpy"
    priority = 0
    description = "numpy reference interpreter (float32, CPU)"
    target = None
    trains = True
    device_features = frozenset()

    def unavailable_reason(self) -> str | None:
        return None

    def examine(self, graph: Graph, weights: str, device) -> Examined:
        if weights not in FORMATS:
            return Examined(f"weight format {weights!r} is not supported; supported: {', '.join(FORMATS)}")
        return Examined(None)

    def auto_skip_reason(self, device) -> str | None:
        return None

    def prepare(self, graph: Graph, lowered, *, weights: str, device) -> NumpyExecutable:
        return NumpyExecutable(emulate_weights(graph, weights))

    def refresh(self, executable: NumpyExecutable, graph: Graph, *, weights: str) -> bool:
        return False  # preparing anew costs no more than refreshing

    def take_trained(self, executable: NumpyExecutable, session) -> bool:
        return False  # its weights are host arrays: the model takes the session's parameters as a new graph

    def prepare_training(self, graph: Graph, loss, optimizer, *, device) -> NumpyTrainingSession:
        return NumpyTrainingSession(graph, loss, optimizer)
