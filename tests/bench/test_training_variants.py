"""The training-kernel sweep's choices (`coopnn.bench.training_variants`), on hand-made rows (the sweep itself runs
on a GPU: bench/train_variants.py)."""

from __future__ import annotations

from dataclasses import asdict

from coopnn.bench import training_variants as tv
from coopnn.bench.roofline import KernelWork, peaks_for
from coopnn.shaders.training.tuning import DEFAULT, Tuning

H200 = peaks_for("NVIDIA H200")


def _row(tuning, step_ms, products_ms, whole_ms, status="measured", batch=1 << 18):
    work = KernelWork(1 << 28, 0)
    return {"model": "mlp_32_64x4_16", "batch": batch, "tuning": asdict(tuning), "variant": tuning.describe(),
            "status": status, "chunks": 128, "step_ms": step_ms, "products_ms": products_ms, "whole_ms": whole_ms,
            "step": work.against(step_ms, H200), "products": work.against(products_ms, H200),
            "roofline": work.against(whole_ms, H200), "speedup": 0.36 / whole_ms,
            "step_statistics": {"Register Count": 96}, "products_statistics": {}}


ROWS = [_row(DEFAULT, 0.18, 0.19, 0.36), _row(Tuning(step_samples=128, step_invocations=128), 0.12, 0.19, 0.30),
        _row(Tuning(gradient_subgroups=4), 0.18, 0.10, 0.27), _row(Tuning(deltas="features"), 0.20, 0.18, 0.37),
        _row(Tuning(chunk_tiles=16), 0.18, 0.09, 0.40), _row(Tuning(row_tiles=8), 0.10, 0.05, 0.10, "gradient differs")]


def test_the_sweep_starts_from_the_default_and_tries_each_tuning_once():
    tunings = tv.variants()
    assert tunings[0] == DEFAULT and len(set(tunings)) == len(tunings)
    assert any(t.gradient_subgroups == 4 for t in tunings) and any(t.step_samples == 128 for t in tunings)


def test_the_combined_tuning_takes_each_kernels_fastest_knobs_and_skips_rows_that_did_not_match():
    # chunk_tiles=16 has the fastest products but not the fastest rest of a step (its optimizer adds more partials)
    assert tv.combined(ROWS) == Tuning(step_samples=128, step_invocations=128, gradient_subgroups=4)
    # no row varies the step kernel alone, nor is the default one
    assert tv.combined([r for r in ROWS if r["variant"] != "default" and "step" not in r["variant"]]) is None
