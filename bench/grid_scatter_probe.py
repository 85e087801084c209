"""The floor of a hash grid's lookups and gradient atomics on this GPU, apart from any network: CUDA kernels (CuPy)
that do only what a grid's forward and backward do, on tiny-cuda-nn's image configuration (levels from
`coopnn.graph.encodings.grid_levels`, so the tables, sizes and dense or hashed indices are coopnn's), with uniform
random points as a training batch draws them.

    python3 bench/grid_scatter_probe.py [--config image] [--batches 16,18,21] [--runs 50] [--out DIR]

Kernels (medians of CUDA-event times over `--runs` launches after warm-up):
  gather, a thread a sample       every level's 2^d corners read as float16 pairs, blended in float32, the F features
                                  of every level written as float16: the encoding of an inference kernel, alone
  scatter f16 pairs, a thread a sample      the backward rule: each corner's weight times the level's float16 deltas
                                  added with one float16-pair atomic (atomicAdd on __half2), levels in turn
  scatter f16 pairs, a thread a (sample, level)   the same, the levels of a sample on threads of their own
                                  (samples fastest, as tcnn launches its grid backward)
  ... dense levels in C copies    a thread a sample, each block adding the dense (coarse) levels into copy
                                  block % C of their tables: as many atomics on C times the addresses
  scatter f32, a thread a sample / a (sample, level)   the same with one float32 atomic a feature
A step kernel that scatters inside itself pays at least its variant's row; the difference between the two
arrangements says whether the levels on threads of their own (a kernel after the step) would be faster. Writes
`<device>-<date>-grid-scatter-probe.{json,md}` (default into bench/results/); prints the markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import numpy as np  # noqa: E402

from coopnn.bench.environment import describe_environment, device_name, driver  # noqa: E402
from coopnn.bench.report import write_results  # noqa: E402
from coopnn.examples.image_models import TCNN_IMAGE_CONFIG  # noqa: E402
from coopnn.graph.encodings.grid_levels import COHERENT_PRIMES, levels  # noqa: E402

SOURCE = r"""
#include <cuda_fp16.h>
struct Level { float scale; unsigned resolution, size, offset, hashed; };
__constant__ Level LEVELS[32];
#define FEATURES 2

__device__ inline unsigned vertex_index(const Level& L, unsigned x, unsigned y) {
    unsigned i = L.hashed ? (x ^ (y * PRIME1)) : (x + y * L.resolution);
    return (i % L.size + L.offset);
}

__device__ inline void corners(const Level& L, float2 p, unsigned* cell, float* w) {
    float px = fmaf(L.scale, p.x, 0.5f), py = fmaf(L.scale, p.y, 0.5f);
    float fx = floorf(px), fy = floorf(py);
    float tx = px - fx, ty = py - fy;
    unsigned cx = (unsigned)fx, cy = (unsigned)fy;
    cell[0] = vertex_index(L, cx, cy);         w[0] = (1 - tx) * (1 - ty);
    cell[1] = vertex_index(L, cx + 1, cy);     w[1] = tx * (1 - ty);
    cell[2] = vertex_index(L, cx, cy + 1);     w[2] = (1 - tx) * ty;
    cell[3] = vertex_index(L, cx + 1, cy + 1); w[3] = tx * ty;
}

extern "C" __global__ void gather(const float2* points, const __half2* table, __half2* out, int n, int n_levels) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    float2 p = points[s];
    for (int l = 0; l < n_levels; ++l) {
        unsigned cell[4]; float w[4];
        corners(LEVELS[l], p, cell, w);
        float2 acc = make_float2(0.f, 0.f);
        for (int c = 0; c < 4; ++c) {
            float2 v = __half22float2(table[cell[c]]);
            acc.x = fmaf(w[c], v.x, acc.x); acc.y = fmaf(w[c], v.y, acc.y);
        }
        out[(size_t)s * n_levels + l] = __float22half2_rn(acc);
    }
}

// shift: elements from a vertex's entry to the copy this thread adds into (0: the table's own)
__device__ inline void scatter_level_h2(const Level& L, float2 p, __half2 d, __half2* grad, unsigned shift) {
    unsigned cell[4]; float w[4];
    corners(L, p, cell, w);
    float2 df = __half22float2(d);
    for (int c = 0; c < 4; ++c)
        atomicAdd(&grad[cell[c] + shift], __float22half2_rn(make_float2(w[c] * df.x, w[c] * df.y)));
}

__device__ inline void scatter_level_f32(const Level& L, float2 p, __half2 d, float* grad, unsigned shift) {
    unsigned cell[4]; float w[4];
    corners(L, p, cell, w);
    float2 df = __half22float2(d);
    for (int c = 0; c < 4; ++c) {
        atomicAdd(&grad[2 * (cell[c] + shift)], w[c] * df.x);
        atomicAdd(&grad[2 * (cell[c] + shift) + 1], w[c] * df.y);
    }
}

// A thread a sample, its levels in turn; the dense (coarse) levels into copy blockIdx.x % copies of the table:
// as many atomics on `copies` times the addresses (a sum over the copies would follow).
template <typename G, void (*SCATTER)(const Level&, float2, __half2, G*, unsigned)>
__device__ inline void by_sample(const float2* points, const __half2* deltas, G* grad, int n, int n_levels,
                                 unsigned copies, unsigned entries) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    float2 p = points[s];
    unsigned copy = (blockIdx.x % copies) * entries;
    for (int l = 0; l < n_levels; ++l)
        SCATTER(LEVELS[l], p, deltas[(size_t)s * n_levels + l], grad, LEVELS[l].hashed ? 0u : copy);
}

// A thread a (sample, level), samples fastest, as tiny-cuda-nn launches its grid backward.
template <typename G, void (*SCATTER)(const Level&, float2, __half2, G*, unsigned)>
__device__ inline void by_level(const float2* points, const __half2* deltas, G* grad, int n, int n_levels) {
    int s = blockIdx.x * blockDim.x + threadIdx.x, l = blockIdx.y;
    if (s >= n) return;
    SCATTER(LEVELS[l], points[s], deltas[(size_t)s * n_levels + l], grad, 0u);
}

#define KERNEL(name, G, arrangement, ...) \
    extern "C" __global__ void name(const float2* points, const __half2* deltas, G* grad, int n, int n_levels, \
                                    unsigned copies, unsigned entries) { \
        arrangement<G, __VA_ARGS__>(points, deltas, grad, n, n_levels ARRANGEMENT_##arrangement); }
#define ARRANGEMENT_by_sample , copies, entries
#define ARRANGEMENT_by_level
KERNEL(scatter_h2_sample, __half2, by_sample, scatter_level_h2)
KERNEL(scatter_h2_level, __half2, by_level, scatter_level_h2)
KERNEL(scatter_f32_sample, float, by_sample, scatter_level_f32)
KERNEL(scatter_f32_level, float, by_level, scatter_level_f32)
"""

CONFIGS = {"image": TCNN_IMAGE_CONFIG["encoding"]}
THREADS = 128
# name, kernel, gradient dtype (None: the gather), whether levels get threads of their own, copies of the dense levels
KERNELS = (("gather, a thread a sample", "gather", None, False, 1),
           ("scatter f16 pairs, a thread a sample", "scatter_h2_sample", np.float16, False, 1),
           ("scatter f16 pairs, a thread a (sample, level)", "scatter_h2_level", np.float16, True, 1),
           *((f"scatter f16 pairs, a thread a sample, dense levels in {c} copies", "scatter_h2_sample",
              np.float16, False, c) for c in (8, 32, 128)),
           ("scatter f32, a thread a sample", "scatter_f32_sample", np.float32, False, 1),
           ("scatter f32, a thread a (sample, level)", "scatter_f32_level", np.float32, True, 1))


def grid_levels(config: dict):
    if config.get("n_features_per_level", 2) != 2 or config.get("n_input_dims", 2) != 2:
        raise SystemExit("the probe's kernels are written for 2-D grids of 2 features a level")
    return levels(2, config["n_levels"], "Hash", config["log2_hashmap_size"], config["base_resolution"],
                  config["per_level_scale"])


def level_records(table: tuple) -> np.ndarray:
    record = np.dtype([("scale", "<f4"), ("resolution", "<u4"), ("size", "<u4"), ("offset", "<u4"),
                       ("hashed", "<u4")])
    out = np.zeros(32, record)
    for i, level in enumerate(table):
        out[i] = (level.scale, level.resolution, level.size, level.offset, int(level.hashed))
    return out


def timed(cp, launch, runs: int) -> float:
    for _ in range(5):
        launch()
    start, stop, times = cp.cuda.Event(), cp.cuda.Event(), []
    for _ in range(runs):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def measure(cp, table: tuple, batches: list[int], runs: int) -> list[dict]:
    module = cp.RawModule(code=SOURCE, options=("-DPRIME1=%du" % COHERENT_PRIMES[1],))
    constants = level_records(table)
    pointer = module.get_global("LEVELS")
    pointer.copy_from_host(constants.ctypes.data, constants.nbytes)
    entries, n_levels = table[-1].offset + table[-1].size, len(table)
    grid_table = cp.asarray(np.random.default_rng(0).uniform(-1e-4, 1e-4, (entries, 2)).astype(np.float16))
    rows = []
    for log2 in batches:
        n = 1 << log2
        rng = np.random.default_rng(log2)
        points = cp.asarray(rng.uniform(0, 1, (n, 2)).astype(np.float32))
        deltas = cp.asarray(rng.uniform(-1e-3, 1e-3, (n, n_levels, 2)).astype(np.float16))
        out = cp.empty((n, n_levels, 2), cp.float16)
        for label, name, dtype, per_level, copies in KERNELS:
            kernel = module.get_function(name)
            grid = ((n + THREADS - 1) // THREADS, n_levels if per_level else 1)
            target = out if dtype is None else cp.zeros((copies * entries, 2), dtype)
            source = grid_table if dtype is None else deltas
            arguments = (points, source, target, np.int32(n), np.int32(n_levels))
            if dtype is not None:
                arguments += (np.uint32(copies), np.uint32(entries))
            ms = timed(cp, lambda: kernel(grid, (THREADS,), arguments), runs)
            corners = n * n_levels * 4
            rows.append({"kernel": label, "batch": n, "ms": round(ms, 4),
                         "G corners/s": round(corners / ms / 1e6, 1)})
    return rows


def markdown(rows: list[dict], environment: dict, config_name: str) -> str:
    lines = [f"# Grid lookups and gradient atomics alone, {device_name(environment)} (driver {driver(environment)}), "
             f"{environment['date'][:10]}", "",
             f"`python3 bench/grid_scatter_probe.py --config {config_name}` at {environment['commit']}: "
             f"CUDA kernels doing only a grid's work (see the script's docstring), CUDA-event medians.", "",
             "| kernel | batch | GPU ms | G corners/s |", "|---|---|---|---|"]
    lines += [f"| {r['kernel']} | 2^{r['batch'].bit_length() - 1} | {r['ms']:.4f} | {r['G corners/s']} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=sorted(CONFIGS), default="image")
    parser.add_argument("--batches", default="16,18,21", help="log2 batch sizes")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    try:
        import cupy as cp
    except ImportError:
        raise SystemExit("the probe needs CuPy and a CUDA device")
    environment = describe_environment()
    rows = measure(cp, grid_levels(CONFIGS[args.config]), [int(b) for b in args.batches.split(",")], args.runs)
    text = markdown(rows, environment, args.config)
    write_results({"environment": environment, "config": args.config, "rows": rows}, args.out, "grid-scatter-probe",
                  text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
