"""The roofline of a kernel: the bytes it must move and the FLOPs it must do, the time the GPU's bounds allow for them,
and how far a measured time is from it.

The bound of a kernel is max(bytes / bandwidth, FLOPs / tensor peak); its ratio is measured time / bound, the number
the kernels are driven down by (1.0 is the roofline). "Must move" counts what no kernel can avoid: every input read
and every output written once at its dtype, the weights once per kernel (a few hundred KB at most, which stay in the
L2 cache across work-groups), and for a training step the tape where the method keeps one (written once and read once)
and the parameters and optimizer state (read and written). FLOPs count 2 per multiply-add of the Linear layers (as
`coopnn.graph.summary.flop_count` does without the elementwise ops, which run on other units); a training step does
three products a layer (forward, the delta and the weight gradient).

Peaks: the H200's are the measurements of `../shared/gpu/h200-anchors.md` (a device-to-device copy and an 8192^3
fp16 product through PyTorch), other known GPUs take their datasheet figures (`peaks.KNOWN_DEVICES`), and a bench can
measure its own (`peaks.measure_with_torch`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from coopnn.bench import peaks
from coopnn.graph.ir import Graph, Op

# What a device-to-device copy moves on the H200 (bytes read plus bytes written), and what an 8192^3 fp16 product
# reaches on its tensor cores: measured, not the datasheet's 4.8 TB/s and 989 TFLOP/s.
H200_COPY_TBPS = 4.3
H200_TENSOR_TFLOPS = 800.0
FLOAT16_BYTES = 2
FLOAT32_BYTES = 4
# Adam's bytes a parameter per step: the float32 master weight, first and second moments read and written (24), the
# float32 gradient written and read once (8), and the float16 working copy the kernels read, written (2).
ADAM_BYTES_PER_PARAMETER = 34


@dataclass(frozen=True)
class RooflinePeaks:
    bandwidth_tbps: float  # terabytes (1e12) a second, bytes read plus bytes written
    tensor_tflops: float  # dense fp16 tensor-core FLOP a second, in 1e12
    source: str  # where the numbers come from: "anchors", "datasheet" or "measured"


H200 = RooflinePeaks(H200_COPY_TBPS, H200_TENSOR_TFLOPS, "anchors")


def peaks_for(device_name: str | None, measured: RooflinePeaks | None = None) -> RooflinePeaks | None:
    """The peaks a device's rows are held against: the bench's own measurement where given, the H200's anchors, a
    known GPU's datasheet figures, else None (no bound)."""
    if measured is not None:
        return measured
    if "h200" in (device_name or "").lower():
        return H200
    known = peaks.device_peak(device_name)
    if known is None:
        return None
    return RooflinePeaks(known.memory_bandwidth_gbs / 1e3, known.fp16_dense_tflops, "datasheet")


@dataclass(frozen=True)
class KernelWork:
    """What a kernel (or a whole step) must move and compute."""

    bytes: int
    flops: int

    def bound_ms(self, peaks: RooflinePeaks = H200) -> float:
        """The least time the bounds allow: the slower of moving the bytes and doing the FLOPs."""
        return max(self.bytes / (peaks.bandwidth_tbps * 1e12), self.flops / (peaks.tensor_tflops * 1e12)) * 1e3

    def bound_by(self, peaks: RooflinePeaks = H200) -> str:
        """"memory" or "compute": which of the two sets the bound."""
        memory = self.bytes / peaks.bandwidth_tbps
        return "memory" if memory >= self.flops / peaks.tensor_tflops else "compute"

    def against(self, ms: float | None, peaks: RooflinePeaks | None) -> dict:
        """The roofline columns of a row measured in `ms`: achieved TB/s and TFLOP/s, the bound and the ratio (None
        where there is no time or no peaks)."""
        row = {"bytes": self.bytes, "flops": self.flops, "tb_per_s": None, "tflop_per_s": None, "bound_ms": None,
               "bound_by": None, "ratio_to_bound": None, "peaks": asdict(peaks) if peaks else None}
        if ms:
            row.update(tb_per_s=self.bytes / (ms * 1e9), tflop_per_s=self.flops / (ms * 1e9))
        if peaks is not None:
            row.update(bound_ms=self.bound_ms(peaks), bound_by=self.bound_by(peaks))
            if ms:
                row["ratio_to_bound"] = ms / row["bound_ms"]
        return row

    def record(self) -> dict:
        return asdict(self)


def linear_layers(graph: Graph) -> list[tuple[int, int, bool]]:
    """(outputs, inputs, has a bias) of every Linear layer, in graph order."""
    layers = []
    for node in graph.nodes:
        if node.op is Op.LINEAR:
            rows, cols = graph.constants[node.inputs[1]].shape
            layers.append((int(rows), int(cols), len(node.inputs) > 2))
    return layers


def weight_bytes(graph: Graph, itemsize: int = FLOAT16_BYTES) -> int:
    """Bytes of every Linear layer's matrix and bias at `itemsize` bytes an element."""
    return sum((rows * cols + (rows if bias else 0)) * itemsize for rows, cols, bias in linear_layers(graph))


def macs_per_sample(graph: Graph) -> int:
    return sum(rows * cols for rows, cols, _ in linear_layers(graph))


def io_features(graph: Graph) -> int:
    """Values a sample reads and writes: every input's and output's features."""
    return sum(v.feature_size for v in graph.inputs + graph.outputs)


def inference_work(graph: Graph, batch: int, io_itemsize: int = FLOAT32_BYTES,
                   weight_itemsize: int = FLOAT16_BYTES) -> KernelWork:
    """One inference kernel over `batch` samples, inputs read and outputs written at `io_itemsize` bytes a value."""
    return KernelWork(batch * io_features(graph) * io_itemsize + weight_bytes(graph, weight_itemsize),
                      2 * batch * macs_per_sample(graph))


def tape_bytes_per_sample(graph: Graph) -> int:
    """A training tape's float16 bytes a sample: every Linear layer's input and delta (as the anchors count them)."""
    return FLOAT16_BYTES * sum(rows + cols for rows, cols, _ in linear_layers(graph))


def training_work(graph: Graph, batch: int, keeps_tape: bool = True) -> KernelWork:
    """One training step over `batch` samples: inputs and targets read (float32), the tape written and read where the
    method keeps one, Adam's parameters and state read and written; three products a layer."""
    parameters = sum(rows * cols + (rows if bias else 0) for rows, cols, bias in linear_layers(graph))
    data = batch * io_features(graph) * FLOAT32_BYTES
    tape = 2 * batch * tape_bytes_per_sample(graph) if keeps_tape else 0
    return KernelWork(data + tape + parameters * ADAM_BYTES_PER_PARAMETER, 3 * 2 * batch * macs_per_sample(graph))


def measured_peaks() -> RooflinePeaks | None:
    """This GPU's copy bandwidth and fp16 product rate measured through PyTorch (`peaks.measure_with_torch`), or None
    where PyTorch has no CUDA device."""
    measured = peaks.measure_with_torch()
    return None if measured is None else RooflinePeaks(measured[0], measured[1], "measured")
