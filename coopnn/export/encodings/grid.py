"""Grid (HashGrid, DenseGrid, TiledGrid): each level's feature vectors become a table of the weights file, and the
shader reads the 2^d vertices around scale x + 1/2 (one with Nearest) in the grid's own uint32 arithmetic
(`coopnn.graph.encodings.grid_levels`: dense strides or CoherentPrime hashing, modulo the table size) and blends them
by the d-linear weights of the cell fraction (Smoothstep first maps it), as the encoding's numpy forward does."""

from __future__ import annotations

from coopnn.export.scalar import literal
from coopnn.graph.encodings import grid_levels


def _cell(program, level, x: str) -> tuple[str, str]:
    """The cell's first vertex coordinate (uint32, wrapping below zero as tcnn's does) and the fraction."""
    position = program.assign(f"fma({literal(level.scale)}, {x}, 0.5)")
    floor = program.assign(f"floor({position})")
    return program.assign(f"uint(int({floor}))", "uint"), program.assign(f"{position} - {floor}")


def _index(program, level, corner: list[str]) -> str:
    """The table entry of the vertex `corner` (uint32 coordinates)."""
    if level.hashed:
        terms = [f"({c} * {grid_levels.COHERENT_PRIMES[d]}u)" for d, c in enumerate(corner)]
        return program.assign(f"({' ^ '.join(terms)}) % {level.size}u", "uint")
    if level.resolution > grid_levels.MAX_DENSE_BASE[len(corner)]:
        return "0u"  # tcnn's dense index of a level too fine to stride is 0, modulo the size
    terms = [f"{c} * {stride}u" for c, stride in zip(corner, grid_levels.dense_strides(level, len(corner)))]
    return program.assign(f"({' + '.join(terms)}) % {level.size}u", "uint")


def _level(encoding, level, columns, read, program) -> list[str]:
    cells, fractions = zip(*(_cell(program, level, x) for x in columns))
    features = encoding.n_features_per_level
    if encoding.interpolation == "Nearest":
        entry = _index(program, level, list(cells))
        return [program.assign(f"{read}(({level.offset}u + {entry}) * {features}u + {f}u)") for f in range(features)]
    if encoding.interpolation == "Smoothstep":
        fractions = [program.assign(f"{t} * {t} * (3.0 - 2.0 * {t})") for t in fractions]
    sums = ["0.0"] * features
    for bits in range(1 << len(columns)):
        along = [fractions[d] if bits >> d & 1 else f"(1.0 - {fractions[d]})" for d in range(len(columns))]
        weight = program.assign(" * ".join(along))
        corner = [f"({c} + 1u)" if bits >> d & 1 else c for d, c in enumerate(cells)]
        entry = _index(program, level, corner)
        sums = [program.assign(f"{sums[f]} + {weight} * {read}(({level.offset}u + {entry}) * {features}u + {f}u)")
                for f in range(features)]
    return sums


def _grid(encoding, columns, params, program, what):
    read = program.table(what, params)
    return [value for level in encoding.levels for value in _level(encoding, level, columns, read, program)]


LOWERINGS = {"Grid": _grid}
