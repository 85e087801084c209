"""Sphere tracing a signed distance function over the cube [-1, 1]^3 and shading what it hits, for the neural SDF
example: every iteration evaluates the distance at the current point of every ray still marching, as one batch (a
learnt SDF: one `model.run`), so the renderer works the same for an analytic function and a network.

Rays start where they enter the cube and march by `step_scale` times the distance (a learnt distance is only
approximately one, so the steps are shortened); a ray hits where the distance falls under `epsilon` and misses
once it leaves the cube. Normals are the distance's central differences (six points a hit, one batch), shading a
Lambert term and an ambient one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from coopnn.progress import Progress

Distance = Callable[[np.ndarray], np.ndarray]  # [N, 3] float32 points -> [N] distances
LIGHT = np.array([0.5, 0.8, 0.35], np.float32) / np.linalg.norm([0.5, 0.8, 0.35])
ALBEDO = np.array([0.9, 0.62, 0.38], np.float32)


@dataclass(frozen=True)
class Camera:
    eye: tuple[float, float, float] = (1.9, 1.4, 2.3)
    target: tuple[float, float, float] = (0.0, -0.15, 0.0)
    fov_degrees: float = 40.0
    side: int = 256  # pixels of the square image


def camera_rays(camera: Camera) -> tuple[np.ndarray, np.ndarray]:
    """(origins, unit directions) [side * side, 3] of a pinhole camera's pixel centres, row by row from the top."""
    eye, target = np.asarray(camera.eye, np.float32), np.asarray(camera.target, np.float32)
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, np.array([0, 1, 0], np.float32))
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    half = np.tan(np.radians(camera.fov_degrees) / 2)
    axis = ((np.arange(camera.side, dtype=np.float32) + 0.5) / camera.side * 2 - 1) * half
    v, u = np.meshgrid(-axis, axis, indexing="ij")
    directions = forward + u.reshape(-1, 1) * right + v.reshape(-1, 1) * up
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return np.broadcast_to(eye, directions.shape).astype(np.float32), directions.astype(np.float32)


def cube_span(origins: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each ray enters and leaves the cube [-1, 1]^3 (t_near > t_far for a ray that misses it)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inverse = 1 / directions
        a, b = (-1 - origins) * inverse, (1 - origins) * inverse
    near = np.nan_to_num(np.minimum(a, b), nan=-np.inf).max(axis=1)
    far = np.nan_to_num(np.maximum(a, b), nan=np.inf).min(axis=1)
    return np.maximum(near, 0), far


def trace(distance: Distance, origins: np.ndarray, directions: np.ndarray, *, iterations: int = 96,
          epsilon: float = 2e-3, step_scale: float = 0.9, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(hit [N] bool, t [N]) of each ray: the distance along it of the surface where it hit."""
    t, far = cube_span(origins, directions)
    marching = t < far
    hit = np.zeros(len(t), bool)
    bar = Progress(iterations, label="trace") if progress else None
    try:
        for _ in range(iterations):
            rays = np.flatnonzero(marching)
            if bar is not None:
                bar.advance(detail=f"{len(rays)} rays")
            if not len(rays):
                break
            d = np.asarray(distance(origins[rays] + t[rays, None] * directions[rays]), np.float32).reshape(-1)
            landed = np.abs(d) < epsilon
            hit[rays[landed]] = True
            t[rays] += np.where(landed, 0, step_scale * d)
            marching[rays[landed | (t[rays] > far[rays])]] = False
    finally:
        if bar is not None:
            bar.close()
    return hit, t


def normals(distance: Distance, points: np.ndarray, h: float = 2e-3) -> np.ndarray:
    """Unit normals [N, 3] at `points`: the distance's central differences, its 6N points evaluated in one batch."""
    offsets = np.concatenate([np.eye(3, dtype=np.float32) * h, -np.eye(3, dtype=np.float32) * h])
    probes = (points[None, :, :] + offsets[:, None, :]).reshape(-1, 3)
    d = np.asarray(distance(probes), np.float32).reshape(6, len(points))
    g = (d[:3] - d[3:]).T
    return g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-12)


def render(distance: Distance, camera: Camera, *, progress: bool = False, **tracing) -> tuple[np.ndarray, np.ndarray]:
    """(image [side, side, 3] in [0, 1], hit mask [side, side]) of the surface, shaded from its normals, over a
    vertical grey gradient."""
    origins, directions = camera_rays(camera)
    hit, t = trace(distance, origins, directions, progress=progress, **tracing)
    side = camera.side
    background = np.linspace(0.95, 0.7, side, dtype=np.float32)[:, None, None] * np.ones((side, side, 3), np.float32)
    image = background.reshape(-1, 3).copy()
    if hit.any():
        points = origins[hit] + t[hit, None] * directions[hit]
        n = normals(distance, points)
        lambert = np.clip(n @ LIGHT, 0, 1)[:, None]
        image[hit] = ALBEDO * (0.18 + 0.82 * lambert)
    return image.reshape(side, side, 3), hit.reshape(side, side)
