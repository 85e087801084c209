"""GPU time of the coopvec kernels for the benchmark MLPs, by workgroup size: a report, printed at the end of the run,
that the workgroup size default was chosen by.

Two figures per case, both from timestamps around the dispatches: `run` is `last_gpu_ms` of `executable.run` (median
of repeated runs, each uploading its batch and downloading the results, so the GPU idles between dispatches), and
`back-to-back` is one submission of repeated dispatches over the whole batch, divided by their number: the kernel's
throughput once the GPU is busy, as a benchmark loop sees it.
"""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.backends.coopvec.backend import prepare_coopvec
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.lower import lower
from tests.conftest import BENCHMARK_MLPS, ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]
BATCHES = (1 << 14, 1 << 18, 1 << 21)
WORKGROUP_SIZES = (32, 64, 128)
REPEATS = 9
BACK_TO_BACK = 30
REPORT: list[str] = []


def _run_ms(executable, feeds) -> float:
    times = []
    for _ in range(REPEATS + 1):
        executable.run(feeds)
        times.append(executable.last_gpu_ms)
    return float(np.median(times[1:]))


def _back_to_back_ms(executable, batch: int) -> float:
    """GPU time per dispatch of the whole batch, dispatched back to back on one slot's buffers."""
    from coopnn.runtime.vk.commands import Dispatch

    slot = executable.slots.acquire()
    try:
        slot.ensure(batch, batch)
        io = tuple(slot.buffers[b.index] for b in executable.inputs + executable.outputs)
        dispatch = Dispatch(executable.kernel, (executable.weight_buffer,) + io,
                            executable.binary.pack_push(count=batch),
                            executable.kernel.group_count_for(batch))
        executable.context.run([dispatch] * 3, downloads={})
        return executable.context.run([dispatch] * BACK_TO_BACK, downloads={}) / BACK_TO_BACK
    finally:
        executable.slots.release(slot)


@pytest.mark.parametrize("name", BENCHMARK_MLPS)
def test_samples_per_second(name):
    graph = optimize(import_model(ROOT / "models" / f"{name}.onnx"))
    rng = np.random.default_rng(0)
    for workgroup in WORKGROUP_SIZES:
        executable = prepare_coopvec(graph, lower(graph), FP16, None, workgroup)
        try:
            for batch in BATCHES:
                feeds = {graph.inputs[0].name: rng.uniform(-1, 1, (batch, graph.inputs[0].feature_size))
                         .astype(np.float32)}
                run_ms = _run_ms(executable, feeds)
                chunks = executable.last_timing.chunks
                steady_ms = _back_to_back_ms(executable, min(batch, executable.max_chunk))
                assert run_ms > 0 and steady_ms > 0
                REPORT.append(f"{name:16s} 2^{batch.bit_length() - 1:<2d} wg {workgroup:3d}: run {run_ms:7.4f} ms "
                              f"{batch / run_ms / 1e6:6.2f} G/s ({chunks} dispatch(es)); back-to-back "
                              f"{steady_ms:7.4f} ms {batch / steady_ms / 1e6:6.2f} G/s")
        finally:
            executable.close()


def test_report(capsys):
    with capsys.disabled():
        print(f"\ncoopvec GPU time (run: median of {REPEATS}; back-to-back: {BACK_TO_BACK} dispatches):\n  "
              + "\n  ".join(REPORT))
