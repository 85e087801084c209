"""GPU time of the coopvec kernels for the benchmark MLPs (timestamps around the dispatches, median of repeated runs),
by workgroup size: a report, printed at the end of the run, that the workgroup size default was chosen by."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.graph.onnx.importer import import_model
from coopnn.graph.passes import optimize
from coopnn.runtime.coopvec_backend import prepare_coopvec
from tests.conftest import BENCHMARK_MLPS, ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]
BATCHES = (1 << 14, 1 << 18, 1 << 21)
WORKGROUP_SIZES = (32, 64, 128)
REPEATS = 9
REPORT: list[str] = []


def _median_gpu_ms(executable, feeds) -> float:
    executable.run(feeds)
    times = []
    for _ in range(REPEATS):
        executable.run(feeds)
        times.append(executable.last_gpu_ms)
    return float(np.median(times))


@pytest.mark.parametrize("name", BENCHMARK_MLPS)
def test_samples_per_second(name):
    graph = optimize(import_model(ROOT / "models" / f"{name}.onnx"))
    rng = np.random.default_rng(0)
    for workgroup in WORKGROUP_SIZES:
        executable = prepare_coopvec(graph, None, workgroup)
        shipped_chunk = executable.max_chunk
        try:
            for batch in BATCHES:
                executable.max_chunk = shipped_chunk
                x = rng.uniform(-1, 1, (batch, graph.inputs[0].feature_size)).astype(np.float16)
                feeds = {graph.inputs[0].name: x}
                chunks = -(-batch // executable.max_chunk)
                ms = _median_gpu_ms(executable, feeds)
                executable.max_chunk = batch  # the whole batch in one dispatch, as the probe measured it
                single = _median_gpu_ms(executable, feeds)
                assert ms > 0 and single > 0
                REPORT.append(f"{name:16s} batch 2^{batch.bit_length() - 1:<2d} workgroup {workgroup:3d}: "
                              f"{ms:8.4f} ms {batch / ms / 1e6:6.2f} G samples/s in {chunks} dispatch(es); "
                              f"one dispatch {single:8.4f} ms {batch / single / 1e6:6.2f} G samples/s")
        finally:
            executable.close()


def test_report(capsys):
    with capsys.disabled():
        print("\ncoopvec GPU time (median of %d runs):\n  " % REPEATS + "\n  ".join(REPORT))
