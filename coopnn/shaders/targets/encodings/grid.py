"""Grid (`coopnn.graph.encodings.grid`): per level, the position p = fma(scale, x, 1/2), its cell floor(p) as
tcnn's uint32 and the fraction p - floor(p); then the vertices around it (Nearest: the cell's own; Linear and
Smoothstep: the 2^d corners, bit `dim` of the corner number meaning +1 along `dim`), each indexed densely or by the
CoherentPrime hash modulo the level's table size (`grid_levels.vertex_index`), its F features read from the
parameter vector and blended by the corner's weight, the product of its per-dimension weights in dimension order.
Everything is unrolled: levels, corners and features are compile-time counts. `scatter_gradient` walks the same
vertices backwards, for a training step's kernel: each vertex's weight times the gradient in the level's outputs,
added into the gradient of the parameter vector by the target's atomic adds (`float32_atomic_adds`, or the coopvec
target's float16 pairs: `coopnn.backends.coopvec.table_atomics`)."""

from __future__ import annotations

from coopnn.graph.encodings.grid import Grid
from coopnn.graph.encodings.grid_levels import COHERENT_PRIMES, MAX_DENSE_BASE, Level, dense_strides
from coopnn.shaders.spirv.ops import Ops


def _vertex_index(w, level: Level, vertex: list):
    """The table entry of the vertex with uint32 coordinates `vertex`, modulo the level's size."""
    if level.hashed:
        index = vertex[0]
        for dim in range(1, len(vertex)):
            index = w.xor(index, w.mul(vertex[dim], w.uint(COHERENT_PRIMES[dim])))
    elif level.resolution <= MAX_DENSE_BASE[len(vertex)]:
        index = vertex[0]
        for dim, stride in enumerate(dense_strides(level, len(vertex))[1:], start=1):
            index = w.add(index, w.mul(vertex[dim], w.uint(stride)))
    else:  # tcnn's dense index of a level too fine to count in uint32: every vertex reads entry 0
        return w.uint(0)
    return w.modulo(index, level.size)


def _first(w, grid: Grid, level: Level, vertex: list):
    """The vertex's first element in the parameter vector: (offset + index) F."""
    return w.mul(w.add(_vertex_index(w, level, vertex), w.uint(level.offset)), w.uint(grid.n_features_per_level))


def _features(w, grid: Grid, level: Level, vertex: list) -> list:
    """The F features of a vertex: elements (offset + index) F + f of the parameter vector."""
    return w.read_run(_first(w, grid, level, vertex), grid.n_features_per_level)


def _corner_features(w, grid: Grid, level: Level, vertices: list) -> list:
    """The F features of each corner, corners 2k and 2k + 1 (neighbours along the first dimension, which the
    CoherentPrime hash and the dense index keep in one aligned pair of entries about half the time) read
    together."""
    firsts = [_first(w, grid, level, vertex) for vertex in vertices]
    features = grid.n_features_per_level
    values = []
    for k in range(0, len(firsts), 2):
        values += w.read_neighbours(firsts[k], firsts[k + 1], features)
    return values


def _fractions(w, grid: Grid, fractions: list) -> list:
    """The weights along each dimension of the upper vertex: t, or 3t^2 - 2t^3 for Smoothstep."""
    if grid.interpolation != "Smoothstep":
        return fractions
    return [w.mul(w.mul(t, t), w.sub(w.constant(3.0), w.scale(t, 2.0))) for t in fractions]


def _corners(w, grid: Grid, level: Level, xs: list):
    """(weight, vertex) of each vertex the level reads for the point `xs`: the cell's own with weight None (Nearest),
    else the 2^d corners of the cell and their interpolation weights."""
    scale, half = w.constant(float(level.scale)), w.constant(0.5)
    positions = [w.fma(scale, x, half) for x in xs]
    floors = [w.glsl("Floor", p) for p in positions]
    cells = [w.cell(f) for f in floors]
    if grid.interpolation == "Nearest":
        yield None, cells
        return
    upper = _fractions(w, grid, [w.sub(p, f) for p, f in zip(positions, floors)])
    lower = [w.sub(w.constant(1.0), t) for t in upper]
    one = w.uint(1)
    for corner in range(1 << grid.n_input_dims):
        bits = [(corner >> dim) & 1 for dim in range(grid.n_input_dims)]
        weight = w.product([upper[dim] if bit else lower[dim] for dim, bit in enumerate(bits)])
        yield weight, [w.add(cell, one) if bit else cell for cell, bit in zip(cells, bits)]


def _level(w, grid: Grid, level: Level, xs: list) -> list:
    corners = list(_corners(w, grid, level, xs))
    if corners[0][0] is None:  # Nearest: the cell's own vertex
        return _features(w, grid, level, corners[0][1])
    blended = None
    for (weight, _), values in zip(corners, _corner_features(w, grid, level, [v for _, v in corners])):
        terms = [w.mul(weight, value) for value in values]
        blended = terms if blended is None else [w.add(a, b) for a, b in zip(blended, terms)]
    return blended


# What a kernel adding a grid's gradient with float32 atomics needs of the device: the atomic add on storage buffers
# (VK_EXT_shader_atomic_float), and device-scope atomics under the Vulkan memory model.
SCATTER_FEATURES = frozenset({"shaderBufferFloat32AtomicAdd", "vulkanMemoryModelDeviceScope"})


def scatter_gradient(w, encoding: Grid, xs: list, deltas: list, add) -> None:
    """The backward rule of `Grid.backward` for one sample: for every level and vertex, add(first, values, level)
    with the vertex's F values, delta of output (level, f) x the vertex's weight, for the elements first + f, first =
    (offset + index) F, of the parameter vector the forward pass read them from (`level`: the vertex's `Level`)."""
    features = encoding.n_features_per_level
    for number, level in enumerate(encoding.levels):
        level_deltas = deltas[number * features:(number + 1) * features]
        for weight, vertex in _corners(w, encoding, level, xs):
            add(_first(w, encoding, level, vertex),
                [delta if weight is None else w.mul(weight, delta) for delta in level_deltas], level)


def float32_atomic_adds(frame, binding: int, start: int):
    """`scatter_gradient`'s add for a target whose `frame` binds the gradient (float32) at `binding`: each value added
    into element `start` + first + f with a float32 atomic add (samples share entries), device scope, relaxed (the
    sums are read by later dispatches)."""
    m, ops, u32 = frame.module, Ops(frame.main), frame.u32
    m.capability("AtomicFloat32AddEXT")
    m.extension("SPV_EXT_shader_atomic_float_add")
    scope, relaxed = m.enum_constant("Scope", "Device"), m.enum_constant("MemorySemantics", "Relaxed")

    def add(first, values, level) -> None:  # every level alike
        for f, value in enumerate(values):
            element = ops.int_add(u32, first, frame.uint(start + f))
            ops.atomic_float_add(frame.f32, frame.element_pointer(binding, element), scope, relaxed, value)

    return add


def grid(w, encoding: Grid, xs: list) -> list:
    return [value for level in encoding.levels for value in _level(w, encoding, level, xs)]


EMITTERS = {Grid.otype: grid}
