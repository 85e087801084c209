"""`coopnn.torch` modules on a cooperative-vector GPU with PyTorch CUDA: forward passes against the float16 emulation
of the same network (the coopvec oracle, float16 tolerances) and against the network written in PyTorch (float32),
for every activation; parameters updated in place by torch optimizers and seen by the next call; float16 in and out;
module.half() refused; backward passes (parameters and inputs, and parameters alone on the tiled step kernel) against
PyTorch's autograd; an empty batch; double backward refused; a short run of torch.optim.Adam against coopnn's Trainer;
several streams; tensors outliving their module; 10,000 calls with no growth in Vulkan objects, fds or this process's
device memory. Skips, with the reason, without PyTorch, a CUDA device or cooperative vectors."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from coopnn.errors import CompileError
from coopnn.graph.ir import Op
from coopnn.graph.parameters import with_parameters
from coopnn.layouts.formats.emulation import run_fp16_emulation
from tests.conftest import import_torch
from tests.interop.test_cuda_interop import _open_fds, _own_device_bytes
from tests.shaders.targets.encoding_cases import fp16_reference

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("coopvec_device")]

FP16 = {"rtol": 1e-3, "atol": 2.5e-3}
FP32 = {"rtol": 1e-4, "atol": 1e-5}
# the float16 emulation is the oracle of these weights on this backend
COOPVEC = {"backend": "coopvec", "weights": "fp16"}
ACTIVATIONS = ("None", "ReLU", "LeakyReLU", "Exponential", "Sine", "Sigmoid", "Softplus", "Tanh")
# The H200's float16 products accumulate in float16 (the only float16 combination it lists,
# ../shared/gpu/h200-capabilities.md) and the emulation sums in float32: the two agree at the float16 tolerance while
# a layer's partial sums stay near 1. Exponential layers on Xavier's weights reach tens (e^5 in the second layer), so
# that network runs on a quarter of them, where its sums stay below 2 as the other activations' do.
WEIGHT_SCALE = {"Exponential": 0.25}
# Activations with a kink, where a pre-activation within the float16 accumulation's error of 0 may take either side
KINKED = ("ReLU", "LeakyReLU")


@pytest.fixture(scope="module")
def torch():
    torch = import_torch()
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


@pytest.fixture(scope="module")
def ct(torch):
    import coopnn.torch

    return coopnn.torch


def _network(width=64, layers=2, activation="ReLU", output_activation="None"):
    return {"otype": "FullyFusedMLP", "n_neurons": width, "n_hidden_layers": layers, "activation": activation,
            "output_activation": output_activation}


def _emulated(module, x):
    """The float16 emulation of the module's network with the parameters `params` holds now; behind an encoding,
    the encoding reference (`fp16_reference`: the kernels encode the unrounded input in float32, where the emulation
    alone would round it first)."""
    values = {k: v.detach().cpu().numpy() for k, v in module.named_parameter_views().items()}
    graph = with_parameters(module._runner.model.graph, values)
    rows = x.float().detach().cpu().numpy()
    if graph.nodes[0].op is Op.ENCODING:
        return fp16_reference(graph, rows)
    (feed,) = (value.name for value in graph.inputs)
    (output,) = run_fp16_emulation(graph, {feed: rows}).values()
    return output


def _torch_activation(torch, name):
    f = torch.nn.functional
    return {"None": lambda v: v, "ReLU": torch.relu, "LeakyReLU": lambda v: f.leaky_relu(v, 0.01),
            "Exponential": torch.exp, "Sine": torch.sin, "Sigmoid": torch.sigmoid,
            "Softplus": lambda v: f.softplus(v, beta=10.0), "Tanh": torch.tanh}[name]


def _in_pytorch(torch, module, x, activation, output_activation):
    """The same MLP written in PyTorch, in float32, from the module's parameters."""
    views = module.named_parameter_views()
    layers = sorted({name.rsplit(".", 1)[0] for name in views}, key=lambda n: int(n.split(".")[1]))
    y = x.float()
    for i, layer in enumerate(layers):
        y = torch.nn.functional.linear(y, views[f"{layer}.weight"].detach(), views[f"{layer}.bias"].detach())
        y = _torch_activation(torch, output_activation if i == len(layers) - 1 else activation)(y)
    return y


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_forward_matches_the_emulation_and_pytorch_for_every_activation(torch, ct, activation):
    output_activation = "Sigmoid" if activation == "None" else "None"
    config = _network(activation=activation, output_activation=output_activation)
    module = ct.Network(32, 16, config, seed=7, **COOPVEC)
    assert module.backend == "coopvec"
    with torch.no_grad():
        module.params.mul_(WEIGHT_SCALE.get(activation, 1.0))
    x = (torch.rand(3000, 32, device="cuda") * 2 - 1).half().float()
    y = module(x)
    assert y.shape == (3000, 16) and y.dtype == torch.float32 and y.is_cuda
    np.testing.assert_allclose(y.detach().cpu().numpy(), _emulated(module, x), **FP16)
    want = _in_pytorch(torch, module, x, activation, output_activation)
    np.testing.assert_allclose(y.detach().cpu().numpy(), want.detach().cpu().numpy(), rtol=1e-2, atol=1e-2)
    module.close()


def test_optimizer_updates_are_seen_by_the_next_call(torch, ct):
    module = ct.Network(32, 16, _network(), seed=1, **COOPVEC)
    optimizer = torch.optim.Adam([module.params], lr=1e-2)
    x = torch.rand(4096, 32, device="cuda") * 2 - 1
    before = module(x).clone()
    for step in range(5):
        module.params.grad = torch.randn_like(module.params)
        optimizer.step()
        y = module(x)
        np.testing.assert_allclose(y.detach().cpu().numpy(), _emulated(module, x), **FP16, err_msg=f"step {step}")
    assert not torch.equal(before, y)
    assert module._runner.host_refreshes == 0  # Xavier's zero biases each have a kernel entry of their own
    with torch.no_grad():
        module.named_parameter_views()["layers.0.bias"].add_(0.25)
    np.testing.assert_allclose(module(x).detach().cpu().numpy(), _emulated(module, x), **FP16)
    assert module._runner.host_refreshes == 0
    module.close()


def test_parameters_converted_by_module_half_are_refused(torch, ct):
    from coopnn.errors import InputError

    module = ct.Network(32, 16, _network(), seed=2, **COOPVEC)
    module.half()  # params become a float16 copy, which the kernels would never read
    with pytest.raises(InputError, match="must stay the float32 vector"):
        module(torch.rand(64, 32, device="cuda"))
    module.close()


def test_half_inputs_and_half_outputs(torch, ct):
    module = ct.Network(32, 16, _network(), seed=2, output_dtype=torch.float16, **COOPVEC)
    x = (torch.rand(5000, 32, device="cuda") * 2 - 1).half()
    y = module(x)
    assert y.dtype == torch.float16
    np.testing.assert_allclose(y.float().detach().cpu().numpy(), _emulated(module, x), **FP16)
    assert module(x.float()).dtype == torch.float16
    module.close()
    full = ct.Network(32, 16, _network(), seed=2, **COOPVEC)
    assert full(x).dtype == torch.float32
    full.close()


def test_encodings_and_networks_with_input_encodings(torch, ct):
    frequency = {"otype": "Frequency", "n_frequencies": 4}
    encoding = ct.Encoding(3, frequency, **COOPVEC)
    x = torch.rand(2000, 3, device="cuda")
    assert encoding.n_output_dims == 24 and encoding(x).shape == (2000, 24)
    np.testing.assert_allclose(encoding(x).detach().cpu().numpy(), _emulated(encoding, x), **FP16)
    encoding.close()
    for config in (frequency, {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 2,
                               "log2_hashmap_size": 12, "base_resolution": 8, "per_level_scale": 1.5}):
        module = ct.NetworkWithInputEncoding(3, 4, config, _network(), seed=3, **COOPVEC)
        np.testing.assert_allclose(module(x).detach().cpu().numpy(), _emulated(module, x), **FP16,
                                   err_msg=config["otype"])
        module.close()


def test_from_model_copies_the_model(torch, ct):
    import coopnn

    with coopnn.mlp(32, [64, 64], 16, backend="coopvec", weights="fp16", seed=4) as model:
        module = ct.from_model(model)
        x = torch.rand(1000, 32, device="cuda") * 2 - 1
        np.testing.assert_array_equal(module(x).detach().cpu().numpy(), model.run(x.detach().cpu().numpy()))
        with torch.no_grad():
            module.params.mul_(0.5)
        assert not np.array_equal(module(x).detach().cpu().numpy(), model.run(x.detach().cpu().numpy()))
        trained = module.to_model()
        np.testing.assert_allclose(trained.run(x.detach().cpu().numpy()), module(x).detach().cpu().numpy(), **FP16)
        trained.close()
        module.close()


def test_several_streams_give_what_the_default_stream_gives(torch, ct):
    module = ct.Network(32, 16, _network(), seed=5, **COOPVEC)
    inputs = [torch.rand(b, 32, device="cuda") for b in (100, 4096, 20000)]
    wants = [module(x).clone() for x in inputs]
    streams = [torch.cuda.Stream() for _ in range(3)]
    got = []
    for _ in range(20):
        for stream, x in zip(streams, inputs):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                got.append((stream, module(x)))
    torch.cuda.synchronize()
    for i, (_, y) in enumerate(got):
        torch.testing.assert_close(y, wants[i % 3], rtol=0, atol=0)
    module.close()


def test_tensors_outlive_their_module(torch, ct):
    module = ct.Network(32, 16, _network(), seed=6, **COOPVEC)
    x = torch.rand(777, 32, device="cuda")
    y = module(x)
    want = y.cpu().clone()
    params = module.params
    values = params.detach().cpu().clone()
    module.close()
    del module
    gc.collect()
    torch.testing.assert_close(y.cpu(), want, rtol=0, atol=0)
    torch.testing.assert_close(params.detach().cpu(), values, rtol=0, atol=0)
    del y, params
    gc.collect()
    torch.cuda.synchronize()


def _close_enough(got, want):
    """float16 kernels against the float16-quantized reference: within 2% of the gradient's largest magnitude."""
    scale = float(want.abs().max())
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(), rtol=2e-2, atol=2e-2 * scale)


def _float16_steps(torch):
    """(rounded, rounded both ways): float16 rounding whose gradient passes unchanged (weights, a layer's input), and
    one whose gradient is rounded too (a pre-activation and its delta, which the kernels keep in float16)."""
    class BothWays(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.half().float()

        @staticmethod
        def backward(ctx, g):
            return g.half().float()

    return (lambda v: v + (v.half().float() - v).detach()), BothWays.apply


def _quantized_reference(torch, views, x, activation):
    """The network in PyTorch as the kernels round it: float16 weights and layer inputs, float16 pre-activations
    and deltas, float32 elsewhere; the output, and for each hidden layer (pre-activations, the float16 error bound of
    their sums: half an ulp of the sum of |w a|)."""
    rounded, both_ways = _float16_steps(torch)
    layers = sorted({name.rsplit(".", 1)[0] for name in views}, key=lambda n: int(n.split(".")[1]))
    y, hidden = x, []
    for i, layer in enumerate(layers):
        w, b, a = rounded(views[f"{layer}.weight"]), rounded(views[f"{layer}.bias"]), rounded(y)
        z = both_ways(torch.nn.functional.linear(a, w, b))
        if i == len(layers) - 1:
            return z, hidden
        bound = 2.0 ** -11 * (a.detach().abs() @ w.detach().abs().T + b.detach().abs())
        hidden.append((z.detach(), bound))
        y = _torch_activation(torch, activation)(z)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_backward_matches_pytorch_for_every_activation(torch, ct, activation):
    module = ct.Network(32, 16, _network(activation=activation), seed=8, **COOPVEC)
    x = ((torch.rand(2048, 32, device="cuda") * 2 - 1).half().float()).requires_grad_()
    target = torch.rand(2048, 16, device="cuda")
    torch.nn.functional.mse_loss(module(x), target).backward()
    # the gradient lands in params.grad as the backward pass wrote it, in memory Vulkan shares
    assert module.params.grad.data_ptr() == module._backward.last.on_gpu.last_gradient_pointer
    reference = module.params.detach().clone().requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    y, hidden = _quantized_reference(torch, module._runner.master.layout.views(reference), x_ref, activation)
    torch.nn.functional.mse_loss(y, target).backward()
    _close_enough(module.params.grad, reference.grad)
    compared = torch.ones(len(x), dtype=torch.bool, device="cuda")
    if activation in KINKED:
        # a sample with a pre-activation within its sum's float16 error of the kink may take the other side on the
        # GPU, which accumulates in float16: its input's gradient is not determined by the arithmetic
        for z, bound in hidden:
            compared &= (z.abs() >= bound).all(dim=1)
        assert int(compared.sum()) >= len(x) // 2
    _close_enough(x.grad[compared], x_ref.grad[compared])
    module.close()


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_parameter_gradients_alone_run_on_the_tiled_step(torch, ct, activation):
    """An input without requires_grad: the pass runs on the tiled step kernel, whose blocked copy of the weights is
    rearranged on the GPU from the parameters torch changed in place, and gives PyTorch's gradients."""
    module = ct.Network(32, 16, _network(activation=activation), seed=8, **COOPVEC)
    views = module._runner.master.layout.views
    x = (torch.rand(2048, 32, device="cuda") * 2 - 1).half().float()
    target = torch.rand(2048, 16, device="cuda")
    for change in (1.0, 0.5):
        with torch.no_grad():
            module.params.mul_(change)
        module.params.grad = None
        torch.nn.functional.mse_loss(module(x), target).backward()
        assert module._backward.last.session.step_method.name == "tiled"
        assert module._backward.last.on_gpu is not None, module._backward.last.gpu_unavailable
        reference = module.params.detach().clone().requires_grad_()
        y, _ = _quantized_reference(torch, views(reference), x, activation)
        torch.nn.functional.mse_loss(y, target).backward()
        _close_enough(module.params.grad, reference.grad)
    module.close()


def test_an_empty_batch_keeps_a_pending_refresh_and_gets_zero_gradients(torch, ct):
    module = ct.Network(32, 16, _network(), seed=1, **COOPVEC)
    x = torch.rand(1024, 32, device="cuda") * 2 - 1
    with torch.no_grad():
        module.params.add_(0.01)  # the shared zero biases' update, through the host: refreshes on the GPU from here
    module(x)
    with torch.no_grad():
        module.params.mul_(0.5)
    empty = torch.zeros(0, 32, device="cuda", requires_grad=True)
    y = module(empty)
    y.sum().backward()
    assert y.shape == (0, 16) and empty.grad.shape == (0, 32) and not module.params.grad.any()
    np.testing.assert_allclose(module(x).detach().cpu().numpy(), _emulated(module, x), **FP16)
    module.close()


def test_double_backward_is_refused(torch, ct):
    module = ct.Network(32, 16, _network(), seed=8, **COOPVEC)
    x = torch.rand(64, 32, device="cuda", requires_grad=True)
    with pytest.raises(CompileError, match="cannot be differentiated again"):
        torch.autograd.grad(module(x).sum(), x, create_graph=True)
    module.close()


def test_adam_through_the_module_follows_the_trainer(torch, ct):
    """The same network, seed and batches: torch.optim.Adam on the module's parameters, and coopnn's Trainer."""
    import coopnn
    from coopnn.train.optim import Adam

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4096, 32)).astype(np.float32)
    y = np.sin(x[:, :16] * 3).astype(np.float32)
    with coopnn.mlp(32, [64, 64], 16, backend="coopvec", weights="fp16", seed=11) as model:
        module = ct.from_model(model)
        trainer = coopnn.Trainer(model, "l2", Adam(lr=1e-2), seed=0)
        optimizer = torch.optim.Adam([module.params], lr=1e-2)
        ours, theirs = [], []
        for step in range(30):
            rows = rng.integers(0, len(x), 1024)
            xb, yb = torch.from_numpy(x[rows]).cuda(), torch.from_numpy(y[rows]).cuda()
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(module(xb), yb)
            loss.backward()
            optimizer.step()
            ours.append(loss.item())
            theirs.append(trainer.step(x[rows], y[rows]))
        assert ours[-1] < 0.5 * ours[0]
        assert 0.7 < ours[-1] / theirs[-1] < 1.4
        trainer.close()
        module.close()


def test_ten_thousand_calls_leak_nothing(torch, ct):
    module = ct.Network(32, 16, _network(), seed=9, **COOPVEC)
    context = module._runner.model._executable.context
    batches = (1, 777, 4096, 65_536)
    inputs = {b: torch.rand(b, 32, device="cuda") for b in batches}

    def run_many(calls):
        y = None
        for i in range(calls):
            if i % 10 == 0:
                with torch.no_grad():
                    module.params.mul_(0.999)  # an update every tenth call: the refresh runs too
            y = module(inputs[batches[i % len(batches)]])
        return y

    run_many(200)
    torch.cuda.synchronize()
    gc.collect()
    before = (context.live_objects(), _open_fds(), torch.cuda.memory_allocated(), _own_device_bytes(context))
    last = run_many(10_000)
    torch.cuda.synchronize()
    gc.collect()
    after = (context.live_objects(), _open_fds(), torch.cuda.memory_allocated(), _own_device_bytes(context))
    np.testing.assert_allclose(last.detach().cpu().numpy(), _emulated(module, inputs[batches[9999 % 4]]), **FP16)
    assert after == before
    module.close()


def test_training_steps_leak_nothing(torch, ct):
    """Forward, backward on the GPU and fused Adam, repeated: the gradients' pooled buffers and recordings are
    reused, so nothing grows."""
    module = ct.Network(32, 16, _network(), seed=10, **COOPVEC)
    context = module._runner.model._executable.context
    optimizer = torch.optim.Adam([module.params], lr=1e-3, fused=True)
    x, target = torch.rand(4096, 32, device="cuda", requires_grad=True), torch.rand(4096, 16, device="cuda")

    def steps(count):
        for _ in range(count):
            optimizer.zero_grad(set_to_none=True)
            x.grad = None
            torch.nn.functional.mse_loss(module(x), target).backward()
            optimizer.step()
        torch.cuda.synchronize()
        gc.collect()

    steps(20)
    assert module._backward.last.on_gpu is not None, module._backward.last.gpu_unavailable
    before = (context.live_objects(), _open_fds(), torch.cuda.memory_allocated(), _own_device_bytes(context))
    steps(500)
    assert (context.live_objects(), _open_fds(), torch.cuda.memory_allocated(), _own_device_bytes(context)) == before
    module.close()


@pytest.mark.parametrize("encoding", [None, {"otype": "Frequency", "n_frequencies": 4}])
def test_backward_on_the_gpu_gives_what_the_pass_through_the_host_gives(torch, ct, encoding):
    """The same session's kernels either way: the GPU pass (shared buffers, gradients copied in the module's layout)
    against `backward_pass.backward` on host copies of the same tensors."""
    if encoding is None:
        module, width = ct.Network(32, 16, _network(), seed=12, **COOPVEC), 32
    else:
        module, width = ct.NetworkWithInputEncoding(3, 16, encoding, _network(), seed=12, **COOPVEC), 3
    x = torch.rand(3000, width, device="cuda", requires_grad=encoding is None)
    dy = torch.randn(3000, 16, device="cuda") * 1e-3
    module(x).backward(dy)
    assert module._backward.last.on_gpu is not None, module._backward.last.gpu_unavailable
    params = module.params
    grad, grad_x = module._backward.run(x.detach().cpu(), dy.cpu(), params, params._version, encoding is None)
    np.testing.assert_allclose(params.grad.cpu().numpy(), grad.cpu().numpy(), **FP32)
    if encoding is None:
        np.testing.assert_allclose(x.grad.cpu().numpy(), grad_x.cpu().numpy(), **FP32)
    module.close()


def test_gradients_outlive_their_module(torch, ct):
    module = ct.Network(32, 16, _network(), seed=13, **COOPVEC)
    x = torch.rand(500, 32, device="cuda", requires_grad=True)
    module(x).square().sum().backward()
    params = module.params
    want, want_x = params.grad.cpu().clone(), x.grad.cpu().clone()
    module.close()
    del module
    gc.collect()
    torch.testing.assert_close(params.grad.cpu(), want, rtol=0, atol=0)
    torch.testing.assert_close(x.grad.cpu(), want_x, rtol=0, atol=0)
    del params, x
    gc.collect()
    torch.cuda.synchronize()
