"""The optimizer step as one compute shader that also ends the training step: Adam or SGD over the flat fp32 master
weights (layout.py's order), in float32 and in the order of operations of `coopnn.train.optim`, so the device and
the numpy optimizer agree to rounding; then, in the last workgroup to finish, the step's end
(`coopnn.shaders.training.step_state.end_step_in_last_group`: the loss history and the state words).

The gradient is read, one invocation per element, or with `adds_partials` summed from the step's partial gradients
(`coopnn.shaders.training.gradients.add_partials`: SUM_COLUMNS elements a workgroup, its first SUM_COLUMNS
invocations updating them), in the order `partial_sum_shader` adds them, so either way the update is the same. A
session adds partials here where the kernels that write them flag non-finite ones in the status, which the update
must know before it starts (`coopnn.shaders.training.coopmat_gradients`); the kernel still flags a non-finite sum,
which the step's end records. One dispatch in place of the partial sum, the optimizer and the step end saves a
dispatch and a barrier a step (bench/results/nvidia-h100-80gb-hbm3-2026-11-27-tiled-step-ablation.md).

Bindings: 0 master weights (f32, read-write), 1 gradient or partial gradients (f32), 2 the training state words (u32,
`TRAINING_STATE_FIELDS`; with `skip_nonfinite`, a nonzero status skips the whole update and nothing is written),
3 working copy (f32 or f16, the updated master rounded to nearest), then the optimizer's slots in `Optimizer.slots`
order (Adam: 4 m, 5 v; SGD: 4 momentum), f32 read-write, the schedule (f32, `SCHEDULE_WORDS` per update), the
loss tiles' sums (f32) and the loss history (f32) of the step's end; with `blocked`, last, where each element goes in
a blocked copy (u32, `ParameterLayout.block_index`) and that copy (of the working copy's type), which the element's
rounded value is written to as well. Push: the optimizer's (`push_constants`), `terms` (loss tiles' sums) and with
`adds_partials` `chunks`, with `decay_limit` `decay_count` (weight decay applies to the elements before it: the
layers', not a trained grid's table after them); dispatched as `optimizer_groups` says.

Every hyperparameter is a push constant and every per-update value a row of the schedule
(`coopnn.train.gpu.optimizer_values` computes both), so changing the learning rate recompiles nothing. Update t (the
state's `steps` + 1, counted on the device, where skipped steps leave it unchanged) reads row (t - 1) mod
`SCHEDULE_ROWS`, which the host fills before a run of steps: steps recorded back to back need no host in between,
and a run is recorded once. The gradient is multiplied by `gradient_scale / loss_scale`, the loss
scale being the state's (a power of two, so the quotient is exact). Constants numpy computes in float64 before they
meet float32 arrays (1 - beta1, the bias corrections, 1 - dampening) are folded on the host likewise, rather than
recomputed in float32 on the device.
"""

from __future__ import annotations

from coopnn.shaders.spirv.ops import Ops
from coopnn.shaders.targets.base import FP16_FEATURES, Binary, ShaderFrame, push_constant_block
from coopnn.shaders.training.gradients import (FEATURES as GRADIENT_FEATURES, SUM_COLUMNS, SUM_LANES, add_partials,
                                               flag_nonfinite)
from coopnn.shaders.training.shader import finish, load, storage_buffer, store
from coopnn.shaders.training.step_state import (LOSS_SCALE, ORDERED, REDUCE_WIDTH, STATUS, STEPS,
                                                end_step_in_last_group)

MASTER, GRADIENT, STATE, WORKING, FIRST_SLOT = range(5)
# the per-parameter state of each optimizer, in binding order: `Optimizer.slots` of `coopnn.train.optim`
SLOTS = {"adam": ("m", "v"), "sgd": ("momentum",)}
# what each row of the schedule holds: Adam's bias-corrected step size and sqrt(1 - beta2^t); for SGD 1.0 on the
# first update (numpy seeds the momentum buffer with the gradient then) and 0.0 after
SCHEDULE = {"adam": ("step_size", "bias_correction2_sqrt"), "sgd": ("first", "unused")}
SCHEDULE_WORDS = 2
SCHEDULE_ROWS = 1024
WORKING_DTYPES = ("f32", "f16")
_HEAD = (("count", "u32"), ("gradient_scale", "f32"), ("weight_decay", "f32"))
_SETTINGS = {
    "adam": (("one_minus_beta1", "f32"), ("beta2", "f32"), ("one_minus_beta2", "f32"), ("eps", "f32")),
    "sgd": (("lr", "f32"), ("momentum", "f32"), ("one_minus_dampening", "f32"), ("nesterov", "u32")),
}
if SUM_COLUMNS * SUM_LANES != REDUCE_WIDTH:
    raise AssertionError("the partial sums and the step's end share the optimizer's workgroups")


def push_constants(kind: str, adds_partials: bool, decay_limit: bool = False):
    """The optimizer kernel's push constants for optimizer `kind`."""
    return push_constant_block(*_HEAD, *_SETTINGS[kind], ("terms", "u32"),
                               *((("chunks", "u32"),) if adds_partials else ()),
                               *((("decay_count", "u32"),) if decay_limit else ()))


def optimizer_groups(count: int, adds_partials: bool) -> int:
    """Workgroups of the optimizer kernel over `count` elements."""
    return -(-count // (SUM_COLUMNS if adds_partials else REDUCE_WIDTH))


class _Step:
    """Emits one optimizer step into a frame of REDUCE_WIDTH-invocation workgroups: `self.i` the element an invocation
    updates where `self.updates`, `self.gradient()` its gradient there."""

    def __init__(self, kind: str, working_dtype: str, skip_nonfinite: bool, adds_partials: bool, blocked: bool,
                 decay_limit: bool = False):
        self.frame = frame = ShaderFrame((), 32, REDUCE_WIDTH,
                                         push_constants=push_constants(kind, adds_partials, decay_limit),
                                         bounds_check=False)
        self.decay_limit = decay_limit
        self.fn, self.m, self.f32 = frame.main, frame.module, frame.f32
        self.narrow = working_dtype == "f16"
        self.working = self.m.type_float(16) if self.narrow else self.f32
        storage_buffer(frame, MASTER, self.f32, writable=True, name="master")
        storage_buffer(frame, GRADIENT, self.f32, writable=False, name="partials" if adds_partials else "gradient")
        storage_buffer(frame, STATE, frame.u32, writable=True, name="state")
        storage_buffer(frame, WORKING, self.working, writable=True, name="working")
        for offset, slot in enumerate(SLOTS[kind]):
            storage_buffer(frame, FIRST_SLOT + offset, self.f32, writable=True, name=slot)
        self.schedule_binding = FIRST_SLOT + len(SLOTS[kind])
        storage_buffer(frame, self.schedule_binding, self.f32, writable=False, name="schedule")
        self.sums_binding, self.history_binding = self.schedule_binding + 1, self.schedule_binding + 2
        storage_buffer(frame, self.sums_binding, self.f32, writable=False, name="loss_sums")
        storage_buffer(frame, self.history_binding, self.f32, writable=True, name="history")
        self.blocked = blocked
        self.block_index_binding, self.blocked_binding = self.history_binding + 1, self.history_binding + 2
        self.bindings = (self.blocked_binding if blocked else self.history_binding) + 1
        if blocked:
            storage_buffer(frame, self.block_index_binding, frame.u32, writable=False, name="block_index")
            storage_buffer(frame, self.blocked_binding, self.working, writable=True, name="blocked")
        u32, fn = frame.u32, self.fn
        self.local = fn.ops.uint_mod(u32, frame.sample, frame.uint(REDUCE_WIDTH))
        count = frame.push_value("count")
        if adds_partials:
            self.i, self.updates, total = add_partials(frame, GRADIENT)
            with fn.if_(self.updates):
                flag_nonfinite(frame, total, STATE)
            self.gradient = lambda: total
        else:
            self.i = frame.sample
            self.updates = fn.ops.uint_less(frame.bool, self.i, count)
            self.gradient = lambda: load(frame, GRADIENT, self.i)
        if skip_nonfinite:
            status = load(frame, STATE, frame.uint(STATUS), u32, ORDERED)
            self.updates = fn.ops.logical_and(frame.bool, self.updates,
                                              fn.ops.int_equal(frame.bool, status, frame.zero))
        # Loaded here, where they dominate every later use.
        steps = load(frame, STATE, frame.uint(STEPS), u32, ORDERED)
        row = fn.ops.int_mul(u32, fn.ops.uint_mod(u32, steps, frame.uint(SCHEDULE_ROWS)),
                             frame.uint(SCHEDULE_WORDS))
        self.scheduled = {name: load(frame, self.schedule_binding, fn.ops.int_add(u32, row, frame.uint(i)))
                          for i, name in enumerate(SCHEDULE[kind])}
        loss_scale = fn.ops.bitcast(self.f32,
                                    load(frame, STATE, frame.uint(LOSS_SCALE), u32, ORDERED))
        self.gradient_scale = self.op(Ops.float_div, self.push("gradient_scale"), loss_scale)

    def push(self, name: str):
        return self.frame.push_value(name)

    def op(self, instruction, *operands):
        result = instruction(self.fn.ops, self.f32, *operands)
        # A fused multiply-add would round once where numpy rounds twice.
        self.m.decorate(result, "NoContraction")
        return result

    def flag(self, name: str):
        """Whether the u32 push constant `name` is nonzero."""
        return self.fn.ops.int_not_equal(self.frame.bool, self.push(name), self.frame.zero)

    def nonzero(self, name: str):
        return self.fn.ops.float_not_equal(self.frame.bool, self.push(name), self.m.constant(self.f32, 0.0))

    def decayed_gradient(self, master):
        """The scaled gradient plus weight_decay * master, the decay term only when weight_decay is set (as numpy:
        adding 0 * master would turn an infinite master into NaN)."""
        gradient = self.op(Ops.float_mul, self.gradient(), self.gradient_scale)
        decayed = self.op(Ops.float_add, gradient, self.op(Ops.float_mul, self.push("weight_decay"), master))
        decays = self.nonzero("weight_decay")
        if self.decay_limit:
            ops = Ops(self.fn)
            decays = ops.logical_and(self.frame.bool, decays,
                                     ops.uint_less(self.frame.bool, self.i, self.push("decay_count")))
        return self.fn.ops.select(self.f32, decays, decayed, gradient)

    def adam(self, master, gradient):
        m_slot, v_slot = FIRST_SLOT, FIRST_SLOT + 1
        m = load(self.frame, m_slot, self.i)
        m = self.op(Ops.float_add, m,
                    self.op(Ops.float_mul, self.push("one_minus_beta1"), self.op(Ops.float_sub, gradient, m)))
        v = self.op(Ops.float_mul, load(self.frame, v_slot, self.i), self.push("beta2"))
        v = self.op(Ops.float_add, v,
                    self.op(Ops.float_mul, self.op(Ops.float_mul, self.push("one_minus_beta2"), gradient), gradient))
        store(self.frame, m_slot, self.i, m)
        store(self.frame, v_slot, self.i, v)
        root = self.fn.ext_inst(self.f32, "Sqrt", v)
        denominator = self.op(Ops.float_add, self.op(Ops.float_div, root, self.scheduled["bias_correction2_sqrt"]),
                              self.push("eps"))
        step_size = self.scheduled["step_size"]
        return self.op(Ops.float_sub, master, self.op(Ops.float_div, self.op(Ops.float_mul, step_size, m), denominator))

    def sgd(self, master, gradient):
        # Pushed values are loaded where they dominate every later use, before the momentum branch.
        momentum, nesterov = self.push("momentum"), self.flag("nesterov")
        seed = self.fn.ops.float_not_equal(self.frame.bool, self.scheduled["first"],
                                           self.m.constant(self.f32, 0.0))
        one_minus_dampening = self.push("one_minus_dampening")
        direction = self.fn.variable(self.f32, name="direction")
        self.fn.ops.store(direction, gradient)
        # Without momentum numpy keeps no buffer, so the slot is left untouched.
        with self.fn.if_(self.nonzero("momentum")):
            kept = self.op(Ops.float_add, self.op(Ops.float_mul, load(self.frame, FIRST_SLOT, self.i), momentum),
                           self.op(Ops.float_mul, one_minus_dampening, gradient))
            buffer = self.fn.ops.select(self.f32, seed, gradient, kept)
            store(self.frame, FIRST_SLOT, self.i, buffer)
            ahead = self.op(Ops.float_add, gradient, self.op(Ops.float_mul, momentum, buffer))
            self.fn.ops.store(direction, self.fn.ops.select(self.f32, nesterov, ahead, buffer))
        step = self.op(Ops.float_mul, self.push("lr"), self.fn.ops.load(self.f32, direction))
        return self.op(Ops.float_sub, master, step)

    def working_copy(self, master) -> None:
        rounded = master
        if self.narrow:
            rounded = self.fn.ops.float_convert(self.working, master)
            # Without the decoration the rounding of a narrowing conversion is the implementation's choice.
            self.m.decorate(rounded, "FPRoundingMode", "RTE")
        store(self.frame, WORKING, self.i, rounded, self.working)
        if self.blocked:
            store(self.frame, self.blocked_binding, load(self.frame, self.block_index_binding, self.i, self.frame.u32),
                  rounded, self.working)


def optimizer_shader(kind: str, working_dtype: str, skip_nonfinite: bool, growth_interval: int = 0,
                     adds_partials: bool = False, blocked: bool = False, decay_limit: bool = False) -> Binary:
    """The step of optimizer `kind` ("adam" or "sgd") writing a working copy of `working_dtype` ("f32" or "f16"), and
    with `blocked` a blocked copy too, reading the gradient or adding partial gradients (`adds_partials`), then
    ending the training step (with `skip_nonfinite`, dynamic loss scaling doubling after `growth_interval` good
    steps); with `decay_limit`, weight decay only on the first `decay_count` elements (the layers', not a grid's
    table)."""
    if kind not in _SETTINGS:
        raise ValueError(f"optimizer kind must be one of {sorted(_SETTINGS)}, not {kind!r}")
    if working_dtype not in WORKING_DTYPES:
        raise ValueError(f"working_dtype must be one of {list(WORKING_DTYPES)}, not {working_dtype!r}")
    step = _Step(kind, working_dtype, skip_nonfinite, adds_partials, blocked, decay_limit)
    with step.fn.if_(step.updates):
        master = load(step.frame, MASTER, step.i)
        updated = getattr(step, kind)(master, step.decayed_gradient(master))
        store(step.frame, MASTER, step.i, updated)
        step.working_copy(updated)
    end_step_in_last_group(step.frame, step.local, (step.sums_binding, STATE, step.history_binding),
                           step.frame.push_value("terms"), skip_nonfinite, growth_interval)
    name = (f"{kind}_{working_dtype}" + ("_partials" if adds_partials else "") + ("_blocked" if blocked else "") + ("_decay_limit" if decay_limit else "")
            + (f"_skip_nonfinite_{growth_interval}" if skip_nonfinite else ""))
    return finish(name, step.frame, step.bindings,
                  GRADIENT_FEATURES | (FP16_FEATURES if working_dtype == "f16" else frozenset()))
