"""Complete tensor-language functions that exercise the language beyond the collectives, with arguments to run them
on: shared by the SPIR-V validation tests and the runs compared with the interpreter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Example:
    name: str
    text: str
    arguments: Callable[[], tuple]  # fresh arguments (the kernel writes into its arrays)
    groups: tuple[int, int, int] = (1, 1, 1)


def _rng(seed=0):
    return np.random.default_rng(seed)


FIBONACCI = """func @fib(%out: memref<i64x2>) {
    %from = constant 2 : i32
    %to = constant 6 : i32
    %f0 = constant 0 : i64
    %f1 = constant 1 : i64
    %fn_1, %fn = for %n=%from,%to init(%fn_2=%f0,%fn_1=%f1) -> (i64,i64) {
        %fn = add %fn_2, %fn_1 : i64
        yield (%fn_1, %fn)
    }
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    parallel {
        %lane = subgroup_linear_id : i32
        %local = subgroup_local_id : i32
        %sum = add %lane, %local : i32
        %zero = constant 0 : i32
        %first = equal %sum, %zero : bool
        if %first {
            store %fn_1, %out[%c0]
            store %fn, %out[%c1]
        }
    }
}"""

TRIANGLE = """func @triangle(%out: memref<i32x?>) {
    %c0 = constant 0 : index
    %n = size %out[0] : index
    foreach (%i) = (%c0), (%n) {
        %zero = constant 0 : i32
        %total = for %k=%c0,%i init(%acc=%zero) -> (i32) {
            %ki = cast %k : i32
            %next = add %acc, %ki : i32
            yield (%next)
        }
        store %total, %out[%i]
    }
}"""

DIVISION = """func @divide(%a: memref<i32x8>, %b: memref<i32x8>, %q: memref<i32x8>, %r: memref<i32x8>) {
    %c0 = constant 0 : index
    %c8 = constant 8 : index
    foreach (%i) = (%c0), (%c8) {
        %x = load %a[%i] : i32
        %y = load %b[%i] : i32
        %d = div %x, %y : i32
        %m = rem %x, %y : i32
        %s = shr %x, %y : i32
        %mx = max %d, %m : i32
        %t = xor %s, %mx : i32
        store %d, %q[%i]
        store %t, %r[%i]
    }
}"""

CASTS = """func @casts(%a: memref<f32x?>, %i: memref<i32x?>, %h: memref<f16x?>, %b: memref<bf16x?>, %d: memref<f64x?>,
                    %c: memref<c32x?>) {
    %c0 = constant 0 : index
    %n = size %a[0] : index
    foreach (%k) = (%c0), (%n) {
        %x = load %a[%k] : f32
        %xi = cast %x : i32
        %xh = cast %x : f16
        %xb = cast %x : bf16
        %xd = cast %x : f64
        %xc = cast %x : c32
        %two = constant 2.0 : bf16
        %xb2 = mul %xb, %two : bf16
        store %xi, %i[%k]
        store %xh, %h[%k]
        store %xb2, %b[%k]
        store %xd, %d[%k]
        store %xc, %c[%k]
    }
}"""

GROUP_SUMS = """func @sums(%g: group<memref<f32x?>x?>, %out: memref<f32x?>) {
    %c0 = constant 0 : index
    %count = size %g[0] : index
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    for %k=%c0,%count {
        %a = load %g[%k] : memref<f32x?>
        %slot = subview %out[%k:1] : memref<f32x1>
        %scalar = subview %slot[%c0] : memref<f32>
        sum %one, %a, %zero, %scalar
    }
}"""

SUBGROUPS = """func @subgroups(%a: memref<f32x64>, %out: memref<f32x4x64>) {
    %tmp = alloca : memref<f32x64,local>
    %one = constant 1.0 : f32
    %zero = constant 0.0 : f32
    axpby %one, %a, %zero, %tmp
    parallel {
        %lane = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %size = subgroup_size : i32
        %offset = mul %sg, %size : i32
        %k = add %offset, %lane : i32
        %index = cast %k : index
        %x = load %tmp[%index] : f32
        %s = subgroup_reduce_add %x : f32
        %inc = subgroup_inclusive_scan_add %x : f32
        %exc = subgroup_exclusive_scan_max %x : f32
        %three = constant 3 : i32
        %b = subgroup_broadcast %x, %three : f32
        %r0 = constant 0 : index
        %r1 = constant 1 : index
        %r2 = constant 2 : index
        %r3 = constant 3 : index
        store %s, %out[%r0, %index]
        store %inc, %out[%r1, %index]
        store %exc, %out[%r2, %index]
        store %b, %out[%r3, %index]
    }
}"""

ATOMICS = """func @atomics(%a: memref<f32x?>, %total: memref<f32>, %largest: memref<i32>, %flag: memref<i32>) {
    %c0 = constant 0 : index
    %n = size %a[0] : index
    foreach (%k) = (%c0), (%n) {
        %x = load %a[%k] : f32
        %old = atomic_add.device %x, %total[] : f32
        %xi = cast %x : i32
        %prior = atomic_max %xi, %largest[] : i32
        %seven = constant 7 : i32
        atomic_store.release %seven, %flag[]
        %seen = atomic_load.acquire %flag[] : i32
    }
}"""

MATH = """func @math(%a: memref<f32x?>, %out: memref<f32x6x?>, %z: memref<c32x?>, %zout: memref<c32x3x?>) {
    %c0 = constant 0 : index
    %n = size %a[0] : index
    foreach (%k) = (%c0), (%n) {
        %x = load %a[%k] : f32
        %s = sin %x : f32
        %c = native_cos %x : f32
        %e = exp %x : f32
        %ax = abs %x : f32
        %l = log2 %ax : f32
        %e2 = exp2 %x : f32
        %m = max %s, %c : f32
        %r0 = constant 0 : index
        %r1 = constant 1 : index
        %r2 = constant 2 : index
        %r3 = constant 3 : index
        %r4 = constant 4 : index
        %r5 = constant 5 : index
        store %s, %out[%r0, %k]
        store %c, %out[%r1, %k]
        store %e, %out[%r2, %k]
        store %l, %out[%r3, %k]
        store %e2, %out[%r4, %k]
        store %m, %out[%r5, %k]
        %w = load %z[%k] : c32
        %w2 = mul %w, %w : c32
        %wq = div %w2, %w : c32
        %we = exp %w : c32
        store %w2, %zout[%r0, %k]
        store %wq, %zout[%r1, %k]
        store %we, %zout[%r2, %k]
    }
}"""

VIEWS = """func @views(%a: memref<f32x4x6>, %out: memref<f32x?>) {
    %e = expand %a[1 -> 2x3] : memref<f32x4x2x3>
    %f = fuse %e[0,1] : memref<f32x8x3>
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %col = subview %f[%c1, 0:3] : memref<f32x3,strided<8>>
    %n = size %out[0] : index
    foreach (%k) = (%c0), (%n) {
        %x = load %col[%k] : f32
        store %x, %out[%k]
    }
}"""

GRID = """func @grid(%out: memref<i64x?x?>) {
    %c0 = constant 0 : index
    %rows = size %out[0] : index
    %columns = size %out[1] : index
    %g = group_id.x : index
    %ng = num_groups.x : index
    foreach (%i, %j) = (%c0, %g), (%rows, %columns) {
        %ten = constant 10 : index
        %ti = mul %i, %ten : index
        %v = add %ti, %j : index
        %w = cast %v : i64
        %ngw = cast %ng : i64
        %ws = mul %w, %ngw : i64
        %jj = rem %j, %ng : index
        %zero = constant 0 : index
        %mine = equal %jj, %g : bool
        if %mine {
            store %ws, %out[%i, %j]
        }
    }
}"""


TILE_COPY = """func @copy(%A: memref<f32x70x64>, %B: memref<f32x70x64>) {
    %c0 = constant 0 : index
    %c70 = constant 70 : index
    %c64 = constant 64 : index
    foreach_tile (%i,%j)=(%c0,%c0),(%c70,%c64) as (%ti,%tj)<=(32,32) {
        %c32 = constant 32 : index
        %is_remainder = less_than %ti, %c32 : bool
        if %is_remainder {
            %tile = cooperative_matrix_load.rows_checked %A[%i,%j] : coopmatrix<f32x32x32,matrix_acc>
            cooperative_matrix_store.rows_checked %tile, %B[%i,%j]
        } else {
            %tile = cooperative_matrix_load %A[%i,%j] : coopmatrix<f32x32x32,matrix_acc>
            cooperative_matrix_store %tile, %B[%i,%j]
        }
    }
}"""

MATRICES = """func @matrices(%A: memref<f16x32x8>, %B: memref<f16x8x8>, %C: memref<f32x32x8>, %T: memref<f32x8x32>,
                       %R: memref<f32x32x1>, %K: memref<f32x1x8>, %E: memref<f32x64>) {
    %c0 = constant 0 : index
    parallel {
        %a = cooperative_matrix_load %A[%c0,%c0] : coopmatrix<f16x32x8,matrix_a>
        %b = cooperative_matrix_load %B[%c0,%c0] : coopmatrix<f16x8x8,matrix_b>
        %c = cooperative_matrix_load %C[%c0,%c0] : coopmatrix<f32x32x8,matrix_acc>
        %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<f32x32x8,matrix_acc>
        %half = constant 0.5 : f32
        %s = cooperative_matrix_scale %half, %d : coopmatrix<f32x32x8,matrix_acc>
        %masked = cooperative_matrix_apply (%i,%j,%v)=%s -> coopmatrix<f32x32x8,matrix_acc> {
            %keep = less_than_equal %j, %i : bool
            %out = if %keep -> (f32) {
                yield (%v)
            } else {
                %zero = constant 0.0 : f32
                yield (%zero)
            }
            yield (%out)
        }
        %sum = add %masked, %d : coopmatrix<f32x32x8,matrix_acc>
        %rows = cooperative_matrix_reduce_add.row %sum : coopmatrix<f32x32x1,matrix_acc>
        %cols = cooperative_matrix_reduce_max.column %sum : coopmatrix<f32x1x8,matrix_acc>
        %atomic = cooperative_matrix_atomic_load.device %C[%c0,%c0] : coopmatrix<f32x32x8,matrix_acc>
        %sum2 = sub %sum, %atomic : coopmatrix<f32x32x8,matrix_acc>
        %first = cooperative_matrix_extract %sum2[1] : f32
        %two = constant 2.0 : f32
        %bigger = mul %first, %two : f32
        %changed = cooperative_matrix_insert %bigger, %sum[1] : coopmatrix<f32x32x8,matrix_acc>
        %lane = subgroup_local_id : i32
        %sg = subgroup_linear_id : i32
        %size = subgroup_size : i32
        %zero_i = constant 0 : i32
        %first_subgroup = equal %sg, %zero_i : bool
        if %first_subgroup {
            cooperative_matrix_store %changed, %C[%c0,%c0]
            cooperative_matrix_store.t %sum, %T[%c0,%c0]
            cooperative_matrix_store %rows, %R[%c0,%c0]
            cooperative_matrix_store %cols, %K[%c0,%c0]
            %slot = add %lane, %size : i32
            %k = cast %slot : index
            store %first, %E[%k]
        }
    }
}"""


def _float(n, seed=0, scale=3.0):
    return (_rng(seed).uniform(-scale, scale, n)).astype(np.float32)


EXAMPLES = [
    Example("fibonacci", FIBONACCI, lambda: (np.zeros(2, np.int64),)),
    Example("triangle", TRIANGLE, lambda: (np.zeros(70, np.int32),)),
    Example("division", DIVISION, lambda: (np.array([7, -7, 7, -7, 100, -3, 0, 9], np.int32),
                                           np.array([2, 2, -2, -2, 7, 5, 3, 1], np.int32),
                                           np.zeros(8, np.int32), np.zeros(8, np.int32))),
    Example("casts", CASTS, lambda: (_float(37, 1, 100.0), np.zeros(37, np.int32), np.zeros(37, np.float16),
                                     np.zeros(37, _bf16()), np.zeros(37, np.float64), np.zeros(37, np.complex64))),
    Example("group_sums", GROUP_SUMS, lambda: ([_float(n, n) for n in (3, 17, 2)], np.zeros(3, np.float32))),
    Example("subgroups", SUBGROUPS, lambda: (_float(64, 2), np.zeros((4, 64), np.float32))),
    Example("atomics", ATOMICS, lambda: (np.round(_float(50, 3, 20.0)), np.zeros((), np.float32),
                                         np.zeros((), np.int32), np.zeros((), np.int32))),
    Example("math", MATH, lambda: (_float(20, 4), np.zeros((6, 20), np.float32),
                                   (_float(20, 5, 1.0) + 1j * _float(20, 6, 1.0)).astype(np.complex64),
                                   np.zeros((3, 20), np.complex64))),
    Example("views", VIEWS, lambda: (np.asfortranarray(_float(24, 7).reshape(4, 6)), np.zeros(3, np.float32))),
    Example("grid", GRID, lambda: (np.zeros((5, 9), np.int64),), groups=(3, 1, 1)),
    Example("tile_copy", TILE_COPY, lambda: (np.asfortranarray(_float(70 * 64, 8).reshape(70, 64)),
                                             np.zeros((70, 64), np.float32, order="F"))),
    Example("matrices", MATRICES, lambda: (np.asfortranarray(_float(256, 9, 1.0).reshape(32, 8).astype(np.float16)),
                                           np.asfortranarray(_float(64, 10, 1.0).reshape(8, 8).astype(np.float16)),
                                           np.asfortranarray(_float(256, 11).reshape(32, 8)),
                                           np.zeros((8, 32), np.float32, order="F"),
                                           np.zeros((32, 1), np.float32, order="F"),
                                           np.zeros((1, 8), np.float32, order="F"), np.zeros(64, np.float32))),
]


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16
