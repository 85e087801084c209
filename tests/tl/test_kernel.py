"""Compiled kernels run on a Vulkan device (lavapipe in CI, the validation layer on) and agree with the numpy
interpreter: every example and the collectives over shapes, strides, dynamic sizes and types."""

from __future__ import annotations

import numpy as np
import pytest

import coopnn
from coopnn.errors import CompileError, InputError
from coopnn.tl import compile, interpret, parse
from tests.tl.collective_cases import cases, tolerance
from tests.tl.kernels import EXAMPLES

pytestmark = pytest.mark.vulkan

COLLECTIVES = [c for c in cases(dtypes=("f32", "f64", "i32", "c32", "f16", "bf16"), seed=1)
               if c.dtype in ("f32", "i32") or "-dyn-strided" in c.name]


@pytest.fixture(autouse=True)
def validated(validated_device):
    """Every test here runs on the device with the validation layer on."""


def _copies(arguments):
    return tuple([a.copy(order="K") for a in x] if isinstance(x, list) else
                 x.copy(order="K") if isinstance(x, np.ndarray) else x for x in arguments)


def _assert_same(got, expected, dtype=None):
    for g, e in zip(got, expected):
        for a, b in (zip(g, e) if isinstance(g, list) else [(g, e)]):
            if not isinstance(a, np.ndarray):
                continue
            if a.dtype.kind in "fc":
                np.testing.assert_allclose(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                                           b.astype(np.complex128 if b.dtype.kind == "c" else np.float64),
                                           rtol=2e-3 if a.dtype.itemsize <= 2 else 1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_each_example_runs_as_the_interpreter_says(example):
    kernel = compile(example.text)
    arguments = example.arguments()
    expected = _copies(arguments)
    interpret(parse(example.text), *expected, groups=example.groups,
              subgroup_size=kernel.compiled.launch.subgroup_size)
    kernel(*arguments, groups=example.groups)
    _assert_same(arguments, expected)


@pytest.mark.parametrize("case", COLLECTIVES, ids=[c.name for c in COLLECTIVES])
def test_each_collective_runs_as_numpy_computes_it(case):
    compile(case.text)(*case.args)
    np.testing.assert_allclose(case.output, case.expected, **tolerance(case.dtype))


def test_device_arrays_bind_where_they_lie():
    kernel = compile("""func @scale(%a: memref<f32x?>, %s: f32) {
        %c0 = constant 0 : index
        %n = size %a[0] : index
        foreach (%i) = (%c0), (%n) {
            %x = load %a[%i] : f32
            %y = mul %x, %s : f32
            store %y, %a[%i]
        }
    }""")
    values = np.arange(100, dtype=np.float32)
    on_device = coopnn.to_device(values)
    kernel(on_device, 2.0)
    np.testing.assert_array_equal(on_device.numpy(), values * 2)


def test_arguments_of_the_wrong_kind_are_input_errors():
    kernel = compile("func @f(%a: memref<f32x4>) { }")
    with pytest.raises(InputError, match=r"argument %a is memref<f32x4>; got an array of shape \[5\]"):
        kernel(np.zeros(5, np.float32))
    with pytest.raises(InputError, match=r"holds f32"):
        kernel(np.zeros(4, np.float64))
    with pytest.raises(InputError, match="takes 1 arguments"):
        kernel()


def test_launches_past_the_devices_limits_are_refused():
    with pytest.raises(CompileError, match="more than"):
        compile("func @f() attributes {work_group_size=[4096,1]} { }")
    kernel = compile("func @f() { }")
    with pytest.raises(InputError, match="more than the device dispatches"):
        kernel(groups=(2 ** 32, 1, 1))
