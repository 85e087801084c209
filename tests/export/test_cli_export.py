"""`coopnn export-shader`: files written for a zoo model, one-line errors for models and options it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from coopnn.cli import main
from coopnn.cli_export import default_name

MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.mark.parametrize("lang", ["glsl", "slang"])
def test_the_command_writes_the_export(tmp_path, capsys, lang):
    assert main(["export-shader", str(MODELS / "mlp_3_64x2_3.onnx"), "--lang", lang, "-o", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["coopnn_weights.h", "mlp_3_64x2_3.h", "mlp_3_64x2_3.json", f"mlp_3_64x2_3.{lang}",
                            "mlp_3_64x2_3.weights.bin"])
    assert "mlp_3_64x2_3_eval" in capsys.readouterr().out


def test_a_model_it_cannot_express_is_a_one_line_error(tmp_path, capsys):
    assert main(["export-shader", str(MODELS / "activations_zoo.onnx"), "-o", str(tmp_path)]) == 1
    assert "node 'node_prelu' (prelu)" in capsys.readouterr().err
    assert main(["export-shader", str(MODELS / "mlp_3_64x2_3.onnx"), "--weights", "q8_0", "-o", str(tmp_path)]) == 1
    assert "weights='q8_0'" in capsys.readouterr().err


def test_the_default_name_is_an_identifier():
    assert default_name("models/mlp-3.v2.onnx") == "mlp_3_v2"
    assert default_name("3d.onnx") == "net_3d"
