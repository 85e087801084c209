"""The numpy interpreter against numpy: the reference's runnable examples, control flow with divergent lanes,
integer semantics, casts, groups, local memory, subgroup operations and cooperative matrices."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.errors import InputError
from coopnn.tl import parse
from coopnn.tl.interp import interpret
from tests.tl.kernels import DIVISION, FIBONACCI, GROUP_SUMS, TILE_COPY, TRIANGLE


def run(text: str, *args, **kwargs):
    interpret(parse(text), *args, **kwargs)


def test_the_fibonacci_example_of_the_reference():
    out = np.zeros(2, np.int64)
    run(FIBONACCI, out)
    assert out.tolist() == [3, 5]


def test_the_foreach_tile_example_copies_with_its_remainder():
    a = np.random.default_rng(0).standard_normal((70, 64)).astype(np.float32)
    b = np.zeros_like(a)
    run(TILE_COPY, a, b)
    np.testing.assert_array_equal(a, b)


def test_the_cooperative_matrix_apply_example_masks_the_upper_triangle():
    a = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    out = np.zeros_like(a)
    run("""func @tri(%A: memref<f32x16x16>, %B: memref<f32x16x16>) {
        %c0 = constant 0 : index
        parallel {
            %0 = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f32x16x16,matrix_acc>
            %1 = cooperative_matrix_apply (%i,%j,%v)=%0 -> coopmatrix<f32x16x16,matrix_acc> {
                %mask = cmp.le %i, %j : bool
                %exp_v_masked = if %mask -> (f32) {
                    %exp_v = math.native_exp %v : f32
                    yield (%exp_v)
                } else {
                    %zero = constant 0.0 : f32
                    yield (%zero)
                }
                yield (%exp_v_masked)
            }
            cooperative_matrix_store %1, %B[%c0,%c0]
        }
    }""", a, out, subgroup_size=16)
    i, j = np.indices(a.shape)
    np.testing.assert_allclose(out, np.where(i <= j, np.exp(a), 0), rtol=1e-6)


def test_a_divergent_for_loop_runs_each_lane_its_own_trip_count():
    out = np.zeros(40, np.int32)
    run(TRIANGLE, out)
    k = np.arange(40)
    np.testing.assert_array_equal(out, k * (k - 1) // 2)


def test_integer_division_truncates_and_the_remainder_takes_the_dividends_sign():
    a = np.array([7, -7, 7, -7, 100, -3, 0, 9], np.int32)
    b = np.array([2, 2, -2, -2, 7, 5, 3, 1], np.int32)
    q, r = np.zeros(8, np.int32), np.zeros(8, np.int32)
    run(DIVISION, a, b, q, r)
    quotient, remainder = [3, -3, -3, 3, 14, 0, 0, 9], [1, -1, 1, -1, 2, -3, 0, 0]
    assert q.tolist() == quotient
    # DIVISION stores (a >> b) ^ max(quotient, remainder) in r
    assert r.tolist() == ((a >> b) ^ np.maximum(quotient, remainder)).tolist()


@pytest.mark.parametrize("source,target", [("f32", "i32"), ("i32", "f16"), ("f64", "bf16"), ("f32", "c64"),
                                           ("i16", "i8"), ("c32", "c64")])
def test_casts_round_as_numpy_does(source, target):
    from coopnn.tl.types import ScalarType

    values = (np.arange(-5, 5) * 3.7).astype(ScalarType(source).numpy)
    out = np.zeros(10, ScalarType(target).numpy)
    run(f"""func @cast(%a: memref<{source}x10>, %b: memref<{target}x10>) {{
        %c0 = constant 0 : index
        %c10 = constant 10 : index
        foreach (%i) = (%c0), (%c10) {{
            %x = load %a[%i] : {source}
            %y = cast %x : {target}
            store %y, %b[%i]
        }}
    }}""", values, out)
    np.testing.assert_array_equal(out, values.astype(out.dtype))


def test_group_arguments_load_each_memref_with_its_own_size():
    arrays = [np.arange(n, dtype=np.float32) for n in (3, 5, 2)]
    sums = np.zeros(3, np.float32)
    run(GROUP_SUMS, arrays, sums)
    assert sums.tolist() == [3, 10, 1]


def test_local_memory_and_a_subgroup_reduction():
    values = np.arange(32, dtype=np.float32)
    out = np.zeros(2, np.float32)
    run("""func @reduce(%a: memref<f32x32>, %out: memref<f32x2>) attributes {subgroup_size=16, work_group_size=[32,1]} {
        %tmp = alloca : memref<f32x32,local>
        %one = constant 1.0 : f32
        %zero = constant 0.0 : f32
        axpby %one, %a, %zero, %tmp
        parallel {
            %lane = subgroup_local_id : i32
            %sg = subgroup_linear_id : i32
            %base = mul %sg, %sg : i32
            %sixteen = constant 16 : i32
            %offset = mul %sg, %sixteen : i32
            %k = add %offset, %lane : i32
            %index = cast %k : index
            %x = load %tmp[%index] : f32
            %s = subgroup_reduce_add %x : f32
            %zero_i = constant 0 : i32
            %first = equal %lane, %zero_i : bool
            if %first {
                %slot = cast %sg : index
                store %s, %out[%slot]
            }
        }
    }""", values, out)
    assert out.tolist() == [values[:16].sum(), values[16:].sum()]


def test_subgroup_scans_and_broadcast():
    lanes = np.arange(16)
    expected = np.stack([np.cumsum(lanes), np.concatenate([[np.iinfo(np.int32).min], lanes[:-1]]), np.full(16, 5)])
    result = np.zeros((3, 16), np.int32)
    run("""func @scan(%out: memref<i32x3x16>) attributes {subgroup_size=16, work_group_size=[16,1]} {
        parallel {
            %lane = subgroup_local_id : i32
            %inc = subgroup_inclusive_scan_add %lane : i32
            %exc = subgroup_exclusive_scan_max %lane : i32
            %five = constant 5 : i32
            %b = subgroup_broadcast %lane, %five : i32
            %j = cast %lane : index
            %r0 = constant 0 : index
            %r1 = constant 1 : index
            %r2 = constant 2 : index
            store %inc, %out[%r0, %j]
            store %exc, %out[%r1, %j]
            store %b, %out[%r2, %j]
        }
    }""", result)
    np.testing.assert_array_equal(result, expected)


def test_out_of_bounds_indices_name_the_instruction():
    with pytest.raises(InputError, match=r"^4\.\d+-\d+: index 8 is out of bounds for mode 0"):
        run("""func @oob(%a: memref<f32x8>) {
            %c8 = constant 8 : index
            %x = constant 1.0 : f32
            parallel { store %x, %a[%c8] }
        }""", np.zeros(8, np.float32))
