"""A training step's commands timed apart (`coopnn.bench.step_stages`, `bench/step_stages.py`): the names, the table
and the script's variants, and on a Vulkan device (lavapipe in CI) a portable session's step split into its
commands, each timed, next to the whole, and the script's file."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.bench.step_stages import command_name, markdown, stage_times
from coopnn.runtime.vk.commands import Dispatch, Recorded
from coopnn.shaders.training.tuning import Tuning
from tests.bench.test_scripts import _script
from tests.conftest import ROOT


def test_a_dispatch_is_named_by_its_kernel_and_other_commands_by_their_place():
    kernel = type("Kernel", (), {"name": "adam"})()
    assert command_name(Dispatch(kernel, ()), 3) == "adam"
    assert command_name(Recorded(lambda cmd: None), 7) == "command 7 (fill, copy or conversion)"


def test_the_table_gives_milliseconds_and_shares_and_dashes_where_none_were_timed():
    rows = [{"stage": "whole step", "ms": 0.5, "share": 1.0}, {"stage": "0: step", "ms": None, "share": None}]
    text = markdown("m, batch 2^10", rows)
    assert "| whole step | 0.5000 | 100.0% |" in text and "| 0: step | - | - |" in text


@pytest.mark.vulkan
def test_a_portable_step_splits_into_its_commands(require_vulkan):
    model = coopnn.load(str(ROOT / "models" / "mlp_3_64x2_3.onnx"), backend="portable")
    trainer = coopnn.Trainer(model, "l2", "adam")
    try:
        rng = np.random.default_rng(0)
        x, y = rng.uniform(-1, 1, (256, 3)).astype(np.float32), rng.uniform(0, 1, (256, 3)).astype(np.float32)
        trainer.fit(x, y, steps=2, batch_size=128, progress=False)
        data = trainer.session.upload_data(*trainer._data(x, y, on_device=True))
        try:
            rows = stage_times(trainer.session, data, 128, rounds=2)
        finally:
            data.close()
    finally:
        trainer.close()
        model.close()
    stages = [row["stage"] for row in rows]
    assert stages[0] == "whole step" and stages[-1] == "sum of the parts" and "1: loss_tiles" in stages
    assert all(row["ms"] > 0 for row in rows) and rows[0]["share"] == 1.0


def test_the_script_reads_trainer_options_and_tunings():
    script = _script("step_stages")
    assert script.parse_options("default") == ({}, None)
    assert script.parse_options("table_atomics=float32,gradients=coopvec") == (
        {"table_atomics": "float32", "gradients": "coopvec"}, None)
    assert script.parse_options("tuning:row_tiles=4,gradient_subgroups=4") == (
        {}, Tuning(row_tiles=4, gradient_subgroups=4))
    assert script.parse_options("step=coopvec_rows+tuning:deltas=samples,staged=True") == (
        {"step": "coopvec_rows"}, Tuning(deltas="samples", staged=True))


@pytest.mark.vulkan
def test_the_script_writes_a_table_for_each_model_variant_and_batch(require_vulkan, tmp_path):
    script = _script("step_stages")
    assert script.main(["--backend", "portable", "--models", "mlp_3_64x2_3", "--batches", "8", "--out",
                        str(tmp_path)]) == 0
    (written,) = tmp_path.glob("*-step-stages.md")
    text = written.read_text()
    assert "### mlp_3_64x2_3, batch 2^8, options: default" in text and "| whole step |" in text
