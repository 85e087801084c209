"""The device-array probe (`coopnn.bench.device_arrays`) runs every variant end to end on a Vulkan device (lavapipe
here, the portable backend) and reports them; nothing here is a measurement."""

from __future__ import annotations

import pytest

from coopnn.bench import device_arrays
from coopnn.bench.training import torch_cuda_unavailable_reason
from tests.conftest import ROOT

pytestmark = [pytest.mark.vulkan, pytest.mark.slow]  # five model loads and a dozen runs: seconds on lavapipe


def test_every_variant_runs_and_is_reported(validated_device, tmp_path):
    document = device_arrays.measure([ROOT / "models" / "mlp_3_64x2_3.onnx"], [9], runs=1, backend="portable")
    (row,) = document["rows"]
    assert set(device_arrays.VARIANTS) <= set(row)
    for variant in device_arrays.VARIANTS:
        assert row["roofline"][variant]["flops"] == 512 * 8960
        if variant not in ("float16", "cuda", "cuda_f16"):
            assert row[variant]["wall_ms"] > 0
    # portable has no float16-I/O kernel: the row says why instead of a time
    assert row["float16"]["gpu_ms"] is None and "float16 device arrays run on the coopvec" in row["float16"]["reason"]
    assert row["roofline"]["float16"]["bytes"] < row["roofline"]["device"]["bytes"]
    if torch_cuda_unavailable_reason() is None:
        assert row["cuda"]["wall_ms"] > 0
    else:
        assert row["cuda"]["gpu_ms"] is None and row["cuda"]["reason"] == torch_cuda_unavailable_reason()
    assert row["chunked"]["chunks"] >= 1
    markdown = device_arrays.write(document, tmp_path).read_text()
    assert "| mlp_3_64x2_3 | 2^9 |" in markdown
