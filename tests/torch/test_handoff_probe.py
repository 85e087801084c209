"""bench/torch_handoff.py without a GPU: its variant restores the library's Slot.record, its host-part timing
restores what it wrapped, and its report renders every row."""

from __future__ import annotations

import collections
import importlib.util

from coopnn.interop import slot as slot_module, tensors
from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("torch_handoff", ROOT / "bench" / "torch_handoff.py")
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)


def test_variants_and_host_parts_restore_the_library():
    record, read, wait = slot_module.Slot.record, tensors.as_cuda_input, probe.CudaDriver.wait
    with probe.variant("rerecord"):
        assert slot_module.Slot.record is probe._rerecord
    with probe.variant("flag", flag=None):
        assert slot_module.Slot.record is not record and probe.CudaDriver.wait is not wait
    assert probe.CudaDriver.wait is wait
    totals = collections.Counter()
    with probe.host_parts(totals):
        assert tensors.as_cuda_input is not read
    assert slot_module.Slot.record is record and tensors.as_cuda_input is read


def test_the_report_has_a_row_per_batch_and_variant():
    environment = {"vulkan": {"available": True, "device": "NVIDIA H200", "driver": "580"}, "torch": {"version": "2"},
                   "date": "2026-12-02T00:00:00+00:00", "coopnn": "0"}
    row = {"host_us": 40.0, "wall_us": 300.0, "stream_us": 250.0, "gpu_us": 10.0, "handoff_us": 240.0,
           "back_to_back_us": 260.0, "same_output": True}
    document = {"environment": environment, "model": "mlp_32_64x4_16", "calls": 3,
                "rows": [{"batch": 1024, "variant": v, **row} for v in probe.VARIANTS],
                "host_parts": {"1024": {"read inputs": 5.0}},
                "legs": {name: 200.0 + i for i, name in enumerate(probe.PROBES)}}
    text = probe.markdown(document)
    assert "| 2^10 | recorded | 40.0 | 300.0 | 250.0 | 10.0 | 240.0 | 260.0 | yes |" in text
    assert "| 2^10 | rerecord |" in text and "| 2^10 | 5.0 | 0.0 |" in text
    assert "| round_trip | signalled_first |" in text and "| 200.0 | 201.0 | 202.0 |" in text
