"""Speed-ups and tables from a results document (the hand-made one of conftest.py, so every number is known)."""

from __future__ import annotations

import pytest

from coopnn.bench.report import (
    FIRST_CALL_HEADER,
    TIMING_HEADER,
    batch_label,
    comparisons,
    markdown_report,
    text_report,
)
from coopnn.tables import format_table


def _speedups(document):
    return {(c["batch"], c["runner"]): (round(c["speedup"], 6), c["basis"], c["reference"])
            for c in document["comparisons"]}


def test_speedup_on_gpu_time_where_both_have_it_else_host_time(document):
    assert _speedups(document) == {
        (16384, "coopvec"): (4.0, "gpu", "torch-cuda-fp16"),
        (16384, "numpy"): (0.05, "host", "torch-cuda-fp16"),
        (16384, "torch-cuda-fp16"): (1.0, "gpu", "torch-cuda-fp16"),
        (2097152, "coopvec"): (8.0, "gpu", "torch-cuda-fp16"),
        (2097152, "torch-cuda-fp16"): (1.0, "gpu", "torch-cuda-fp16"),
    }


def test_no_baseline_no_comparisons(document):
    document["results"] = [r for r in document["results"] if r["kind"] == "coopnn"]
    assert comparisons(document) == []


def test_text_report(document):
    text = text_report(document)
    assert "NVIDIA H100 80GB HBM3, driver NVIDIA 580.159" in text and "989.4 TFLOP/s" in text
    assert "8x gpu vs torch-cuda-fp16" in text and "skipped: too slow" in text
    assert "0.01 (0.009, 0.011)" in text and "no CUDA provider" in text


def test_markdown_report(document):
    md = markdown_report(document)
    assert md.startswith("# coopnn benchmark: NVIDIA H100 80GB HBM3")
    for heading in ("## Models", "## Timings", "## First call and accuracy", "## Not run here"):
        assert heading in md
    assert "| " + " | ".join(TIMING_HEADER) + " |" in md and "| " + " | ".join(FIRST_CALL_HEADER) + " |" in md
    assert "| mlp | coopvec | 2^21 | 0.2 (0.18, 0.22) | 100 | 10.5 G |" in md
    assert "bandwidth bound 17 G samples/s, fp16 compute bound 32 G samples/s" in md
    assert "- onnxruntime-cuda: no CUDA provider" in md


def test_roofline_columns(document):
    """coopvec at 2^21 in 0.2 ms: 402.7 MB and 64.42 GFLOP; on the H100's datasheet (3.35 TB/s, 989.4 TFLOP/s) the
    bound is the bytes' 0.1202 ms, so 1.66x."""
    md = markdown_report(document)
    assert "| 402.7 | 64.42 | 2.01 | 322 | 0.1202 (memory) | 1.66 |" in md
    assert "roofline 3.35 TB/s and 989 TFLOP/s (datasheet)" not in md  # the fixture's document has no roofline peaks
    document["roofline_peaks"] = {"bandwidth_tbps": 3.35, "tensor_tflops": 989.4, "source": "datasheet"}
    assert "roofline 3.35 TB/s and 989 TFLOP/s (datasheet)" in markdown_report(document)
    del document["results"][0]["batches"][0]["roofline"]  # a results file from before the roofline
    assert markdown_report(document)


def test_format_table_aligns_columns():
    text = format_table(["a", "long"], [["xyz", "1"], ["q", "22"]])
    assert text.splitlines() == ["a    long", "---  ----", "xyz  1", "q    22"]


@pytest.mark.parametrize("n, label", [(16384, "2^14"), (1, "2^0"), (1000, "1000")])
def test_batch_label(n, label):
    assert batch_label(n) == label
