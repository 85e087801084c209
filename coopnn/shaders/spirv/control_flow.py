"""Structured control flow: selections (OpSelectionMerge) and loops (OpLoopMerge) as context managers.

Blocks are placed in the order SPIR-V asks for (a header before its constructs, a merge block after them); header
blocks are filled when their construct ends, once every branch target and loop-carried value is known.

    with fn.if_(in_bounds) as branch:        # header: OpSelectionMerge + OpBranchConditional
        ...                                   # then-arm
        branch.else_()                        # optional else-arm
        ...
    with fn.loop() as lp:                     # header: OpPhi..., OpLoopMerge, OpBranch to the condition block
        i = lp.phi(u32, zero)
        lp.while_(fn.emit("OpULessThan", boolean, i, n))
        ...                                   # body
        lp.continue_()                        # continue target
        lp.set_next(i, fn.emit("OpIAdd", u32, i, one))
"""

from __future__ import annotations

from contextlib import contextmanager

from coopnn.shaders.spirv.errors import SpirvBuildError
from coopnn.shaders.spirv.instruction import Id

LESS_THAN = {True: "OpSLessThan", False: "OpULessThan"}  # by signedness of the counter


class Selection:
    """An if (and optional else) construct; see the module docstring."""

    def __init__(self, function, condition: Id, control: str | tuple):
        self.function = function
        self.condition = condition
        self.control = control
        self.else_block = None

    def __enter__(self) -> Selection:
        fn = self.function
        self.header = fn.current_block()
        self.then_block = fn.new_block()
        self.merge_block = fn.new_block()
        fn.switch_to(self.then_block)
        return self

    def _close_arm(self) -> None:
        if not self.function.current.terminated:
            self.function.emit("OpBranch", self.merge_block.label)

    def else_(self) -> None:
        """Ends the then-arm and starts the else-arm."""
        if self.else_block is not None:
            raise SpirvBuildError("this selection already has an else-arm")
        self._close_arm()
        self.else_block = self.function.new_block()
        self.function.start_block(self.else_block)

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if exc_type is not None:
            return False
        fn, encode = self.function, self.function.module._encode
        self._close_arm()
        false_target = (self.else_block or self.merge_block).label
        fn.append(self.header, encode("OpSelectionMerge", (self.merge_block.label, self.control)))
        fn.append(self.header, encode("OpBranchConditional", (self.condition, self.then_block.label, false_target)))
        fn.start_block(self.merge_block)
        return False


class Loop:
    """A loop construct with loop-carried values (OpPhi in the header); see the module docstring."""

    def __init__(self, function, control: str | tuple):
        self.function = function
        self.control = control
        self.carried: dict[Id, list] = {}  # phi result -> [type, initial value, next value]

    def __enter__(self) -> Loop:
        fn = self.function
        self.preheader = fn.current_block()
        self.header = fn.new_block()
        self.body = fn.new_block()
        self.continue_target = fn.new_block()
        self.merge_block = fn.new_block()
        fn.emit("OpBranch", self.header.label)
        fn.start_block(self.header)
        self.first = fn.new_block()
        fn.switch_to(self.first)
        return self

    def phi(self, type_id: Id, initial: Id) -> Id:
        """A value carried around the loop: `initial` on entry, then what `set_next` gives."""
        value = Id()
        self.carried[value] = [type_id, initial, None]
        self.function.module.value_types[value] = type_id
        return value

    def set_next(self, value: Id, next_value: Id) -> None:
        if value not in self.carried:
            raise SpirvBuildError(f"{value!r} is not a phi of this loop")
        self.carried[value][2] = next_value

    def while_(self, condition: Id) -> None:
        """Leaves the loop unless `condition` holds; the body starts here."""
        self.function.emit("OpBranchConditional", condition, self.body.label, self.merge_block.label)
        self.function.start_block(self.body)

    def continue_(self) -> None:
        """Ends the body and starts the continue target (where the loop's increments belong)."""
        fn = self.function
        if fn.current is self.continue_target:
            raise SpirvBuildError("the loop is already in its continue target")
        if not fn.current.terminated:
            fn.emit("OpBranch", self.continue_target.label)
        fn.start_block(self.continue_target)

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if exc_type is not None:
            return False
        fn, encode = self.function, self.function.module._encode
        if all(block is not self.continue_target for block in fn.blocks):
            self.continue_()
        back_edge = fn.current_block()
        fn.emit("OpBranch", self.header.label)
        for value, (type_id, initial, next_value) in self.carried.items():
            if next_value is None:
                raise SpirvBuildError(f"loop phi {value!r} has no next value: call Loop.set_next")
            incoming = ((initial, self.preheader.label), (next_value, back_edge.label))
            fn.append(self.header, encode("OpPhi", (type_id, *incoming), result=value))
        fn.append(self.header, encode("OpLoopMerge", (self.merge_block.label, self.continue_target.label,
                                                       self.control)))
        fn.append(self.header, encode("OpBranch", (self.first.label,)))
        fn.start_block(self.merge_block)
        return False


@contextmanager
def for_range(function, start: Id, stop: Id, step: Id | None, control: str | tuple):
    """A counted loop over an integer counter of start's type, yielding the counter; see Function.for_range."""
    module = function.module
    counter_type = module.type_of(start)
    counter_format = module.number_format(counter_type)
    if counter_format.is_float:
        raise SpirvBuildError("for_range needs an integer counter")
    step = step if step is not None else module.constant(counter_type, 1)
    with Loop(function, control) as loop:
        counter = loop.phi(counter_type, start)
        loop.while_(function.emit(LESS_THAN[counter_format.signed], module.type_bool(), counter, stop))
        yield counter
        loop.continue_()
        loop.set_next(counter, function.emit("OpIAdd", counter_type, counter, step))
