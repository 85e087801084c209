"""The neural SDF example's shape: each primitive's exact distance at hand-worked points, the union, and training
points that gather around the surface."""

from __future__ import annotations

import numpy as np
import pytest

from coopnn.examples import sdf_shapes as shapes


def test_primitives_at_hand_worked_points():
    p = np.array([[0, 0, 0], [2, 0, 0], [0, 3, 0]], np.float32)
    np.testing.assert_allclose(shapes.sphere(p, (0, 0, 0), 1.0), [-1, 1, 2])
    np.testing.assert_allclose(shapes.torus(p, (0, 0, 0), 1.0, 0.25), [0.75, 0.75, np.sqrt(10) - 0.25], rtol=1e-6)
    np.testing.assert_allclose(shapes.rounded_box(p, (0, 0, 0), (1, 1, 1), 0.0), [-1, 1, 2])
    np.testing.assert_allclose(shapes.capsule(p, (0, -1, 0), (0, 1, 0), 0.5), [-0.5, 1.5, 1.5])


def test_the_scene_is_the_union_inside_the_cube():
    rng = np.random.default_rng(0)
    p = rng.uniform(-1, 1, (1000, 3)).astype(np.float32)
    d = shapes.scene(p)
    assert d.dtype == np.float32 and d.shape == (1000,)
    assert shapes.scene(np.array([[0, 0.05, 0]], np.float32))[0] == pytest.approx(-0.28)  # the sphere's centre
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float32)
    assert (shapes.scene(corners) > 0).all() and (d < 0).any()


def test_training_points_gather_around_the_surface():
    p = shapes.training_points(4000, seed=1)
    assert p.shape == (4000, 3) and p.dtype == np.float32 and np.abs(p).max() <= 1
    near = np.abs(shapes.scene(p[:3000]))
    assert np.median(near) < 0.03 and np.median(np.abs(shapes.scene(p[3000:]))) > 0.1
