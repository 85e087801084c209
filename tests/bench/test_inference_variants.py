"""The kernel-variant sweep (`coopnn.bench.inference_variants`) end to end on a Vulkan device (lavapipe here, the
portable backend running the shipped kernel): the shipped kernel timed and checked, a variant that cannot run
reported with its reason and left out; nothing here is a measurement."""

from __future__ import annotations

import pytest

from coopnn.bench import inference_variants

pytestmark = [pytest.mark.vulkan, pytest.mark.slow]  # a model load and two dozen dispatches on lavapipe


def test_the_shipped_kernel_is_timed_and_a_failing_variant_reported(validated_device, tmp_path):
    variants = {name: inference_variants.VARIANTS[name] for name in ("shipped", "staged")}
    document = inference_variants.measure(["mlp_32_64x4_16"], [10], variants, rounds=2, io_dtypes=("f32",),
                                          backend="portable", chained_samples=0, statistics=True)
    rows = {row["variant"]: row for row in document["rows"]}
    assert set(rows) == {"shipped", "staged"}
    shipped = rows["shipped"]
    assert shipped["chained"] > 0 and shipped["single"] > 0 and shipped["run_ms"] > 0
    assert shipped["repeat"] == 4 and shipped["roofline"]["flops"] == 1024 * 30720
    # the portable device has no cooperative vectors: the coopvec variant fails to load, with the reason
    assert "error" in rows["staged"] and "chained" not in rows["staged"]
    # lavapipe reports no statistics: one row says so, and the timings stand
    (statistics,) = document["statistics"]
    assert "does not report kernel statistics" in statistics["error"]
    markdown = inference_variants.write(document, tmp_path).read_text()
    assert "| mlp_32_64x4_16 | 2^10 | f32 | shipped |" in markdown
    assert "| mlp_32_64x4_16 | 2^10 | f32 | staged | failed:" in markdown
