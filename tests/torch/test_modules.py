"""`coopnn.torch` on any machine: it imports without CUDA, refuses to make a module there with the reason, checks
configs first (InputError naming the key), refuses parameters put in place of the shared vector, and `import coopnn`
leaves PyTorch unloaded."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coopnn.errors import BackendUnavailableError, InputError
from tests.conftest import ROOT, import_torch

torch = import_torch()

NETWORK = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
           "n_hidden_layers": 2}
ENCODING = {"otype": "Frequency", "n_frequencies": 4}


def test_importing_coopnn_leaves_torch_unloaded():
    script = "import coopnn, coopnn.cli\nimport sys\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("make", [
    lambda t: t.Network(32, 16, NETWORK),
    lambda t: t.NetworkWithInputEncoding(3, 4, ENCODING, NETWORK),
    lambda t: t.Encoding(3, ENCODING),
], ids=["Network", "NetworkWithInputEncoding", "Encoding"])
def test_without_cuda_a_module_is_refused_with_the_reason(no_cuda, make):
    import coopnn.torch

    with pytest.raises(BackendUnavailableError, match=r"sees no CUDA device \(torch.cuda.is_available\(\) is False\)"):
        make(coopnn.torch)
    assert coopnn.torch.cuda_unavailable_reason() is not None


def test_from_model_without_cuda_is_refused_and_leaves_the_model_running(no_cuda):
    import coopnn
    import coopnn.torch

    with coopnn.mlp(3, [8], 2, backend="numpy") as model:
        with pytest.raises(BackendUnavailableError, match="no CUDA device"):
            coopnn.torch.from_model(model)
        assert model.run([[0.0, 0.5, 1.0]]).shape == (1, 2)
    with pytest.raises(InputError, match="takes a coopnn Model, not str"):
        coopnn.torch.from_model("mlp.onnx")


@pytest.mark.parametrize("make, message", [
    (lambda t: t.Network(32, 16, {**NETWORK, "n_neurons": 48}), "key 'network.n_neurons' is 48"),
    (lambda t: t.Network(32, 16, {**NETWORK, "activation": "Swish"}), "key 'network.activation' is 'Swish'"),
    (lambda t: t.Network(0, 16, NETWORK), "n_input_dims must be a whole number >= 1, not 0"),
    (lambda t: t.Network(32, 16, "FullyFusedMLP"), "network_config is a tiny-cuda-nn JSON object"),
    (lambda t: t.Encoding(3, {"otype": "Hash"}), "key 'otype' is 'Hash', which is not an encoding coopnn has"),
    (lambda t: t.NetworkWithInputEncoding(3, 4, {"otype": "Frequency", "n_frequencies": -1}, NETWORK),
     "n_frequencies"),
    (lambda t: t.Network(32, 16, NETWORK, output_dtype=torch.bfloat16), "output_dtype must be torch.float32 or"),
], ids=["width", "activation", "dims", "config", "encoding", "frequencies", "dtype"])
def test_configs_are_checked_before_cuda_is_asked_for(no_cuda, make, message):
    import coopnn.torch

    with pytest.raises(InputError, match=message):
        make(coopnn.torch)


@pytest.mark.parametrize("replace", [lambda p: p.data.half(), lambda p: p.data.double(), lambda p: p.data.clone()],
                         ids=["half", "double", "copy"])
def test_parameters_replaced_by_a_copy_are_refused(replace):
    from coopnn.torch.modules import _refuse_replaced

    vector = torch.zeros(64)
    params = torch.nn.Parameter(vector)
    _refuse_replaced(params, vector)  # the vector itself
    params.data = replace(params)  # as module.half() or .to() do
    with pytest.raises(InputError, match="must stay the float32 vector"):
        _refuse_replaced(params, vector)
