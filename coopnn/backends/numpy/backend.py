"""The numpy backend's record: always available, the oracle for tests and the fallback where no Vulkan device
exists; it trains with the numpy reverse mode (`coopnn.train.backward`). Unscaled formats (the block formats q8_0
and q4_0 included) run in float32 on weights rounded as the format stores them; the 8-bit float formats in their
float16 arithmetic (`coopnn.layouts.formats.emulation`), int8 in its integer arithmetic
(`coopnn.layouts.formats.integer`)."""

from __future__ import annotations

from coopnn.backends.base import Examined
from coopnn.backends.numpy.inference import NumpyExecutable
from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.graph.ir import Graph
from coopnn.layouts.formats.emulation import Float16Emulation, emulate_weights
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.formats.fp8_e4m3 import FORMAT as FP8_E4M3
from coopnn.layouts.formats.fp8_e5m2 import FORMAT as FP8_E5M2
from coopnn.layouts.formats.int8 import FORMAT as INT8
from coopnn.layouts.formats.integer import IntegerEmulation
from coopnn.layouts.formats.q4_0 import FORMAT as Q4_0
from coopnn.layouts.formats.q8_0 import FORMAT as Q8_0


class NumpyBackend:
    name = "numpy"
    priority = 0
    description = "numpy reference interpreter (float32, CPU)"
    target = None
    formats = (FP32, FP16, FP8_E4M3, FP8_E5M2, INT8, Q8_0, Q4_0)
    trains = True
    training_options: dict[str, tuple[str, ...]] = {}
    device_features = frozenset()

    def unavailable_reason(self) -> str | None:
        return None

    def examine(self, graph: Graph, weights: WeightFormat, device) -> Examined:
        return Examined(None)

    def auto_skip_reason(self, device, lowered, weights: WeightFormat) -> str | None:
        return None

    def prepare(self, graph: Graph, lowered, *, weights: WeightFormat, device) -> NumpyExecutable:
        if weights.input_quantization is not None:
            return NumpyExecutable(graph, IntegerEmulation(graph, weights).run)
        if weights.row_scales is not None:
            return NumpyExecutable(graph, Float16Emulation(graph, weights).run)
        return NumpyExecutable(emulate_weights(graph, weights))

    def refresh(self, executable: NumpyExecutable, graph: Graph, *, weights: WeightFormat) -> bool:
        return False  # preparing anew costs no more than refreshing

    def take_trained(self, executable: NumpyExecutable, session) -> bool:
        return False  # its weights are host arrays: the model takes the session's parameters as a new graph

    def prepare_training(self, graph: Graph, loss, optimizer, *, device, **options) -> NumpyTrainingSession:
        return NumpyTrainingSession(graph, loss, optimizer)
