"""Readers of the instructions with regions: foreach, foreach_tile, parallel, for, if, yield."""

from __future__ import annotations

from coopnn.tl import ast
from coopnn.tl.parse_base import Opcode, finish, fixed_operands, local_list, parenthesized_locals, reads, region
from coopnn.tl.parse_types import any_type, dictionary
from coopnn.tl.scanner import Scanner


def _ranges(s: Scanner):
    variables = parenthesized_locals(s)
    s.expect("=")
    starts = parenthesized_locals(s)
    s.expect(",")
    stops = parenthesized_locals(s)
    return variables, starts, stops


@reads("foreach")
def _foreach(op: Opcode, s: Scanner):
    op.results_count(0)
    variables, starts, stops = _ranges(s)
    return finish(op, ast.Foreach, variables=variables, starts=starts, stops=stops, body=region(s, op.fresh))


@reads("foreach_tile")
def _foreach_tile(op: Opcode, s: Scanner):
    op.results_count(0)
    variables, starts, stops = _ranges(s)
    s.expect_word("as")
    sizes = parenthesized_locals(s)
    s.expect("<=")
    s.expect("(")
    tile_shape = [s.integer("a tile size")]
    while s.eat(","):
        tile_shape.append(s.integer("a tile size"))
    s.expect(")")
    return finish(op, ast.ForeachTile, variables=variables, starts=starts, stops=stops, sizes=sizes,
                  tile_shape=tuple(tile_shape), body=region(s, op.fresh))


@reads("parallel")
def _parallel(op: Opcode, s: Scanner):
    op.results_count(0)
    return finish(op, ast.Parallel, body=region(s, op.fresh))


def _type_list(s: Scanner) -> tuple:
    s.expect("(")
    types = [any_type(s)]
    while s.eat(","):
        types.append(any_type(s))
    s.expect(")")
    return tuple(types)


@reads("for")
def _for(op: Opcode, s: Scanner):
    variable = s.local()
    s.expect("=")
    start, stop = fixed_operands(s, 2)
    step = s.local() if s.eat(",") else None
    carried, initial, types = [], [], ()
    if s.eat_word("init"):
        s.expect("(")
        while True:
            carried.append(s.local())
            s.expect("=")
            initial.append(s.local())
            if not s.eat(","):
                break
        s.expect(")")
        s.expect("->")
        types = _type_list(s)
    body = region(s, op.fresh)
    attributes = dictionary(s) if s.eat_word("attributes") else ast.DictAttr()
    return finish(op, ast.For, variable=variable, start=start, stop=stop, step=step, carried=tuple(carried),
                  initial=tuple(initial), types=types, body=body, attributes=attributes)


@reads("if")
def _if(op: Opcode, s: Scanner):
    condition = s.local()
    types = _type_list(s) if s.eat("->") else ()
    then = region(s, op.fresh)
    otherwise = region(s, op.fresh) if s.eat_word("else") else None
    return finish(op, ast.If, condition=condition, types=types, then=then, otherwise=otherwise)


@reads("yield")
def _yield(op: Opcode, s: Scanner):
    op.results_count(0)
    s.expect("(")
    values = () if s.peek(")") else local_list(s)
    s.expect(")")
    return finish(op, ast.Yield, values=values)
