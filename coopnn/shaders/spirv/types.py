"""Type declarations, deduplicated as they are created: asking twice for the same type gives the same id.

Mixed into `Module` (builder.py), whose `_declare`, `decorate`, `member_decorate`, `name`, `member_name`,
`constant`, `integer` and `enum_constant` it uses. Aggregates (arrays, structs) are keyed with their decorations and
names, since SPIR-V lets two of them differ only there (a Block struct and a plain one of the same members, say).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from coopnn.shaders.spirv.capabilities import scalar_type_requirements, storage_access_requirements
from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.instruction import Id
from coopnn.shaders.spirv.literals import NumberFormat

Decoration = str | tuple  # "Block" or ("ArrayStride", 16): an enumerant name followed by its parameters

# Type opcodes -> positions of the operands that are the types they contain.
CONTAINED_TYPE_OPERANDS = {
    "OpTypeVector": (0,),
    "OpTypeMatrix": (0,),
    "OpTypeArray": (0,),
    "OpTypeRuntimeArray": (0,),
    "OpTypeCooperativeVectorNV": (0,),
    "OpTypeCooperativeMatrixKHR": (0,),
}


@dataclass(frozen=True)
class TypeInfo:
    """A declared type: its opname and the operands it was declared with (the result id left out)."""

    opname: str
    operands: tuple

    def contained_types(self) -> tuple[Id, ...]:
        if self.opname == "OpTypeStruct":
            return self.operands
        return tuple(self.operands[i] for i in CONTAINED_TYPE_OPERANDS.get(self.opname, ()))


def decoration_tuple(decoration: Decoration) -> tuple:
    return (decoration,) if isinstance(decoration, str) else tuple(decoration)


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


class TypeBuilder:
    """type_* methods of `Module`."""

    def type(self, opname: str, *operands, decorations: Iterable[Decoration] = (), name: str | None = None) -> Id:
        """Any type declaration, e.g. `type("OpTypeTensorLayoutNV", dim, clamp_mode)`; the same opname, operands,
        decorations and name give the same id."""
        if self.grammar.instruction(opname).cls != "Type-Declaration":
            raise SpirvBuildError(f"{opname} does not declare a type")
        decorations = tuple(decoration_tuple(d) for d in decorations)
        return self._unique_type((opname, _frozen(operands), decorations, name), opname, operands, decorations, name)

    def _unique_type(self, key: tuple, opname: str, operands: tuple, decorations: tuple, name: str | None) -> Id:
        if key not in self._types:
            type_id = self._declare(opname, operands, name=name)
            self._type_info[type_id] = TypeInfo(opname, _frozen(operands))
            for decoration in decorations:
                self.decorate(type_id, *decoration)
            self._requirements.extend(self._derived_requirements(opname, operands))
            self._types[key] = type_id
        return self._types[key]

    def _derived_requirements(self, opname: str, operands: tuple) -> list:
        """Capabilities a type needs beyond what the grammar lists for its opcode and enumerants."""
        if opname == "OpTypePointer":
            storage_class, pointee = operands
            return storage_access_requirements(storage_class, self.scalar_widths(pointee))
        return scalar_type_requirements(opname, operands)

    def type_info(self, type_id: Id) -> TypeInfo:
        try:
            return self._type_info[type_id]
        except KeyError:
            raise SpirvBuildError(f"{type_id!r} is not a type declared in this module") from None

    def number_format(self, type_id: Id) -> NumberFormat:
        """How literals of a scalar int or float type are stored."""
        info = self.type_info(type_id)
        if info.opname == "OpTypeInt":
            return NumberFormat(False, info.operands[0], signed=bool(info.operands[1]))
        if info.opname == "OpTypeFloat":
            return NumberFormat(True, info.operands[0], encoding=info.operands[1] if len(info.operands) > 1 else None)
        raise SpirvBuildError(f"{info.opname} has no literal numbers; a scalar int or float type is needed")

    def scalar_widths(self, type_id: Id) -> set[int]:
        """Widths of the int and float scalars a type holds, looking through aggregates but not pointers."""
        info = self.type_info(type_id)
        if info.opname in ("OpTypeInt", "OpTypeFloat"):
            return {info.operands[0]}
        return set().union(*(self.scalar_widths(t) for t in info.contained_types()))

    def type_void(self) -> Id:
        return self.type("OpTypeVoid")

    def type_bool(self) -> Id:
        return self.type("OpTypeBool")

    def type_int(self, width: int, signed: bool) -> Id:
        return self.type("OpTypeInt", width, int(signed))

    def type_float(self, width: int, encoding: str | None = None) -> Id:
        """An IEEE float of `width` bits, or another FPEncoding ("BFloat16KHR", "Float8E4M3EXT", ...)."""
        return self.type("OpTypeFloat", width, *((encoding,) if encoding else ()))

    def type_vector(self, component: Id, count: int) -> Id:
        return self.type("OpTypeVector", component, count)

    def type_array(self, element: Id, length: int | Id, *, stride: int | None = None) -> Id:
        return self.type("OpTypeArray", element, self.integer(length), decorations=_stride(stride))

    def type_runtime_array(self, element: Id, *, stride: int | None = None) -> Id:
        return self.type("OpTypeRuntimeArray", element, decorations=_stride(stride))

    def type_struct(
        self,
        members: Sequence[Id],
        *,
        offsets: Sequence[int] | None = None,
        decorations: Iterable[Decoration] = (),
        member_decorations: Mapping[int, Iterable[Decoration]] | None = None,
        name: str | None = None,
        member_names: Sequence[str] = (),
    ) -> Id:
        """A struct; `offsets` gives each member's Offset decoration, `member_decorations` any other ones."""
        per_member = {i: [decoration_tuple(d) for d in ds] for i, ds in (member_decorations or {}).items()}
        for index, offset in enumerate(offsets or ()):
            per_member.setdefault(index, []).insert(0, ("Offset", offset))
        decorations = tuple(decoration_tuple(d) for d in decorations)
        member_key = tuple(sorted((i, tuple(d)) for i, d in per_member.items()))
        key = ("OpTypeStruct", tuple(members), decorations, name, member_key, tuple(member_names))
        if key not in self._types:
            struct_id = self._unique_type(key, "OpTypeStruct", tuple(members), decorations, name)
            for index, decorations_of_member in sorted(per_member.items()):
                for decoration in decorations_of_member:
                    self.member_decorate(struct_id, index, *decoration)
            for index, member_name in enumerate(member_names):
                self.member_name(struct_id, index, member_name)
        return self._types[key]

    def type_pointer(self, storage_class: str, pointee: Id) -> Id:
        """A pointer; narrow scalars reachable through it add the 8/16-bit storage access capabilities."""
        return self.type("OpTypePointer", storage_class, pointee)

    def type_function(self, return_type: Id, parameter_types: Sequence[Id] = ()) -> Id:
        return self.type("OpTypeFunction", return_type, *parameter_types)

    def type_cooperative_vector_nv(self, component: Id, count: int | Id) -> Id:
        return self.type("OpTypeCooperativeVectorNV", component, self.integer(count))

    def type_cooperative_matrix_khr(self, component: Id, scope: str, rows: int | Id, columns: int | Id, use: str) -> Id:
        """A KHR cooperative matrix; `scope` names a Scope ("Subgroup", or "Workgroup" with
        SPV_NV_cooperative_matrix2, whose LocalSizeId constants must then be declared first), `use` a
        CooperativeMatrixUse. Any rows and columns can be declared; which ones a device takes, it reports."""
        return self.type("OpTypeCooperativeMatrixKHR", component, self.enum_constant("Scope", scope),
                         self.integer(rows), self.integer(columns), self.enum_constant("CooperativeMatrixUse", use))

    def type_tensor_layout_nv(self, dim: int, clamp_mode: str = "Undefined") -> Id:
        """A tensor layout of `dim` dimensions (1 to 5); `clamp_mode` names a TensorClampMode."""
        return self.type("OpTypeTensorLayoutNV", self.integer(dim), self.enum_constant("TensorClampMode", clamp_mode))

    def type_tensor_view_nv(self, dim: int, has_dimensions: bool, permutation: Sequence[int] | None = None) -> Id:
        """A tensor view of `dim` dimensions, with its own dimensions or the layout's span's, and the permutation
        p0..p<dim-1> of its coordinates (identity when not given)."""
        permutation = tuple(range(dim)) if permutation is None else tuple(permutation)
        if sorted(permutation) != list(range(dim)):
            raise SpirvBuildError(f"a tensor view's p0..p{dim - 1} must permute 0..{dim - 1}; got {permutation}")
        return self.type("OpTypeTensorViewNV", self.integer(dim), self.constant(self.type_bool(), bool(has_dimensions)),
                         *(self.integer(p) for p in permutation))


def _stride(stride: int | None) -> tuple:
    return (("ArrayStride", stride),) if stride is not None else ()
