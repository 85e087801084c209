"""The syntax tree of a tensor-language program: plain frozen dataclasses, one per instruction form of the reference.

Every node carries the source range it was read from (`span`), left out of comparisons, so a program printed and
read back compares equal to the original. Values are local identifiers without their `%`; instructions list the
values they define in `results`. Optional syntax is stored resolved: transposes in full (`("n", "n")` for a plain
gemm), atomic scope and semantics with their defaults, dictionary attributes sorted by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coopnn.errors import InputError
from coopnn.tl.types import CoopMatrixType, MemrefType, ScalarType, Type


@dataclass(frozen=True)
class Span:
    """A source range: 1-based line and column of the first character, and of the last."""

    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        if self.end_line == self.line:
            return f"{self.line}.{self.column}-{self.end_column}"
        return f"{self.line}.{self.column}-{self.end_line}.{self.end_column}"


def _span():
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Value:
    """A local identifier, where it is defined or used."""

    name: str
    span: Span | None = _span()


@dataclass(frozen=True)
class DictAttr:
    """A dictionary attribute: (name, attribute) pairs sorted by name."""

    items: tuple[tuple[str, object], ...] = ()

    def get(self, name: str, default=None):
        return next((v for k, v in self.items if k == name), default)


@dataclass(frozen=True)
class Region:
    instructions: tuple[Inst, ...]
    span: Span | None = _span()


@dataclass(frozen=True)
class Atomic:
    """The memory scope and semantics of an atomic access."""

    scope: str = "work_group"
    semantics: str = "relaxed"


@dataclass(frozen=True, kw_only=True)
class Inst:
    """What every instruction has: the values it defines and its source range."""

    results: tuple[Value, ...] = ()
    span: Span | None = _span()

    def regions(self) -> tuple[Region, ...]:
        return ()


class BodyRegion:
    """Mixed into an instruction whose one region is its `body`."""

    def regions(self) -> tuple[Region, ...]:
        return (self.body,)


@dataclass(frozen=True, kw_only=True)
class Alloca(Inst):
    attributes: DictAttr
    type: MemrefType


@dataclass(frozen=True, kw_only=True)
class Collective(Inst):
    """axpby, cumsum, gemm, gemv, ger, hadamard and sum: `op[.atomic][.t|.n...] operands`."""

    op: str
    atomic: bool
    transposes: tuple[str, ...]
    operands: tuple[Value, ...]
    mode: int | None = None  # cumsum's summation mode


@dataclass(frozen=True, kw_only=True)
class LifetimeStop(Inst):
    operand: Value


@dataclass(frozen=True, kw_only=True)
class Foreach(BodyRegion, Inst):
    variables: tuple[Value, ...]
    starts: tuple[Value, ...]
    stops: tuple[Value, ...]
    body: Region


@dataclass(frozen=True, kw_only=True)
class ForeachTile(BodyRegion, Inst):
    variables: tuple[Value, ...]
    starts: tuple[Value, ...]
    stops: tuple[Value, ...]
    sizes: tuple[Value, ...]
    tile_shape: tuple[int, ...]
    body: Region


@dataclass(frozen=True, kw_only=True)
class Parallel(BodyRegion, Inst):
    body: Region


@dataclass(frozen=True, kw_only=True)
class Arith(Inst):
    op: str
    a: Value
    b: Value
    type: ScalarType | CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class Unary(Inst):
    op: str
    a: Value
    type: ScalarType | CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class Associated(Inst):
    operand: Value


@dataclass(frozen=True, kw_only=True)
class AtomicLoad(Inst):
    atomic: Atomic
    tensor: Value
    indices: tuple[Value, ...]
    type: ScalarType


@dataclass(frozen=True, kw_only=True)
class AtomicStore(Inst):
    atomic: Atomic
    value: Value
    tensor: Value
    indices: tuple[Value, ...]


@dataclass(frozen=True, kw_only=True)
class AtomicUpdate(Inst):
    op: str  # add, max, min
    atomic: Atomic
    value: Value
    tensor: Value
    indices: tuple[Value, ...]
    type: ScalarType


@dataclass(frozen=True, kw_only=True)
class Barrier(Inst):
    fence_global: bool
    fence_local: bool


@dataclass(frozen=True, kw_only=True)
class Builtin(Inst):
    """group_id, num_groups, num_subgroups, subgroup_size, subgroup_id, subgroup_linear_id, subgroup_local_id."""

    name: str
    axis: str | None  # x, y or z for the three-dimensional ones
    type: ScalarType


@dataclass(frozen=True, kw_only=True)
class Cast(Inst):
    operand: Value
    type: ScalarType | CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class Compare(Inst):
    op: str
    a: Value
    b: Value


@dataclass(frozen=True, kw_only=True)
class Constant(Inst):
    value: bool | int | float | complex
    type: ScalarType | CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class Expand(Inst):
    tensor: Value
    mode: int
    shape: tuple[int | Value, ...]
    type: MemrefType


@dataclass(frozen=True, kw_only=True)
class For(BodyRegion, Inst):
    variable: Value
    start: Value
    stop: Value
    step: Value | None
    carried: tuple[Value, ...]  # names inside the body
    initial: tuple[Value, ...]  # their values on entry
    types: tuple[Type, ...]
    body: Region
    attributes: DictAttr = DictAttr()


@dataclass(frozen=True, kw_only=True)
class Fuse(Inst):
    tensor: Value
    first: int
    last: int
    type: MemrefType


@dataclass(frozen=True, kw_only=True)
class If(Inst):
    condition: Value
    types: tuple[Type, ...]
    then: Region
    otherwise: Region | None

    def regions(self):
        return (self.then,) if self.otherwise is None else (self.then, self.otherwise)


@dataclass(frozen=True, kw_only=True)
class Load(Inst):
    tensor: Value
    indices: tuple[Value, ...]
    type: ScalarType | MemrefType


@dataclass(frozen=True, kw_only=True)
class Math(Inst):
    op: str
    operand: Value
    type: ScalarType


@dataclass(frozen=True, kw_only=True)
class Size(Inst):
    tensor: Value
    mode: int


@dataclass(frozen=True)
class Slice:
    """One entry of a subview: an offset and, for a slice, a size (None: a single index, which drops the mode)."""

    offset: int | Value
    size: int | Value | None = None


@dataclass(frozen=True, kw_only=True)
class Subview(Inst):
    tensor: Value
    slices: tuple[Slice, ...]
    type: MemrefType


@dataclass(frozen=True, kw_only=True)
class Store(Inst):
    value: Value
    tensor: Value
    indices: tuple[Value, ...]


@dataclass(frozen=True, kw_only=True)
class Yield(Inst):
    values: tuple[Value, ...]


@dataclass(frozen=True, kw_only=True)
class CoopApply(BodyRegion, Inst):
    row: Value
    column: Value
    element: Value
    operand: Value
    type: CoopMatrixType
    body: Region


@dataclass(frozen=True, kw_only=True)
class CoopLoad(Inst):
    transpose: str
    checked: str | None  # rows_checked, cols_checked, both_checked
    atomic: Atomic | None
    tensor: Value
    row: Value
    column: Value
    type: CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class CoopStore(Inst):
    transpose: str
    checked: str | None
    atomic: Atomic | None
    value: Value
    tensor: Value
    row: Value
    column: Value


@dataclass(frozen=True, kw_only=True)
class CoopAtomicUpdate(Inst):
    op: str  # add, max, min
    transpose: str
    checked: str | None
    atomic: Atomic
    value: Value
    tensor: Value
    row: Value
    column: Value
    type: CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class CoopConstruct(Inst):
    operand: Value
    type: CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class CoopExtract(Inst):
    operand: Value
    index: int
    type: ScalarType


@dataclass(frozen=True, kw_only=True)
class CoopInsert(Inst):
    value: Value
    matrix: Value
    index: int
    type: CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class CoopMulAdd(Inst):
    a: Value
    b: Value
    c: Value
    type: CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class CoopPrefetch(Inst):
    level: int
    tensor: Value
    row: Value
    column: Value
    rows: int
    columns: int


@dataclass(frozen=True, kw_only=True)
class CoopReduce(Inst):
    op: str  # add, max, min
    mode: str  # row, column
    operand: Value
    type: CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class CoopScale(Inst):
    scalar: Value
    matrix: Value
    type: CoopMatrixType


@dataclass(frozen=True, kw_only=True)
class SubgroupBroadcast(Inst):
    value: Value
    index: Value
    type: ScalarType


@dataclass(frozen=True, kw_only=True)
class SubgroupOp(Inst):
    kind: str  # exclusive_scan, inclusive_scan, reduce
    op: str  # add, max, min
    operand: Value
    type: ScalarType


@dataclass(frozen=True, kw_only=True)
class Extension(Inst):
    """coopnn's extension instruction `coopnn.<op> operands {attributes} : type`: one instruction of coopnn's kernel
    programs (`coopnn/shaders/kernel/ops.py`), acting on coopvector values; docs/tensor-language.md specifies it."""

    op: str
    operands: tuple[Value, ...]
    attributes: DictAttr
    type: Type | None


@dataclass(frozen=True)
class Argument:
    value: Value
    type: Type
    attributes: DictAttr = DictAttr()


@dataclass(frozen=True)
class Function:
    name: str
    arguments: tuple[Argument, ...]
    attributes: DictAttr
    body: Region
    span: Span | None = _span()
    # coopnn's extension: the types a function computes (`-> (f32)`), yielded by its body's last instruction; such a
    # function is used inside models (coopnn.tl.functions), never launched
    results: tuple[Type, ...] = ()


@dataclass(frozen=True)
class Program:
    functions: tuple[Function, ...]

    def function(self, name: str | None = None) -> Function:
        """The function called `name`, or the only one."""
        if name is None:
            if len(self.functions) != 1:
                raise InputError(f"the program defines {len(self.functions)} functions; name one of "
                                 f"{', '.join('@' + f.name for f in self.functions)}")
            return self.functions[0]
        for function in self.functions:
            if function.name == name.lstrip("@"):
                return function
        raise InputError(f"no function @{name.lstrip('@')}; the program defines "
                         f"{', '.join('@' + f.name for f in self.functions)}")
