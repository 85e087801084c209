"""The instruction table: every target lowers every instruction (and spirv-val accepts a kernel using them all), the
type rules refuse misuse, the interpreter runs every instruction by its numpy meaning, and the derivatives of the
unary float instructions match central differences of their numpy meaning."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from coopnn.backends import target
from coopnn.backends.coopvec import target as coopvec_target
from coopnn.backends.coopvec.layouts import pack_plan, padded
from coopnn.backends.coopvec.outer_product import with_accumulators
from coopnn.backends.portable import target as portable_target
from coopnn.graph.encodings.registry import from_config
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.formats.fp32 import FORMAT as FP32
from coopnn.layouts.pack import Entry
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.eager import NumpyKernel
from coopnn.shaders.kernel.interpret import run_program
from coopnn.shaders.kernel import ops
from coopnn.shaders.kernel.ops import KERNEL_OPS
from coopnn.shaders.kernel.printer import print_program
from coopnn.shaders.kernel.program import VecType
from tests.backends.portable.test_target import spirv_val



def _maps_floats_to_floats(op) -> bool:
    try:
        return op.result_type([VecType("f32", 2)], {}, None) == VecType("f32", 2)
    except ValueError:
        return False


UNARY_FLOAT = {name for name, op in KERNEL_OPS.items()
               if op.elementwise and op.operands == ("value",) and _maps_floats_to_floats(op)}
WEIGHT = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 8
BIAS = np.array([0.5, -0.25, 1.0], np.float32)
SCALE = 3.0
README = Path(ops.__file__).with_name("README.md")
IDENTITY = from_config({"otype": "Identity", "scale": 2.0, "offset": -1.0}, 4)
GRID = from_config({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 2, "base_resolution": 2}, 2)


def every_instruction(accumulate: bool = True, scatter: bool = False) -> KernelBuilder:
    """A training-shaped kernel using every instruction of the table, with its results stored as outputs (the
    weight-gradient accumulations, which only the coopvec target lowers, unless `accumulate` is false; a grid's
    gradient accumulation, which only the portable target lowers, with `scatter`)."""
    k = KernelBuilder("every_instruction")
    k.add_param("x", "input", (4,), "x")
    k.add_param("tape", "tape", (8,))
    k.add_param("loss", "loss", (1,))
    k.add_param("state", "state", (4,))  # where `uniform %loss_scale` reads from
    x = k.emit("load", None, ("x",))
    w, b = k.own_param("w", WEIGHT, "matrix"), k.own_param("b", BIAS, "vector")
    h = k.emit("gemv", None, (w, x, b), transpose=False)
    back = k.emit("gemv", None, (w, h), transpose=True)
    c = k.emit("load", None, (k.constant_param(np.array([0.5, -1.5, 2.0, 3.0], np.float32), "vector", "c"),))
    results = [h, back]
    results += [k.binary(op, back, c) for op in ("add", "sub", "mul", "div", "max", "min", "pow")]
    results += [k.unary(op, x) for op in sorted(UNARY_FLOAT)]
    lt, ge = k.compare("cmp.lt", x, c), k.compare("cmp.ge", x, c)
    flags = [k.compare(op, x, c) for op in ("cmp.le", "cmp.gt", "cmp.eq")] + [lt, ge]
    flags += [k.binary(op, lt, ge) for op in ("and", "or", "xor")] + [k.unary("not", lt)]
    flags.append(k.emit("cast", VecType("bool", 4), (back,)))
    results += [k.emit("cast", VecType("f32", 4), (f,)) for f in flags]
    results.append(k.select(lt, x, c))
    results.append(k.gather([x, c], [(1, 3), (0, 0), (0, 1)]))
    results += [k.reduce(op, back, 2) for op in ("reduce_sum", "reduce_max")]
    results.append(k.emit("uniform", VecType("f32", 2), name="loss_scale"))
    results.append(k.emit("sample_mask", VecType("f32", 2)))
    results.append(k.splat(-2.0, 3))
    results.append(k.emit("encode", None, (x,), encoding=IDENTITY))
    table = k.constant_param(np.arange(GRID.n_parameters, dtype=np.float32) / 64, "vector", "e")
    point = k.gather([x], [(0, 0), (0, 1)])
    results.append(k.emit("encode", None, (point, table), encoding=GRID))
    if scatter:
        k.emit("accumulate_encoding", None, (point, back, k.add_param("gt", "table_gradient",
                                                                      (GRID.n_parameters + 3,)).name),
               encoding=GRID, start=3)
    k.emit("store", None, (x, "tape"), start=0, width=4, layout="samples")
    k.emit("store", None, (h, "tape"), start=4, width=4, layout="features")
    k.emit("store", None, (k.reduce("reduce_sum", back, 4), "loss"))
    if accumulate:
        k.emit("accumulate_outer", None, (h, x, k.add_param("gw", "gradient", WEIGHT.shape).name))
        k.emit("accumulate_sum", None, (h, k.add_param("gb", "gradient", BIAS.shape).name))
    for i, r in enumerate(results):
        k.emit("store", None, (r, k.add_param(f"out{i}", "output", (k.type_of(r).size,), f"out{i}").name))
    return k


def test_every_target_lowers_every_instruction():
    assert set(portable_target.LOWERINGS) == set(KERNEL_OPS)
    assert set(coopvec_target.LOWERINGS) == set(KERNEL_OPS)


def test_the_readme_names_every_instruction():
    words = set(re.findall(r"[a-z_.]+", README.read_text()))
    assert set(KERNEL_OPS) <= words, set(KERNEL_OPS) - words


def test_the_test_kernel_uses_every_instruction():
    assert {i.op for i in every_instruction(scatter=True).body} == set(KERNEL_OPS)


def test_a_kernel_of_every_instruction_passes_spirv_val(tmp_path):
    program = every_instruction().build()
    spirv_val(target("portable").compile(every_instruction(accumulate=False, scatter=True).build(), FP32).spirv,
              tmp_path)
    packed = pack_plan(coopvec_target.weight_plan(program, FP16), "training_optimal", lambda m: bytes(2 * m.nbytes))
    accumulators = {name: Entry(name, len(packed.data) + 64 * i, 64, tuple(padded(n) for n in shape),
                                "training_optimal" if len(shape) == 2 else "vector", "fp16")
                    for i, (name, shape) in enumerate((("gw", WEIGHT.shape), ("gb", BIAS.shape)))}
    packed = with_accumulators(packed, accumulators)
    spirv_val(target("coopvec").compile(program, FP16, packed=packed).spirv, tmp_path)


def test_the_printer_writes_every_instruction():
    text = print_program(every_instruction().build())
    for line in ("gemv.n %w, %0, %b", "gemv.t %w, %1", "gather %3[3], %0[0:2]", "reduce_max %2 {group=2}",
                 "uniform %loss_scale", "constant -2.0", "store %0, %tape[0:+4, %i] {layout=samples}",
                 "load %x[:, %i]", "load %c2[]", "cmp.le %0, %3"):
        assert line in text, line


def test_the_interpreter_runs_every_instruction():
    program = every_instruction().build()
    x = np.array([[1.0, -2.0, 2.0, 0.0], [-0.5, 4.0, 1e-3, 3.0]], np.float32)
    out = run_program(program, {"x": x}, {"loss_scale": SCALE})
    h = x @ WEIGHT.T + BIAS
    np.testing.assert_array_equal(out["out0"], h)
    np.testing.assert_array_equal(out["out1"], h @ WEIGHT)
    op_of = {i.result: i.op for i in program.body}
    by_op = {op_of[i.args[0]]: out[i.args[1]] for i in program.body if i.op == "store" and i.args[1] in out}
    assert (by_op["uniform"] == SCALE).all() and (by_op["sample_mask"] == 1).all()
    np.testing.assert_array_equal(by_op["gather"], np.stack([np.full(2, 3.0), x[:, 0], x[:, 1]], axis=1))
    np.testing.assert_array_equal(by_op["reduce_max"], (h @ WEIGHT).reshape(2, 2, 2).max(axis=2))
    encoded = [out[i.args[1]] for i in program.body if i.op == "store" and op_of.get(i.args[0]) == "encode"]
    table = next(program.constants[i.args[1]] for i in program.body if i.op == "encode" and len(i.args) > 1)
    np.testing.assert_array_equal(encoded[0], x * 2 - 1)
    np.testing.assert_array_equal(encoded[1], GRID.forward(x[:, :2], table))


def test_the_numpy_meaning_of_accumulate_encoding_is_the_grids_backward_from_its_start():
    program = every_instruction(scatter=True).build()
    instr = next(i for i in program.body if i.op == "accumulate_encoding")
    x = np.array([[0.25, 0.75], [0.5, 0.125]], np.float32)
    delta = np.array([[1.0, -2.0, 0.5, 3.0], [0.25, 1.0, -1.0, 2.0]], np.float32)
    summed = KERNEL_OPS["accumulate_encoding"].numpy(instr, [x, delta, None], None)
    expected = np.zeros(GRID.n_parameters + 3, np.float32)
    expected[3:] = GRID.backward(x, np.zeros(GRID.n_parameters, np.float32), delta, input_gradient=False)[0]
    np.testing.assert_array_equal(summed, expected)


@pytest.mark.parametrize("stated, args, attrs, message", [
    ("add", ("a", "b3"), {}, "one coopvector<f32xN>"),
    ("and", ("a", "a"), {}, "one coopvector<boolxN>"),
    ("cmp.lt", ("a", "flag"), {}, "compares two coopvector<f32xN>"),
    ("select", ("a", "a", "a"), {}, "boolean condition"),
    ("reduce_sum", ("b3",), {"group": 2}, "in groups of 2"),
    ("gather", ("a", "flag"), {"index": ((0, 0), (1, 0))}, "one component type"),
    ("gather", ("a",), {"index": ((0, 2),)}, "outside its sources"),
    ("exp", ("a", "a"), {}, "does not take 2 operands"),
    ("fma", ("a",), {}, "unknown kernel instruction"),
])
def test_type_rules_refuse_misuse(stated, args, attrs, message):
    k = KernelBuilder("misuse")
    k.add_param("x", "input", (2,), "x")
    k.add_param("y", "input", (3,), "y")
    values = {"a": k.emit("load", None, ("x",)), "b3": k.emit("load", None, ("y",))}
    values["flag"] = k.compare("cmp.gt", values["a"], values["a"])
    with pytest.raises(ValueError, match=message):
        k.emit(stated, None, [values[a] for a in args], **attrs)


def test_a_stated_type_must_agree_with_the_rule():
    k = KernelBuilder("stated")
    k.add_param("x", "input", (2,), "x")
    with pytest.raises(ValueError, match="gives coopvector<f32x2>, not the stated coopvector<f32x3>"):
        k.emit("load", VecType("f32", 3), ("x",))
    with pytest.raises(ValueError, match="needs a stated type"):
        k.emit("constant", None, value=1.0)


def test_only_the_step_functions_have_no_derivative():
    assert {name for name in UNARY_FLOAT if KERNEL_OPS[name].derivative is None} == {"floor", "ceil", "sign", "positive"}
    assert all(op.derivative is None for name, op in KERNEL_OPS.items() if name not in UNARY_FLOAT)


@pytest.mark.parametrize("name", sorted(n for n in UNARY_FLOAT if KERNEL_OPS[n].derivative is not None))
def test_instruction_derivatives_match_central_differences(name):
    x = np.array([-2.7, -1.1, -0.3, 0.2, 0.9, 1.6, 3.1])
    if name in ("log", "sqrt"):
        x = np.abs(x)
    f = KERNEL_OPS[name].numpy
    step = 1e-6
    numeric = (f(x + step) - f(x - step)) / (2 * step)
    analytic = np.broadcast_to(KERNEL_OPS[name].derivative(NumpyKernel(np.float64), x, f(x)), x.shape)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)
