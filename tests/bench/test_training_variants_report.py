"""The training-kernel sweep's report (`coopnn.bench.training_variants_report`), on the hand-made rows of
`test_training_variants`."""

from __future__ import annotations

from coopnn.bench import training_variants_report as report
from tests.bench.test_training_variants import ROWS


def test_the_report_names_the_fastest_variant_of_each_kernel_and_every_failure():
    document = {"environment": {"date": "2026-12-02T00:00:00+00:00", "vulkan": {"available": True,
                                                                              "device": "NVIDIA H200",
                                                                              "driver": "NVIDIA 580"}},
                "rows": ROWS + [{"model": "mlp_64_128x4_16", "status": "RuntimeError: no device"}]}
    text = report.markdown(document)
    assert "| mlp_32_64x4_16 | 262144 | 0.3600 | 0.2700 (" in text
    assert "| gradient_subgroups=4 |" in text and "| 96 |" in text
    assert "gradient differs" in text and "- mlp_64_128x4_16: RuntimeError: no device" in text
