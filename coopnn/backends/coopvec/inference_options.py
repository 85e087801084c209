"""How the coopvec inference kernel moves its sample rows (`InferenceOptions`), and the ones the backend ships
(`shipped_options`, chosen here only).

By default every invocation loads its own input row and stores its own output row (OpCooperativeVectorLoadNV and
StoreNV on the storage buffer, `target.py`): with rows of 64 bytes and more, one load instruction of a subgroup then
touches a cache line per invocation. With `stage_rows` the work-group's rows whose width is a whole number of 16-byte
words go through workgroup memory instead (`staged_rows.py`): consecutive invocations copy consecutive 16-byte words
of the work-group's block of rows, and each invocation then reads (or writes) its own row there. `pad_rows` spaces
the staged rows 16 bytes further apart than their width, so that the invocations of a subgroup reading their rows at
once hit different banks. `stage_elements` stages the other rows (3 values: 6 or 12 bytes) element by element
(`staged_elements.py`). `streaming_rows` marks the direct row loads and stores Nontemporal, so that rows
streaming through the caches may leave the weights there. `vector_table_reads` reads the 2 or 4 features of a
grid vertex in one load (`table_runs.py`), and `neighbour_reads` with it two vertices of 2 features that are
neighbours along the grid's first dimension as one 8-byte block where they share one. `samples_per_invocation`
lowers the kernel for 2 or 4 consecutive samples an invocation (`sample_copies.py`). The default (all off,
`DEFAULT_OPTIONS`) is byte-for-byte the kernel the backend shipped before the options existed;
`bench/inference_variants.py` measures each option against the shipped kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.errors import CompileError


@dataclass(frozen=True)
class InferenceOptions:
    stage_rows: bool = False  # whole-word rows copied through workgroup memory by consecutive invocations
    pad_rows: bool = False  # staged rows one 16-byte word further apart than their width (needs stage_rows)
    stage_elements: bool = False  # rows not of whole words copied through workgroup memory element by element
    vector_table_reads: bool = False  # an encoding's runs of 2 or 4 table elements (grid features) in one load
    neighbour_reads: bool = False  # two neighbouring vertices' runs of 2 in one block load where they share one
    streaming_rows: bool = False  # direct row loads and stores marked Nontemporal (read or written once)
    samples_per_invocation: int = 1  # consecutive samples an invocation lowers instruction by instruction in turn

    def __post_init__(self):
        if self.samples_per_invocation not in (1, 2, 4):
            raise CompileError(f"samples_per_invocation is 1, 2 or 4, not {self.samples_per_invocation!r}")
        if self.neighbour_reads and not self.vector_table_reads:
            raise CompileError("neighbour_reads reads table runs as vectors: it needs vector_table_reads")

    def describe(self) -> str:
        on = [name if value is True else f"{name}={value}" for name, value in vars(self).items()
              if value and (name, value) != ("samples_per_invocation", 1)]
        return ", ".join(on) or "defaults"


# every option off: what the target compiles when given none (training kernels among them)
DEFAULT_OPTIONS = InferenceOptions()
# what the backend compiles its inference kernels with (`backend.prepare_coopvec`) where the weights are floats: a grid
# vertex's features in one load, which took tiny-cuda-nn's image model at 2^21 from 0.502 to 0.434 ms on the H200
# (bench/results/nvidia-h200-2026-12-03-8b3189c-inference-variants-hashgrid.md; models without a grid compile as
# with the defaults), and for a kernel reading tables neighbouring vertices in one block as well: 0.392 ms, against
# 0.416 with two samples an invocation instead (...-2026-12-03-1186fbe-inference-variants-hashgrid.md); integer
# kernels read their tables element by element
SHIPPED_OPTIONS = InferenceOptions(vector_table_reads=True)
TABLE_OPTIONS = InferenceOptions(vector_table_reads=True, neighbour_reads=True)


def shipped_options(weights, program) -> InferenceOptions:
    """The options of the backend's inference kernel for `program` (a `KernelProgram`) with weights of the format
    `weights`."""
    if weights.input_quantization is not None:
        return DEFAULT_OPTIONS
    return TABLE_OPTIONS if reads_tables(program) else SHIPPED_OPTIONS


def reads_tables(program) -> bool:
    """Whether `program` encodes its input with trained tables (a grid, alone or in a composite)."""
    return any(i.op == "encode" and i.attrs["encoding"].n_parameters for i in program.body)
