"""The kernel instruction set, declared once: for every instruction its operands, the rule giving its result type,
its numpy meaning, its text form and, for the unary float instructions, its derivative in kernel instructions.

`KernelBuilder.emit` checks each instruction it makes against this table; the printer, the interpreter, the numpy
evaluation of kernel rules (`eager.py`) and the derivative pass (`derivatives.py`) read it. Every target registers
its own SPIR-V lowering of each instruction named here (`LOWERINGS` in `coopnn/backends/<target>/target.py`), and
`tests/shaders/kernel/test_ops.py` checks that none is missing. `README.md` beside this file says how to add one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from coopnn.graph.ir import Op
from coopnn.shaders.kernel.program import Instr, KernelProgram, Param, VecType

# Operand kinds: a kernel value, a parameter the instruction reads, a parameter it writes.
VALUE, PARAM, OUTPUT = "value", "param", "output"

Operand = VecType | Param  # what a type rule sees of an operand: a value's type, or the parameter
TypeRule = Callable[[Sequence[Operand], Mapping[str, Any], VecType | None], VecType | None]
Rule = Callable[..., Any]  # (k, x, y) -> dy/dx, written with a KernelWriter


class KernelWriter(Protocol):
    """The helpers activation expansions and derivative rules are written with: `KernelBuilder` emits kernel
    instructions, `eager.NumpyKernel` evaluates them on arrays at once. Values are opaque to the rules."""

    def type_of(self, value: Any) -> VecType: ...

    def splat(self, value: float, size: int, dtype: str = "f32") -> Any: ...

    def unary(self, op: str, x: Any) -> Any: ...

    def binary(self, op: str, a: Any, b: Any) -> Any: ...

    def scalar(self, op: str, x: Any, value: float, *, left: bool = False) -> Any: ...

    def compare(self, op: str, a: Any, b: Any) -> Any: ...

    def select(self, cond: Any, a: Any, b: Any) -> Any: ...

    def activation(self, op: Op, x: Any, attrs: Mapping[str, Any]) -> Any:
        """The graph activation `op` applied to x (its kernel expansion, or its numpy reference)."""

    def function(self, function: Any, *arguments: Any) -> tuple:
        """The results of a tensor-language model function (`coopnn.tl.functions`) applied component-wise to the
        arguments: its body written with these helpers, or the tl interpreter on arrays."""


@dataclass(frozen=True)
class Batch:
    """What the numpy meaning of an instruction may need besides its operands."""

    samples: int
    uniforms: Mapping[str, float]  # push-constant values by name, for `uniform`


@dataclass(frozen=True)
class KernelOp:
    name: str
    operands: tuple[str, ...]  # the kind of each operand (VALUE, PARAM, OUTPUT)
    result_type: TypeRule  # (operands, attrs, declared type) -> result type; raises ValueError on a misuse
    # elementwise: the numpy function of the operand arrays; otherwise (instr, operand arrays, Batch) -> array, where
    # a PARAM operand is the parameter's array and an OUTPUT operand None
    numpy: Callable[..., np.ndarray]
    elementwise: bool = True
    optional: int = 0  # how many of the last operands may be left out
    variadic: bool = False  # the last operand's kind repeats (one or more)
    text: Callable[[Instr, KernelProgram], str] | None = None  # "mnemonic operands"; None: name and %operands
    # unary float instructions: dy/dx as kernel instructions from x and y; None for the step functions (floor, ceil,
    # sign: zero almost everywhere, so nothing trains through them) and for every other instruction
    derivative: Rule | None = None

    def kinds(self, count: int) -> tuple[str, ...] | None:
        """The kind of each of `count` operands, or None when the instruction does not take `count`."""
        n = len(self.operands)
        if self.variadic:
            return self.operands + (self.operands[-1],) * (count - n) if count >= n else None
        return self.operands[:count] if n - self.optional <= count <= n else None

    def line(self, instr: Instr, program: KernelProgram) -> str:
        """The instruction without its result, in the tensor language's syntax."""
        if self.text is not None:
            return self.text(instr, program)
        return f"{instr.op} " + ", ".join("%" + a for a in instr.args)


KERNEL_OPS: dict[str, KernelOp] = {}


def _declare(name: str, operands: tuple[str, ...], result_type: TypeRule, numpy: Callable, **options: Any) -> None:
    KERNEL_OPS[name] = KernelOp(name, operands, result_type, numpy, **options)


def _check(ok: bool, why: str) -> None:
    if not ok:
        raise ValueError(why)


# ----- type rules ------------------------------------------------------------------------------------------------


def _same(dtype: str) -> TypeRule:
    """Component-wise on operands of one type with `dtype` components: the result has that type."""

    def rule(operands, attrs, declared):
        _check(all(t == operands[0] for t in operands) and operands[0].dtype == dtype,
               f"operands must be one coopvector<{dtype}xN>, not {', '.join(map(str, operands))}")
        return operands[0]

    return rule


def _comparison(operands, attrs, declared):
    a, b = operands
    _check(a == b and a.dtype == "f32", f"compares two coopvector<f32xN>, not {a} and {b}")
    return VecType("bool", a.size)


def _choice(operands, attrs, declared):
    cond, a, b = operands
    _check(cond == VecType("bool", a.size) and a == b, f"takes a boolean condition and two values of one type, "
                                                       f"not {cond}, {a}, {b}")
    return a


def _gathered(operands, attrs, declared):
    dtypes = {t.dtype for t in operands}
    _check(len(dtypes) == 1, f"gathers from vectors of one component type, not {', '.join(map(str, operands))}")
    _check(all(0 <= c < operands[s].size for s, c in attrs["index"]), "gathers components outside its sources")
    return VecType(dtypes.pop(), len(attrs["index"]))


def _reduced(operands, attrs, declared):
    (x,) = operands
    _check(x.dtype == "f32" and x.size % attrs["group"] == 0, f"reduces {x} in groups of {attrs['group']}")
    return VecType("f32", x.size // attrs["group"])


def _converted(operands, attrs, declared):
    (x,) = operands
    _check(declared is not None and declared.size == x.size and declared.dtype != x.dtype,
           f"casts {x} to a type of the other component type, not {declared}")
    return declared


def _declared(*dtypes: str) -> TypeRule:
    """The instruction states its type, with `dtypes` components."""

    def rule(operands, attrs, declared):
        _check(declared is not None and declared.dtype in dtypes, f"needs a stated type, {' or '.join(dtypes)}")
        return declared

    return rule


def _loaded(operands, attrs, declared):
    (param,) = operands
    _check(param.role in ("input", "vector"), f"loads an input or a vector, not the {param.role} {param.name}")
    return VecType("f32", param.shape[0])


def _stored(operands, attrs, declared):
    x, param = operands
    tape = param.role == "tape"
    size = attrs["width"] if tape else param.shape[0]  # a tape region may be wider than the value (padding)
    fits = x.size <= size if tape else x.size == size
    _check(param.role in ("output", "tape", "loss") and x.dtype == "f32" and fits,
           f"stores {x} into the {param.role} {param.name} of {size} components")
    return None


def _accumulated(operands, attrs, declared):
    *vectors, param = operands
    shape = tuple(v.size for v in vectors)
    _check(param.role == "gradient" and param.shape == shape and all(v.dtype == "f32" for v in vectors),
           f"accumulates {' x '.join(map(str, vectors))} into the {param.role} {param.name} of shape {param.shape}")
    return None


def _encoded(operands, attrs, declared):
    x, *params = operands
    encoding = attrs["encoding"]
    _check(x == VecType("f32", encoding.n_input_dims),
           f"encodes a coopvector<f32x{encoding.n_input_dims}>, not {x}")
    _check(bool(params) == bool(encoding.n_parameters)
           and all(p.role == "vector" and p.shape == (encoding.n_parameters,) for p in params),
           f"{encoding.describe()} reads a vector of {encoding.n_parameters} parameters")
    return VecType("f32", encoding.n_output_dims)


def _encoding_accumulated(operands, attrs, declared):
    x, delta, param = operands
    encoding, start = attrs["encoding"], attrs["start"]
    _check(x == VecType("f32", encoding.n_input_dims) and delta == VecType("f32", encoding.n_output_dims)
           and param.role == "table_gradient" and param.shape[0] >= start + encoding.n_parameters,
           f"accumulates {encoding.describe()}'s parameter gradient from {x} and {delta} into elements {start} + "
           f"{encoding.n_parameters} of the {param.role} {param.name} of shape {param.shape}")
    return None


def _product(operands, attrs, declared):
    matrix, x, *bias = operands
    rows, cols = matrix.shape[::-1] if attrs.get("transpose") else matrix.shape
    _check(matrix.role == "matrix" and x == VecType("f32", cols)
           and all(b.role == "vector" and b.shape == (rows,) for b in bias),
           f"multiplies a {rows}x{cols} matrix with {x}" + (f" and adds {bias[0].shape}" if bias else ""))
    return VecType("f32", rows)


# ----- numpy meaning of the instructions that are not elementwise --------------------------------------------------


def _load(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    data = operands[0]
    if data.ndim == 2 and data.shape[0] == batch.samples:
        return data.reshape(batch.samples, -1)
    return np.broadcast_to(data.reshape(1, -1), (batch.samples, data.size))


def _constant(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    return np.full((batch.samples, instr.type.size), instr.attrs["value"],
                   np.float32 if instr.type.dtype == "f32" else bool)


def _gemv(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    w, x, *bias = operands
    result = x @ (w if instr.attrs.get("transpose") else w.T)
    return result + bias[0] if bias else result


def _outer_sum(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    delta, x, _ = operands
    return delta.T @ x


def _encode(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    x, *params = operands
    return instr.attrs["encoding"].forward(x, params[0] if params else np.zeros(0, np.float32))


def _encoding_sum(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    x, delta, _ = operands
    encoding = instr.attrs["encoding"]
    table = np.zeros(encoding.n_parameters, np.float32)
    gradient = np.zeros(instr.attrs["start"] + encoding.n_parameters, np.float32)
    gradient[instr.attrs["start"]:] = encoding.backward(x, table, delta, input_gradient=False)[0]
    return gradient


def _gather(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    return np.stack([operands[s][:, c] for s, c in instr.attrs["index"]], axis=1)


def _reduction(reduce: Callable) -> Callable:
    return lambda instr, operands, batch: reduce(operands[0].reshape(batch.samples, -1, instr.attrs["group"]), axis=2)


def _cast(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    return (operands[0] != 0) if instr.type.dtype == "bool" else operands[0].astype(np.float32)


def _uniform(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    return np.full((batch.samples, instr.type.size), batch.uniforms[instr.attrs["name"]], np.float32)


def _sample_mask(instr: Instr, operands: list, batch: Batch) -> np.ndarray:
    return np.ones((batch.samples, instr.type.size), np.float32)  # the interpreter runs no padding samples


# ----- text forms --------------------------------------------------------------------------------------------------


def _gather_text(instr: Instr, program: KernelProgram) -> str:
    """Runs of consecutive components print as %src[a:b], single ones as %src[a]."""
    parts, index = [], list(instr.attrs["index"])
    i = 0
    while i < len(index):
        src, start = index[i]
        j = i
        while j + 1 < len(index) and index[j + 1] == (src, index[j][1] + 1):
            j += 1
        name = "%" + instr.args[src]
        parts.append(f"{name}[{start}]" if j == i else f"{name}[{start}:{index[j][1] + 1}]")
        i = j + 1
    return "gather " + ", ".join(parts)


def _load_text(instr: Instr, program: KernelProgram) -> str:
    (param,) = instr.args
    return f"load %{param}[:, %i]" if program.param(param).role == "input" else f"load %{param}[]"


def _store_text(instr: Instr, program: KernelProgram) -> str:
    value, param = instr.args
    a = instr.attrs
    if "layout" in a:
        return f"store %{value}, %{param}[{a['start']}:+{a['width']}, %i] {{layout={a['layout']}}}"
    return f"store %{value}, %{param}[:, %i]"


def _gemv_text(instr: Instr, program: KernelProgram) -> str:
    name = "gemv.t" if instr.attrs.get("transpose") else "gemv.n"
    return f"{name} " + ", ".join("%" + a for a in instr.args)


def _encode_text(instr: Instr, program: KernelProgram) -> str:
    return "encode " + ", ".join("%" + a for a in instr.args) + f" {{encoding={instr.attrs['encoding'].describe()}}}"


def _reduce_text(instr: Instr, program: KernelProgram) -> str:
    return f"{instr.op} %{instr.args[0]} {{group={instr.attrs['group']}}}"


# ----- the table ---------------------------------------------------------------------------------------------------

_declare("load", (PARAM,), _loaded, _load, elementwise=False, text=_load_text)
_declare("store", (VALUE, OUTPUT), _stored, lambda instr, operands, batch: operands[0], elementwise=False,
         text=_store_text)
_declare("constant", (), _declared("f32", "bool"), _constant, elementwise=False,
         text=lambda instr, program: f"constant {float(instr.attrs['value'])!r}")
_declare("uniform", (), _declared("f32"), _uniform, elementwise=False,
         text=lambda instr, program: f"uniform %{instr.attrs['name']}")
_declare("sample_mask", (), _declared("f32"), _sample_mask, elementwise=False)
_declare("gemv", (PARAM, VALUE, PARAM), _product, _gemv, elementwise=False, optional=1, text=_gemv_text)
# Weight-gradient sums over the samples, accumulated into a parameter of role "gradient" (the outer-product method):
# the sum of delta x input^T (rows x cols), and the sum of delta (a bias).
_declare("accumulate_outer", (VALUE, VALUE, OUTPUT), _accumulated, _outer_sum, elementwise=False)
_declare("accumulate_sum", (VALUE, OUTPUT), _accumulated, lambda instr, operands, batch: operands[0].sum(axis=0),
         elementwise=False)
# An input encoding (`coopnn.graph.encodings`) of one sample, reading its parameter vector (a grid's tables) when it
# has one; every target emits it through `coopnn.shaders.targets.encodings`.
_declare("encode", (VALUE, PARAM), _encoded, _encode, elementwise=False, optional=1, text=_encode_text)
# The gradient of an encoding's parameter vector (a grid's tables) from the gradient in its outputs, added into
# elements `start` on of a parameter of role "table_gradient" (float32 atomics: samples share table entries).
_declare("accumulate_encoding", (VALUE, VALUE, OUTPUT), _encoding_accumulated, _encoding_sum, elementwise=False,
         text=lambda instr, program: "accumulate_encoding " + ", ".join("%" + a for a in instr.args)
         + f" {{start={instr.attrs['start']}}}")
_declare("gather", (VALUE,), _gathered, _gather, elementwise=False, variadic=True, text=_gather_text)
_declare("reduce_sum", (VALUE,), _reduced, _reduction(np.sum), elementwise=False, text=_reduce_text)
_declare("reduce_max", (VALUE,), _reduced, _reduction(np.max), elementwise=False, text=_reduce_text)
_declare("cast", (VALUE,), _converted, _cast, elementwise=False)
_declare("select", (VALUE, VALUE, VALUE), _choice, np.where)

for _name, _fn in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
                   "min": np.minimum, "pow": np.power}.items():
    _declare(_name, (VALUE, VALUE), _same("f32"), _fn)
for _name, _fn in {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.items():
    _declare(_name, (VALUE, VALUE), _same("bool"), _fn)
_declare("not", (VALUE,), _same("bool"), np.logical_not)
for _name, _fn in {"cmp.lt": np.less, "cmp.le": np.less_equal, "cmp.gt": np.greater, "cmp.ge": np.greater_equal,
                   "cmp.eq": np.equal}.items():
    _declare(_name, (VALUE, VALUE), _comparison, _fn)

# The unary float instructions and their derivatives, each from the input x and the output y.
_UNARY: dict[str, tuple[Callable, Rule | None]] = {
    "abs": (np.abs, lambda k, x, y: k.unary("sign", x)),  # sign(0) = 0: the slope at the kink is 0
    "neg": (np.negative, lambda k, x, y: k.splat(-1.0, k.type_of(x).size)),
    "exp": (np.exp, lambda k, x, y: y),
    "log": (np.log, lambda k, x, y: k.scalar("div", x, 1.0, left=True)),
    "sin": (np.sin, lambda k, x, y: k.unary("cos", x)),
    "cos": (np.cos, lambda k, x, y: k.unary("neg", k.unary("sin", x))),
    "tanh": (np.tanh, lambda k, x, y: k.scalar("sub", k.binary("mul", y, y), 1.0, left=True)),
    "sqrt": (np.sqrt, lambda k, x, y: k.scalar("div", y, 0.5, left=True)),
    "floor": (np.floor, None),
    "ceil": (np.ceil, None),
    "sign": (np.sign, None),
    # 1 where x > 0, else 0 (NaN: 0): ReLU's derivative as one instruction, which the coopvec target runs on whole
    # vectors, where a comparison and a select go component by component
    "positive": (lambda x: np.greater(x, 0).astype(x.dtype), None),
}
for _name, (_fn, _derivative) in _UNARY.items():
    _declare(_name, (VALUE,), _same("f32"), _fn, derivative=_derivative)
