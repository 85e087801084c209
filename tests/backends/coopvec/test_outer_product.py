"""The outer-product weight-gradient methods without a GPU: the step program they compile (accumulations, no tape
stores), the accumulators' places, spirv-val on the step kernels of both methods and on the widening kernel, the
portable target's refusal, and the instructions' numpy meaning."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.backends.coopvec import outer_product
from coopnn.backends.coopvec.gradient_methods import gradient_methods
from coopnn.backends.coopvec.outer_product import OUTER_PRODUCT_WIDEST
from coopnn.backends.coopvec.layouts import pack_plan, padded
from coopnn.backends.coopvec.products import weight_plan
from coopnn.backends.coopvec.target import CoopvecTarget
from coopnn.backends.portable.target import PortableTarget
from coopnn.errors import CompileError
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.interpret import run_program
from coopnn.backends.coopvec.table_atomics.float16_pairs import COPIES
from coopnn.shaders.training.gradients import WIDEN_LANES, widen_shader
from coopnn.shaders.training.layout import ParameterLayout, TapeLayout
from coopnn.train.gpu.plan import plan_training
from coopnn.train.gpu.step_program import gradient_name, step_program
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.backends.portable.test_target import spirv_val


def _setup(activation="relu", loss="l2"):
    plan = plan_training(mlp_graph(3, [40, 24], 5, activation=activation, encoding="frequency", octaves=2))
    layout = ParameterLayout.of([(p.weight, p.bias, padded(p.rows), padded(p.cols)) for p in plan.layers])
    return plan, layout, step_program(plan, get_loss(loss), TapeLayout(()), accumulate=True)


# method -> the layout of its accumulators
ACCUMULATOR_LAYOUTS = {name: m.layout for name, m in gradient_methods().items() if m.accumulates}


def _fake_optimal_size(rows, cols):
    return 2 * rows * cols + 96  # any size: the driver's answer is only known on a device


def _image(program, layout, method):
    packed = pack_plan(weight_plan(program, FP16), "training_optimal", lambda m: bytes(2 * m.nbytes))
    entries = outer_product.accumulators(layout, ACCUMULATOR_LAYOUTS[method], len(packed.data),
                                         _fake_optimal_size)
    return outer_product.with_accumulators(packed, entries), entries


def test_the_accumulating_step_program_stores_nothing_on_the_tape():
    plan, _, program = _setup()
    ops = [i.op for i in program.body]
    assert not [i for i in program.body if i.op == "store" and i.args[1] == "tape"]
    assert ops.count("accumulate_outer") == ops.count("accumulate_sum") == len(plan.layers)
    gradients = {p.name: p.shape for p in program.params_of("gradient")}
    for layer in plan.layers:
        assert gradients[gradient_name(layer.weight)] == (layer.rows, layer.cols)
        assert gradients[gradient_name(layer.bias)] == (layer.rows,)


def test_accumulators_follow_the_weights_aligned():
    _, layout, program = _setup()
    for method, kind in ACCUMULATOR_LAYOUTS.items():
        image, entries = _image(program, layout, method)
        weights_end = max(e.offset + e.size for n, e in image.entries.items() if n not in entries)
        first, size = outer_product.accumulator_range(entries)
        assert first >= weights_end and first % MATRIX_ALIGNMENT == 0 and size % 4 == 0
        assert len(image.data) >= first + size
        for name, e in entries.items():
            assert e.offset % (MATRIX_ALIGNMENT if e.layout == kind and kind != "row_major" else VECTOR_ALIGNMENT) == 0
        if kind == "row_major":  # the flat parameter order, so the widening reads them where they are
            flat = layout.entries(FP16)
            assert {n: e.offset - first for n, e in outer_product.by_parameter(entries, layout).items()} == \
                {n: e.offset for n, e in flat.items()}


@pytest.mark.parametrize("method", sorted(ACCUMULATOR_LAYOUTS))
@pytest.mark.parametrize("activation, loss", [("relu", "l2"), ("tanh", "huber"), ("silu", "l1"),
                                              ("sigmoid", "bce_with_logits")])
def test_accumulating_step_kernels_pass_spirv_val(method, activation, loss, tmp_path):
    _, layout, program = _setup(activation, loss)
    image, _ = _image(program, layout, method)
    binary = CoopvecTarget().compile(program, FP16, 64, packed=image)
    spirv_val(binary.spirv, tmp_path)


def test_the_widening_kernel_passes_spirv_val(tmp_path):
    for copies in (1, COPIES):
        for lanes in WIDEN_LANES:
            spirv_val(widen_shader(copies, lanes).spirv, tmp_path)


def test_the_portable_target_refuses_accumulation():
    _, _, program = _setup()
    with pytest.raises(CompileError, match="outer-product method"):
        PortableTarget().compile(program, FP32, 64)


def test_accumulations_mean_sums_over_samples():
    k = KernelBuilder("accumulate")
    k.add_param("x", "input", (3,), "x")
    k.add_param("d", "input", (2,), "d")
    x, d = k.emit("load", None, ("x",)), k.emit("load", None, ("d",))
    k.emit("accumulate_outer", None, (d, x, k.add_param("gw", "gradient", (2, 3)).name))
    k.emit("accumulate_sum", None, (d, k.add_param("gb", "gradient", (2,)).name))
    with pytest.raises(ValueError, match="accumulates"):
        k.emit("accumulate_outer", None, (x, d, "gw"))
    program = k.build()
    rng = np.random.default_rng(0)
    xs, ds = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)
    from coopnn.shaders.kernel.interpret import _step  # noqa: F401  (run_program returns outputs only)
    assert run_program(program, {"x": xs, "d": ds}) == {}
    from coopnn.shaders.kernel.ops import KERNEL_OPS, Batch
    batch = Batch(5, {})
    outer, total = (i for i in program.body if i.op.startswith("accumulate"))
    np.testing.assert_allclose(KERNEL_OPS["accumulate_outer"].numpy(outer, [ds, xs, None], batch), ds.T @ xs,
                               rtol=1e-6)
    np.testing.assert_allclose(KERNEL_OPS["accumulate_sum"].numpy(total, [ds, None], batch), ds.sum(axis=0),
                               rtol=1e-6)


@pytest.mark.parametrize("method", ["outer_product", "outer_product_reduced"])
def test_layers_wider_than_the_measured_limit_are_refused_before_any_device_work(method):
    from coopnn.backends.coopvec.training import CoopvecTrainingSession

    graph = mlp_graph(3, [OUTER_PRODUCT_WIDEST + 8], 3)
    with pytest.raises(CompileError, match=f"up to {OUTER_PRODUCT_WIDEST} inputs and outputs, this model has 72"):
        CoopvecTrainingSession(graph, get_loss("l2"), Adam(), None, gradients=method)
