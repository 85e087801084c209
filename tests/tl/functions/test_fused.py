"""Model functions fused into the model kernels: spirv-val on the portable and coopvec modules (built here), the
portable backend on lavapipe against the numpy oracle for inference and training steps at fp32 tolerances, and the
coopvec backend on a GPU against the float16 reference and the numpy oracle's gradients."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn import tl
from coopnn.backends import target
from coopnn.backends.numpy.training import NumpyTrainingSession
from coopnn.compiler import compile_graph
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.nets.builders import mlp_graph
from coopnn.train.optim import Adam
from tests.backends.portable.test_target import spirv_val
from tests.tl.functions import examples

RTOL, ATOL = 1e-4, 1e-5
MODELS = {
    "softplus-rule": dict(activation=tl.activation(examples.SOFTPLUS, derivative="logistic")),
    "wave": dict(activation=tl.activation(examples.WAVE)),
    "features": dict(encoding=tl.encoding(examples.FEATURES), activation="tanh"),
    "features-wave": dict(encoding=tl.encoding(examples.FEATURES), activation=tl.activation(examples.WAVE)),
}
LOSSES = {"log_cosh": lambda: tl.loss(examples.LOG_COSH),
          "softplus-rule": lambda: tl.loss(examples.SOFTPLUS_LOSS, derivative="logistic_difference")}


def _graph(name: str, seed: int = 3):
    return mlp_graph(2, [16, 12], 3, seed=seed, **MODELS[name])


def _data(n: int = 77, seed: int = 1):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, 2)).astype(np.float32), rng.uniform(0, 1, (n, 3)).astype(np.float32)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("target_name", ["portable", "coopvec"])
def test_fused_inference_modules_pass_spirv_val(name, target_name, tmp_path):
    program = compile_graph(_graph(name), target_name=target_name)
    spirv_val(program.binary.spirv, tmp_path)


def test_the_function_body_is_inline_in_the_kernel():
    """No call and no second dispatch: the activation's exp and log are instructions of the one entry point."""
    text = compile_graph(_graph("softplus-rule"), target_name="portable").spvasm()
    assert "OpFunctionCall" not in text and text.count("OpEntryPoint") == 1
    assert "Exp" in text and "Log" in text


@pytest.mark.vulkan
@pytest.mark.parametrize("name", MODELS)
def test_portable_inference_matches_numpy(validated_device, name):
    x, _ = _data(333)
    with coopnn.mlp(2, [16, 12], 3, backend="portable", seed=3, **MODELS[name]) as device, \
            coopnn.mlp(2, [16, 12], 3, backend="numpy", seed=3, **MODELS[name]) as oracle:
        np.testing.assert_allclose(device(x), oracle(x), rtol=RTOL, atol=ATOL)


# rem, not_equal, and/or/xor/not, a bool constant and an if yielding a bool: the lowerings no model above takes (the
# kernel's a - b trunc(a / b) and the interpreter's fmod differ only within rounding of a multiple, which these inputs
# are not near)
_LOGIC_BODY = """    %zero = constant 0.0 : f32
    %period = constant 2.5 : f32
    %yes = constant true : bool
    %r = rem {x}, %period : f32
    %s = sin {x} : f32
    %positive = greater_than {x}, %zero : bool
    %nonzero = not_equal %s, %zero : bool
    %both = and %positive, %nonzero : bool
    %any = or %both, %yes : bool
    %below = xor %any, %positive : bool
    %above = not %below : bool
    %v, %keep = if %above -> (f32, bool) {{
        %e = native_exp2 %s : f32
        yield (%e, %nonzero)
    }} else {{
        %a = abs {x} : f32
        %l = log2 %a : f32
        yield (%l, %below)
    }}
    %u = if %keep -> (f32) {{ yield (%v) }} else {{ yield (%s) }}
    %y = add %u, %r : f32
"""
LOGIC = f"func @logic(%x: f32) -> (f32) {{\n{_LOGIC_BODY.format(x='%x')}    yield (%y)\n}}\n"
LOGIC_FEATURES = (f"func @logic_features(%x: f32, %t: f32) -> (f32, f32) {{\n{_LOGIC_BODY.format(x='%x')}"
                  f"    %w = mul %y, %t : f32\n    yield (%y, %w)\n}}\n")


LOGIC_MODELS = {"activation": dict(activation=tl.activation(LOGIC)),
                "encoding": dict(encoding=tl.encoding(LOGIC_FEATURES), activation="tanh")}


@pytest.mark.parametrize("name", LOGIC_MODELS)
@pytest.mark.parametrize("target_name", ["portable", "coopvec"])
def test_the_logic_and_remainder_modules_pass_spirv_val(name, target_name, tmp_path):
    program = compile_graph(mlp_graph(2, [16], 3, seed=3, **LOGIC_MODELS[name]), target_name=target_name)
    spirv_val(program.binary.spirv, tmp_path)


@pytest.mark.vulkan
@pytest.mark.parametrize("name", LOGIC_MODELS)
def test_portable_lowers_the_logic_and_remainder_instructions(validated_device, name):
    model = LOGIC_MODELS[name]
    x = np.random.default_rng(4).uniform(-12, 12, (501, 2)).astype(np.float32)  # rem wraps several times
    with coopnn.mlp(2, [16], 3, backend="portable", seed=3, **model) as device, \
            coopnn.mlp(2, [16], 3, backend="numpy", seed=3, **model) as oracle:
        np.testing.assert_allclose(device(x), oracle(x), rtol=RTOL, atol=ATOL)


@pytest.mark.vulkan
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("name", ["softplus-rule", "features-wave"])
def test_portable_training_steps_match_numpy(validated_device, name, loss):
    from coopnn.backends.portable.training import PortableTrainingSession

    graph = _graph(name)
    x, y = _data()
    feeds, targets = {"x": x}, {"y": y}
    oracle = NumpyTrainingSession(graph, LOSSES[loss](), Adam(lr=1e-2))
    device = PortableTrainingSession(graph, LOSSES[loss](), Adam(lr=1e-2), None)
    try:
        expected_loss, expected = oracle.loss_and_gradients(feeds, targets)
        assert device.loss(feeds, targets) == pytest.approx(expected_loss, rel=1e-5)
        gradients = device.gradients(feeds, targets)
        for parameter, gradient in expected.items():
            np.testing.assert_allclose(gradients[parameter], gradient, rtol=RTOL, atol=1e-7, err_msg=parameter)
        for _ in range(3):
            assert device.step(feeds, targets) == pytest.approx(oracle.step(feeds, targets), rel=1e-5)
        after = device.parameters()
        for parameter, value in oracle.parameters().items():
            np.testing.assert_allclose(after[parameter], value, rtol=RTOL, atol=1e-6, err_msg=parameter)
        assert device.context.debug_messages == []
    finally:
        device.close()


@pytest.mark.vulkan
def test_portable_step_kernel_with_a_tl_loss_passes_spirv_val(tmp_path):
    from coopnn.backends.portable.training import flat_manifest
    from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
    from coopnn.train.gpu.plan import plan_training
    from coopnn.train.gpu.step_program import step_program

    plan = plan_training(_graph("features-wave"))
    layout = ParameterLayout.of([(p.weight, p.bias, p.rows, p.cols) for p in plan.layers])
    program = step_program(plan, LOSSES["log_cosh"](), TapeLayout(layout.layers, "features"))
    binary = target("portable").compile(program, FP32, 64,
                                        packed=flat_manifest(program, layout))
    spirv_val(binary.spirv, tmp_path)


# ----- on the GPU (VK_NV_cooperative_vector) -----------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", MODELS)
def test_coopvec_inference_matches_the_float16_reference(coopvec_device, name):
    from coopnn.layouts.formats.emulation import run_fp16_emulation
    from tests.shaders.targets.encoding_cases import fp16_reference

    x, _ = _data(4096)
    with coopnn.mlp(2, [16, 12], 3, backend="coopvec", weights="fp16", seed=3, **MODELS[name]) as model:
        graph = model.graph
        # the float16 kernels' arithmetic on float16-rounded weights and inputs: the encoding in float32 first
        want = (fp16_reference(graph, x) if "encoding" in MODELS[name]
                else run_fp16_emulation(graph, {"x": x})[graph.outputs[0].name])
        np.testing.assert_allclose(model(x), want, rtol=1e-3, atol=2.5e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("step", ["coopvec", "tiled"])
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("name", ["softplus-rule", "features-wave"])
def test_coopvec_training_matches_the_numpy_oracle(coopvec_device, name, loss, step):
    from coopnn.backends.coopvec.training import CoopvecTrainingSession
    from coopnn.layouts.formats.fp16 import round_fp16
    from tests.backends.coopvec.oracle import assert_matches_the_oracle, rounded

    graph = rounded(_graph(name))
    x, y = (round_fp16(a) for a in _data(512))
    session = CoopvecTrainingSession(graph, LOSSES[loss](), Adam(lr=1e-3), None, step=step)
    try:
        assert_matches_the_oracle(session, NumpyTrainingSession(graph, LOSSES[loss](), Adam(lr=1e-3)),
                                  {"x": x}, {"y": y})
    finally:
        session.close()
