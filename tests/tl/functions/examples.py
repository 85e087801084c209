"""Model functions the tests use (coopnn.tl.functions), with hand-written numpy forms, and the family members made
from them: every test iterating over the activations or the losses makes the tensor-language one with these."""

from __future__ import annotations

import numpy as np

from coopnn import tl
from coopnn.graph.ir import Activation, Op
from coopnn.train.losses import Loss, get_loss

# max(x, 0) + log(1 + exp(-|x|)), and its derivative, the logistic function 1 / (1 + exp(-x)), as a rule of its own:
# the bodies take their argument as `{x}`, so that the loss below applies them to a difference
_SOFTPLUS_BODY = """    %zero = constant 0.0 : f32
    %one = constant 1.0 : f32
    %positive = max {x}, %zero : f32
    %magnitude = abs {x} : f32
    %negative = neg %magnitude : f32
    %e = exp %negative : f32
    %sum = add %e, %one : f32
    %tail = log %sum : f32
    %y = add %positive, %tail : f32
    yield (%y)
"""
_LOGISTIC_BODY = """    %one = constant 1.0 : f32
    %minus = neg {x} : f32
    %e = exp %minus : f32
    %sum = add %e, %one : f32
    %y = div %one, %sum : f32
    yield (%y)
"""
SOFTPLUS = (f"func @softplus(%x: f32) -> (f32) {{\n{_SOFTPLUS_BODY.format(x='%x')}}}\n\n"
            f"func @logistic(%x: f32) -> (f32) {{\n{_LOGISTIC_BODY.format(x='%x')}}}\n")


def softplus(x):
    return np.logaddexp(np.float32(0), x).astype(np.float32)


def logistic(x):
    return (1 / (1 + np.exp(-x))).astype(np.float32)


# a piecewise activation through if, min and the math instructions, continuous at 0 (its branches meet there) so that
# the float16 kernels' rounding of a pre-activation near 0 moves it little, as against the float32 oracle
WAVE = """
func @wave(%x: f32) -> (f32) {
    %zero = constant 0.0 : f32
    %half = constant 0.5 : f32
    %two = constant 2.0 : f32
    %inside = less_than %x, %zero : bool
    %y = if %inside -> (f32) {
        %s = sin %x : f32
        %t = mul %s, %half : f32
        yield (%t)
    } else {
        %q = mul %x, %x : f32
        %p = exp2 %x : f32
        %c = min %q, %p : f32
        %l = cos %c : f32
        %m = mul %l, %two : f32
        %n = sub %m, %two : f32
        yield (%n)
    }
    yield (%y)
}
"""


def wave(x):
    x = np.asarray(x, np.float64)
    positive = 2 * np.cos(np.minimum(x * x, np.exp2(x))) - 2
    return np.where(x < 0, 0.5 * np.sin(x), positive).astype(np.float32)


def wave_slope(x):
    x = np.asarray(x, np.float64)
    square, power = x * x, np.exp2(x)
    inner = np.where(square <= power, 2 * x, power * np.log(2))
    return np.where(x < 0, 0.5 * np.cos(x), -2 * np.sin(np.minimum(square, power)) * inner).astype(np.float32)


# a sample's two inputs to five features
FEATURES = """
func @features(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32) {
    %s = sin %x : f32
    %c = cos %y : f32
    %p = mul %x, %y : f32
    %a = abs %y : f32
    %three = constant 3.0 : f32
    %r = div %x, %three : f32
    %e = native_exp %r : f32
    %l2 = log2 %e : f32
    %far = greater_than %a, %three : bool
    %n = if %far -> (f32) { yield (%three) } else { yield (%a) }
    yield (%s, %c, %p, %l2, %n)
}
"""


def features(x):
    x = np.asarray(x, np.float64)
    a, b = x[:, 0], x[:, 1]
    return np.stack([np.sin(a), np.cos(b), a * b, np.log2(np.exp(a / 3)), np.minimum(np.abs(b), 3)],
                    axis=1).astype(np.float32)


# the log-cosh loss of (prediction, target), its derivative tanh(p - t) derived
LOG_COSH = """
func @log_cosh(%p: f32, %t: f32) -> (f32) {
    %d = sub %p, %t : f32
    %m = neg %d : f32
    %a = exp %d : f32
    %b = exp %m : f32
    %s = add %a, %b : f32
    %half = constant 0.5 : f32
    %c = mul %s, %half : f32
    %y = log %c : f32
    yield (%y)
}
"""


def log_cosh(p, t):
    return np.log(np.cosh(np.asarray(p, np.float64) - t)).astype(np.float32)


def log_cosh_slope(p, t):
    return np.tanh(np.asarray(p, np.float64) - t).astype(np.float32)


def made_activation(op: Op) -> Activation:
    """The activation `op` with its default attributes; the tensor-language one is SOFTPLUS, its rule given."""
    return tl.activation(SOFTPLUS, derivative="logistic") if op is Op.TL_FUNCTION else Activation(op)


def made_loss(name: str) -> Loss:
    """The loss `name` with its default settings; the tensor-language one is LOG_COSH."""
    return tl.loss(LOG_COSH) if name == "tl" else get_loss(name)


# softplus(p - t) with its derivative in p, logistic(p - t), given as a function of (p, t)
_DIFFERENCE = "    %d = sub %p, %t : f32\n"
SOFTPLUS_LOSS = (f"func @softplus_difference(%p: f32, %t: f32) -> (f32) {{\n{_DIFFERENCE}"
                 f"{_SOFTPLUS_BODY.format(x='%d')}}}\n\n"
                 f"func @logistic_difference(%p: f32, %t: f32) -> (f32) {{\n{_DIFFERENCE}"
                 f"{_LOGISTIC_BODY.format(x='%d')}}}\n")
