"""The shape the neural SDF example learns, made in code: a union of primitives with exact signed distance functions
(Quilez's formulas: a torus, a rounded box, a sphere and a capsule), inside the cube [-1, 1]^3, and the training
points drawn around it. Everything is numpy float32 over [N, 3] points.
"""

from __future__ import annotations

import numpy as np


def _length(v: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(v * v, axis=-1))


def sphere(p: np.ndarray, centre, radius: float) -> np.ndarray:
    return _length(p - np.asarray(centre, np.float32)) - radius


def torus(p: np.ndarray, centre, major: float, minor: float) -> np.ndarray:
    """A torus around the y axis through `centre`."""
    q = p - np.asarray(centre, np.float32)
    ring = np.sqrt(q[:, 0] ** 2 + q[:, 2] ** 2) - major
    return np.sqrt(ring * ring + q[:, 1] ** 2) - minor


def rounded_box(p: np.ndarray, centre, half: tuple[float, float, float], rounding: float) -> np.ndarray:
    q = np.abs(p - np.asarray(centre, np.float32)) - (np.asarray(half, np.float32) - rounding)
    outside = _length(np.maximum(q, 0))
    inside = np.minimum(np.max(q, axis=-1), 0)
    return outside + inside - rounding


def capsule(p: np.ndarray, a, b, radius: float) -> np.ndarray:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    pa, ba = p - a, b - a
    h = np.clip(np.sum(pa * ba, axis=-1) / np.dot(ba, ba), 0, 1)
    return _length(pa - h[:, None] * ba) - radius


def scene(p: np.ndarray) -> np.ndarray:
    """The signed distance of the example's shape at points p [N, 3] in [-1, 1]^3: a rounded box on which a torus
    lies, a sphere in the torus's hole and a capsule through it (their union: the minimum, exact outside)."""
    p = np.asarray(p, np.float32)
    parts = (rounded_box(p, (0.0, -0.55, 0.0), (0.7, 0.15, 0.7), 0.05),
             torus(p, (0.0, -0.2, 0.0), 0.45, 0.15),
             sphere(p, (0.0, 0.05, 0.0), 0.28),
             capsule(p, (-0.6, 0.45, -0.3), (0.6, 0.2, 0.35), 0.1))
    return np.minimum.reduce(parts).astype(np.float32)


def training_points(count: int, seed: int = 0, near: float = 0.75, spread: float = 0.02) -> np.ndarray:
    """`count` points in [-1, 1]^3 [count, 3]: a share `near` of them close to the surface (uniform points moved onto
    it along the distance's gradient, then jittered by `spread`), the rest uniform, so that the fit spends its
    capacity where sphere tracing needs precision."""
    rng = np.random.default_rng(seed)
    uniform = rng.uniform(-1, 1, (count, 3)).astype(np.float32)
    n_near = int(count * near)
    moved = uniform[:n_near].copy()
    for _ in range(3):  # a few projections land most points on the surface
        moved -= scene(moved)[:, None] * gradient(moved)
    moved += rng.normal(0, spread, moved.shape).astype(np.float32)
    return np.clip(np.concatenate([moved, uniform[n_near:]]), -1, 1).astype(np.float32)


def gradient(p: np.ndarray, h: float = 1e-3) -> np.ndarray:
    """The unit gradient of `scene` by central differences."""
    offsets = np.eye(3, dtype=np.float32) * h
    g = np.stack([scene(p + o) - scene(p - o) for o in offsets], axis=-1)
    return g / np.maximum(_length(g), 1e-12)[:, None]
