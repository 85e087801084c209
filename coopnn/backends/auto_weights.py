"""`weights="auto"`: float16 where it is accurate for the model, float32 where it is not, decided on a calibration
batch.

Cooperative vectors and matrices multiply float16 matrices, many times faster than portable's float32. For ReLU
MLPs the results barely move (0.03 to 0.05% of the output range for the zoo's benchmark MLPs), but sine layers and
frequency encodings amplify float16's rounding (0.3% for the zoo's SIREN, 1% for its frequency-encoded material, 8%
for a thresholded model). So where `backend="auto"` would run the model on a backend of float16 products
(`FLOAT16_BACKENDS`: coopvec, else coopmat2 or coopmat), the model's float16 results (`run_fp16_emulation`, the exact
numpy emulation of the coopvec kernels and, but for the order of float32 sums, of the tile kernels) are compared with
its float32 results on a calibration batch: float16 is taken when every output stays within AUTO_TOLERANCE of its
range (the relative tolerance the float16 kernels are tested to), float32 otherwise. Without a calibration batch,
DEFAULT_CALIBRATION_SAMPLES samples uniform in [-1, 1] are drawn (with a fixed seed): the range neural-shading inputs
(positions, directions, texture coordinates) are normalised to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from coopnn.graph.ir import Graph
from coopnn.layouts.formats.calibration import calibration_feeds
from coopnn.layouts.formats.emulation import run_fp16_emulation
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn import backends
from coopnn.backends.base import Examined
from coopnn.backends.numpy.inference import run_graph

AUTO_TOLERANCE = 1e-3  # largest error of an output, as a fraction of its range on the calibration batch
DEFAULT_CALIBRATION_SAMPLES = 4096
# The backends whose float16 arithmetic `run_fp16_emulation` is (each tested against it), in the order auto ranks them
FLOAT16_BACKENDS = ("coopvec", "coopmat2", "coopmat")


@dataclass(frozen=True)
class WeightsChoice:
    weights: WeightFormat
    reason: str
    error: float | None = None  # the float16 error measured, as a fraction of the output range
    examined: Mapping[str, Examined] = field(default_factory=dict)  # what backends answered, by name, for `weights`


def default_calibration(graph: Graph, samples: int = DEFAULT_CALIBRATION_SAMPLES, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {v.name: rng.uniform(-1.0, 1.0, (samples,) + v.features).astype(np.float32) for v in graph.inputs}


def float16_error(graph: Graph, feeds: Mapping[str, np.ndarray]) -> float:
    """The largest error of the float16 emulation against float32 over every output, as a fraction of that output's
    range (peak to peak, or its largest magnitude when constant); boolean outputs count the fraction that flips, and
    a value finite in one and not in the other counts as the whole range."""
    reference = run_graph(graph, feeds)
    emulated = run_fp16_emulation(graph, feeds)
    worst = 0.0
    for v in graph.outputs:
        want, got = np.asarray(reference[v.name]), np.asarray(emulated[v.name])
        if v.dtype == "bool":
            worst = max(worst, float(np.mean(want != got)))
            continue
        finite = np.isfinite(want)
        if not np.array_equal(finite, np.isfinite(got)) or not np.array_equal(want[~finite], got[~finite]):
            return 1.0
        if not finite.any():
            continue
        values = want[finite]
        scale = float(np.ptp(values)) or float(np.max(np.abs(values))) or 1.0
        worst = max(worst, float(np.max(np.abs(got[finite] - values))) / scale)
    return worst


def _float16_backend(graph: Graph, device) -> tuple[str, Examined] | None:
    """The float16 backend `backend="auto"` would take for `graph` in float16, with its answer; None where none
    would."""
    for name in FLOAT16_BACKENDS:
        examined, passed_over = backends.auto_answer(backends.get(name), graph, FP16, device)
        if passed_over is None:
            return name, examined
    return None


def choose_weights(graph: Graph, backend: str, device, calibration: Any = None) -> WeightsChoice:
    """What `weights="auto"` means for `graph` on `backend` ("auto" or a backend name): on a named backend, the
    first of its formats."""
    if backend != "auto":
        formats = backends.get(backend).formats
        only = ", the only format it takes" if len(formats) == 1 else ""
        return WeightsChoice(formats[0], f"weights='auto' on {backend}: {formats[0].label}{only}")
    chosen = _float16_backend(graph, device)
    if chosen is None:
        return WeightsChoice(FP32, "weights='auto': float32, as no float16 backend runs here")
    name, examined = chosen
    feeds = default_calibration(graph) if calibration is None else calibration_feeds(graph, calibration)
    samples = next(iter(feeds.values())).shape[0]
    error = float16_error(graph, feeds)
    source = "your calibration batch" if calibration is not None else "the default calibration batch"
    if error <= AUTO_TOLERANCE:
        return WeightsChoice(FP16, f"weights='auto': float16, whose outputs stay within {error:.3%} of their range "
                                     f"from float32 on {source} ({samples} samples; tolerance "
                                     f"{AUTO_TOLERANCE:.1%})", error, {name: examined})
    return WeightsChoice(FP32, f"weights='auto': float32, as float16 puts the outputs {error:.1%} of their range "
                                 f"away from float32 on {source} ({samples} samples; tolerance {AUTO_TOLERANCE:.1%})",
                         error)
