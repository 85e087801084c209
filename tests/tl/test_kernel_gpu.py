"""Tensor-language kernels on a GPU (the H200 in the coordinator's runs): larger collectives than lavapipe runs,
atomic collectives from many work-groups into one output, and the examples at the GPU's subgroup size."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from coopnn.tl import compile, interpret, parse
from tests.tl.kernels import EXAMPLES

pytestmark = pytest.mark.gpu


@functools.cache
def _gpu_skip_reason() -> str | None:
    from tests.devices import vulkan_skip_reason

    reason = vulkan_skip_reason()
    if reason:
        return reason
    from coopnn.runtime.vk.shared import chosen_device

    device = chosen_device(None)
    return None if device.device_type != "cpu" else f"the chosen Vulkan device ({device.name}) is a CPU device"


@pytest.fixture(autouse=True)
def gpu():
    reason = _gpu_skip_reason()
    if reason:
        pytest.skip(reason)


GEMM = """func @gemm(%alpha: f32, %A: memref<f32x?x?>, %B: memref<f32x?x?>, %beta: f32, %C: memref<f32x?x?>)
        attributes {work_group_size=[256,1]} {
    gemm %alpha, %A, %B, %beta, %C
}"""

ATOMIC_SLICES = """func @slices(%A: memref<f32x?x?x?>, %B: memref<f32x?x?>, %C: memref<f32x?x?>) {
    %k = group_id.x : index
    %one = constant 1.0 : f32
    %rows = size %A[0] : index
    %columns = size %A[1] : index
    %slice = subview %A[0:%rows, 0:%columns, %k] : memref<f32x?x?,strided<1,?>>
    gemm.atomic %one, %slice, %B, %one, %C
}"""


def test_a_large_gemm_matches_numpy():
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((300, 200)).astype(np.float32))
    b = np.asfortranarray(rng.standard_normal((200, 130)).astype(np.float32))
    c = np.asfortranarray(rng.standard_normal((300, 130)).astype(np.float32))
    expected = 1.5 * (a.astype(np.float64) @ b) + 0.5 * c
    compile(GEMM)(np.float32(1.5), a, b, np.float32(0.5), c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


def test_atomic_gemms_from_many_work_groups_add_up():
    rng = np.random.default_rng(1)
    slices = np.asfortranarray(np.round(rng.standard_normal((32, 16, 64)) * 4).astype(np.float32))
    b = np.asfortranarray(np.round(rng.standard_normal((16, 8)) * 4).astype(np.float32))
    c = np.zeros((32, 8), np.float32, order="F")
    compile(ATOMIC_SLICES)(slices, b, c, groups=(64, 1, 1))
    np.testing.assert_array_equal(c, np.einsum("ijk,jl->il", slices.astype(np.float64), b).astype(np.float32))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_each_example_runs_at_the_gpus_subgroup_size(example):
    kernel = compile(example.text)
    arguments = example.arguments()
    expected = tuple([a.copy() for a in x] if isinstance(x, list) else x.copy(order="K") for x in arguments)
    interpret(parse(example.text), *expected, groups=example.groups,
              subgroup_size=kernel.compiled.launch.subgroup_size)
    kernel(*arguments, groups=example.groups)
    for got, wanted in zip(arguments, expected):
        for a, b in (zip(got, wanted) if isinstance(got, list) else [(got, wanted)]):
            np.testing.assert_allclose(np.asarray(a, np.complex128 if a.dtype.kind == "c" else np.float64),
                                       np.asarray(b, np.complex128 if b.dtype.kind == "c" else np.float64),
                                       rtol=2e-3 if a.dtype.itemsize <= 2 else 1e-5, atol=1e-5)


HALF_GEMM = """func @half(%alpha: f16, %A: memref<f16x128x64>, %B: memref<f16x64x96>, %beta: f32,
                  %C: memref<f32x128x96>) attributes {work_group_size=[128,1]} {
    gemm %alpha, %A, %B, %beta, %C
}"""


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_a_float16_gemm_runs_on_cooperative_matrices_where_the_device_offers_them(beta):
    from coopnn.runtime.vk.shared import chosen_device
    from coopnn.tl.kernel import matrix_shapes

    offered = [s for s in matrix_shapes(chosen_device(None)) if (s.a, s.b, s.c) == ("f16", "f16", "f32")
               and 128 % s.m == 0 and 96 % s.n == 0 and 64 % s.k == 0]
    rng = np.random.default_rng(2)
    a = np.asfortranarray(rng.standard_normal((128, 64)).astype(np.float16))
    b = np.asfortranarray(rng.standard_normal((64, 96)).astype(np.float16))
    c = np.asfortranarray(rng.standard_normal((128, 96)).astype(np.float32))
    expected = 0.75 * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c
    kernel = compile(HALF_GEMM)
    kernel(np.float16(0.75), a, b, np.float32(beta), c)
    assert bool(kernel.compiled.extensions) == bool(offered)
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=2.5e-3)
