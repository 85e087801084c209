"""OneBlob (`coopnn.graph.encodings.oneblob`): bin k of column j is C(b_(k+1) - x_j) - C(b_k - x_j), C the quartic
kernel's cumulative mass with its copies shifted by -1 and +1 added (the wrap-around) and b_k = k / n the bin
boundaries. The boundaries are a loop (n_bins goes up to 1024) writing a private array the outputs are read from."""

from __future__ import annotations

from coopnn.graph.encodings.oneblob import SHIFTS, OneBlob

# the quartic kernel's cumulative mass 15/16 u (1 - 2/3 u^2 + u^4 / 5) + 1/2, clamped to [0, 1]
_LINEAR, _CUBIC, _QUINTIC = 15 / 16, -15 / 16 * 2 / 3, 15 / 16 / 5


def _cumulative(w, t, bins: int):
    """C(t) of a kernel of radius 1 / bins, wrapped copies included."""
    masses = []
    for shift in SHIFTS:
        u = w.scale(w.shift(t, shift), float(bins)) if shift else w.scale(t, float(bins))
        u2 = w.mul(u, u)
        poly = w.fma(u2, w.fma(u2, w.constant(_QUINTIC), w.constant(_CUBIC)), w.constant(_LINEAR))
        masses.append(w.glsl("FClamp", w.fma(u, poly, w.constant(0.5)), w.constant(0.0), w.constant(1.0)))
    return w.total(masses)


def oneblob(w, encoding: OneBlob, xs: list) -> list:
    bins = encoding.n_bins
    out = w.array(bins * len(xs))
    for j, x in enumerate(xs):
        previous = w.fn.variable(w.f32)
        w.store(previous, _cumulative(w, w.sub(w.constant(0.0), x), bins))
        with w.fn.for_range(w.uint(0), w.uint(bins)) as k:
            boundary = w.scale(w.to_float(w.add(k, w.uint(1))), 1.0 / bins)  # exact: bins is a power of two
            mass = _cumulative(w, w.sub(boundary, x), bins)
            slot = w.add(k, w.uint(j * bins)) if j else k
            w.store(w.element(out, slot), w.sub(mass, w.load(previous)))
            w.store(previous, mass)
    return [w.load(w.element(out, w.uint(i))) for i in range(bins * len(xs))]


EMITTERS = {OneBlob.otype: oneblob}
