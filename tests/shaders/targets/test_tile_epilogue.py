"""Epilogues of every component-wise kernel instruction through both tile targets: spirv-val accepts the per-element
functions (coopmat2) and the component loops (coopmat), and a stage's numpy meaning is the interpreter's."""

from __future__ import annotations

import numpy as np

from coopnn.backends.coopmat.target import CoopmatTarget
from coopnn.backends.coopmat2.target import Coopmat2Target
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.shaders.kernel.builder import KernelBuilder
from coopnn.shaders.kernel.interpret import run_program
from coopnn.shaders.kernel.ops import KERNEL_OPS
from coopnn.shaders.kernel.program import VecType
from coopnn.shaders.targets.tile_plan import plan_tiles
from tests.backends.portable.test_target import spirv_val

COMPONENT_WISE = sorted({name for name, op in KERNEL_OPS.items() if op.elementwise} | {"cast"})


def every_epilogue():
    """input -> Linear -> an epilogue of every component-wise instruction (summed into one value) -> Linear."""
    k = KernelBuilder("every_epilogue")
    k.add_param("x", "input", (4,), "x")
    rng = np.random.default_rng(0)
    x = k.emit("load", None, ("x",))
    h = k.emit("gemv", None, (k.own_param("w", rng.normal(size=(5, 4)), "matrix"), x,
                              k.own_param("b", rng.normal(size=5), "vector")), transpose=False)
    half = k.splat(0.5, 5)
    floats = [k.binary(op, h, half) for op in ("add", "sub", "mul", "div", "max", "min", "pow")]
    floats += [k.unary(op, h) for op in ("abs", "neg", "exp", "sin", "cos", "tanh", "floor", "ceil", "sign",
                                                "positive")]
    positive = k.binary("add", k.unary("abs", h), half)  # finite logarithms at 0: the coopmat target needs them
    floats += [k.unary(op, positive) for op in ("log", "sqrt")]
    below, above = k.compare("cmp.lt", h, half), k.compare("cmp.ge", h, half)
    flags = [k.compare(op, h, half) for op in ("cmp.le", "cmp.gt", "cmp.eq")] + [below, above]
    flags += [k.binary(op, below, above) for op in ("and", "or", "xor")] + [k.unary("not", below)]
    flags.append(k.emit("cast", VecType("bool", 5), (h,)))
    floats += [k.emit("cast", VecType("f32", 5), (f,)) for f in flags]
    floats.append(k.select(below, h, half))
    total = floats[0]
    for f in floats[1:]:
        total = k.binary("add", total, f)
    y = k.emit("gemv", None, (k.own_param("w2", rng.normal(size=(2, 5)), "matrix"), total), transpose=False)
    k.emit("store", None, (y, k.add_param("y", "output", (2,), "y").name))
    return k.build(), total


def test_the_kernel_uses_every_component_wise_instruction():
    program, _ = every_epilogue()
    assert {i.op for i in plan_tiles(program, "coopmat").stages[1].epilogue} == set(COMPONENT_WISE)


def test_both_targets_emit_it_valid(tmp_path):
    program, _ = every_epilogue()
    spirv_val(Coopmat2Target().compile(program, FP16).spirv, tmp_path)
    spirv_val(CoopmatTarget().compile(program, FP16).spirv, tmp_path)


def test_the_stage_evaluates_as_the_interpreter_runs_it():
    program, total = every_epilogue()
    stage = plan_tiles(program, "coopmat2").stages[1]
    x = np.random.default_rng(1).uniform(-2, 2, (9, 4)).astype(np.float32)
    h = x @ program.constants["w"].T + program.constants["b"]
    got = stage.evaluate(h, plan_tiles(program, "coopmat2").constants) @ program.constants["w2"].T
    np.testing.assert_allclose(got, run_program(program, {"x": x})["y"], rtol=1e-5, atol=1e-5)
    assert total == stage.result
