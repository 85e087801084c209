"""Emitting the instructions with regions. `parallel` runs its region once per invocation; `foreach` walks its
iteration space linearly (first mode fastest), iteration k on invocation k mod the work-group size; `foreach_tile`
gives tile t to subgroup t mod the number of subgroups. A barrier follows each SPMD region, as tinytc inserts them in
collective regions. `for` and `if` keep their values in function variables."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.codegen.emit_scalar import convert, work_item_length
from coopnn.tl.codegen.emitter import CoopValue, Emitter, Typed, emits
from coopnn.tl.types import INDEX, CoopMatrixType, ScalarType


@emits(ast.Parallel)
def _parallel(e: Emitter, i: ast.Parallel):
    e.run_region(i.body)
    e.barrier()
    return ()


def _as_index(e: Emitter, value: Typed):
    return convert(e, value, INDEX)


def _ranges(e: Emitter, i):
    starts = [e.value(v) for v in i.starts]
    stops = [e.value(v) for v in i.stops]
    zero = e.index(0)
    sizes = [e.fn.ext_inst(e.i64, "SMax", e.fn.ops.int_sub(e.i64, _as_index(e, b), _as_index(e, a)), zero)
             for a, b in zip(starts, stops)]
    return starts, sizes


def _typed(e: Emitter, value, t: ScalarType) -> Typed:
    return Typed(value if t == INDEX else convert(e, Typed(value, INDEX), t), t)


@emits(ast.Foreach)
def _foreach(e: Emitter, i: ast.Foreach):
    starts, sizes = _ranges(e, i)
    total = e.index_product(sizes)
    with e.fn.for_range(e.local_index(), total, e.index(e.launch.work_items)) as linear:
        defines = {}
        for variable, start, position in zip(i.variables, starts, e.index_positions(linear, sizes)):
            value = e.fn.ops.int_add(e.i64, _as_index(e, start), position)
            defines[variable.name] = _typed(e, value, start.type)
        e.run_region(i.body, defines)
    e.barrier()
    return ()


@emits(ast.ForeachTile)
def _foreach_tile(e: Emitter, i: ast.ForeachTile):
    starts, sizes = _ranges(e, i)
    shapes = [e.index(t) for t in i.tile_shape]
    counts = [e.fn.ops.int_div(e.i64, e.fn.ops.int_add(e.i64, size, e.index(t - 1)), shape)
              for size, shape, t in zip(sizes, shapes, i.tile_shape)]
    subgroups = e.index(e.launch.work_items // e.launch.subgroup_size)
    with e.fn.for_range(e.widen(e.builtin("SubgroupId")), e.index_product(counts), subgroups) as tile:
        defines = {}
        for k, position in enumerate(e.index_positions(tile, counts)):
            start = e.value(i.starts[k])
            offset = e.fn.ops.int_add(e.i64, _as_index(e, start), e.fn.ops.int_mul(e.i64, position, shapes[k]))
            remaining = e.fn.ops.int_sub(e.i64, _as_index(e, e.value(i.stops[k])), offset)
            defines[i.variables[k].name] = _typed(e, offset, start.type)
            defines[i.sizes[k].name] = _typed(e, e.fn.ext_inst(e.i64, "SMin", shapes[k], remaining), start.type)
        e.run_region(i.body, defines)
    e.barrier()
    return ()


def _variable(e: Emitter, t):
    """A function variable holding a value of `t` (a cooperative matrix as an array of its work-item vector)."""
    if isinstance(t, CoopMatrixType):
        return e.fn.variable(e.m.type_array(e.value_type(t.component), work_item_length(e, t)))
    return e.fn.variable(e.value_type(t))


def _store(e: Emitter, variable, t, value) -> None:
    if isinstance(t, CoopMatrixType):
        array = e.m.type_array(e.value_type(t.component), work_item_length(e, t))
        e.fn.ops.store(variable, e.fn.ops.construct(array, *value.elements))
    else:
        e.fn.ops.store(variable, value.id)


def _load(e: Emitter, variable, t):
    if isinstance(t, CoopMatrixType):
        length = work_item_length(e, t)
        array = e.fn.ops.load(e.m.type_array(e.value_type(t.component), length), variable)
        component = e.value_type(t.component)
        return CoopValue(t, tuple(e.fn.ops.extract(component, array, k) for k in range(length)))
    return Typed(e.fn.ops.load(e.value_type(t), variable), t)


@emits(ast.For)
def _for(e: Emitter, i: ast.For):
    types = i.types
    start, stop = e.value(i.start), e.value(i.stop)
    counter_type = e.value_type(start.type)
    step = e.value(i.step).id if i.step is not None else e.m.constant(counter_type, 1)
    counter = e.fn.variable(counter_type)
    e.fn.ops.store(counter, start.id)
    carried = [_variable(e, t) for t in types]
    for variable, initial, t in zip(carried, i.initial, types):
        _store(e, variable, t, e.value(initial))
    with e.fn.loop() as loop:
        current = e.fn.ops.load(counter_type, counter)
        loop.while_(e.fn.ops.int_less(e.bool, current, stop.id))
        defines = {i.variable.name: Typed(current, start.type)}
        for name, variable, t in zip(i.carried, carried, types):
            defines[name.name] = _load(e, variable, t)
        yielded = e.run_region(i.body, defines) or []
        for variable, value, t in zip(carried, yielded, types):
            _store(e, variable, t, value)
        loop.continue_()
        e.fn.ops.store(counter, e.fn.ops.int_add(counter_type, current, step))
    return tuple(_load(e, v, t) for v, t in zip(carried, types))[:len(i.results)]


@emits(ast.If)
def _if(e: Emitter, i: ast.If):
    types = i.types
    results = [_variable(e, t) for t in types]

    def arm(region):
        for variable, value, t in zip(results, e.run_region(region) or [], types):
            _store(e, variable, t, value)

    with e.fn.if_(e.value(i.condition).id) as branch:
        arm(i.then)
        if i.otherwise is not None:
            branch.else_()
            arm(i.otherwise)
    return tuple(_load(e, v, t) for v, t in zip(results, types))
