"""The encodings family, tiny-cuda-nn's by `otype`: one module per encoding (identity, frequency, triangle_wave,
oneblob, spherical_harmonics, grid, composite), each a frozen dataclass made from a tcnn config by
`registry.from_config`, with its sizes, parameter layout and float32 numpy forward and backward passes (`base`).
The graph holds one as the `encoding` attribute of an `Op.ENCODING` node; `docs/encodings.md` is the reference.
"""
