"""What `import coopnn` loads: not onnx, which only loading or saving an ONNX model needs (a fifth of a second to
import here, half a second on the H100 machine's host), so a model built in Python starts without it."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def _loaded_after(code: str) -> set[str]:
    script = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    return set(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                              cwd=ROOT).stdout.split())


def test_importing_coopnn_and_building_a_model_leaves_onnx_unloaded():
    loaded = _loaded_after("import coopnn, coopnn.cli\nmodel = coopnn.mlp(2, [8], 1, backend='numpy')\n"
                           "coopnn.Trainer(model).step([[0.0, 1.0]], [[0.5]])")
    assert "onnx" not in loaded and not any(name.startswith("coopnn.graph.onnx") for name in loaded)


def test_loading_a_model_file_imports_onnx():
    loaded = _loaded_after("import coopnn\ncoopnn.load('models/mlp_3_64x2_3.onnx', backend='numpy')")
    assert "onnx" in loaded
