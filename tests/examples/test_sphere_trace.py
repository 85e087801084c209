"""The sphere tracer of the neural SDF example on an analytic sphere: the rays that hit are those whose line passes
within the radius, at the analytic distance, with radial normals; the render shades hits and keeps the background."""

from __future__ import annotations

import numpy as np

from coopnn.examples import sphere_trace as st

RADIUS = 0.5


def ball(p: np.ndarray) -> np.ndarray:
    return np.linalg.norm(p, axis=1) - RADIUS


def test_rays_hit_the_sphere_where_their_lines_pass_within_its_radius():
    camera = st.Camera(eye=(0, 0, 3), target=(0, 0, 0), fov_degrees=30, side=48)
    origins, directions = st.camera_rays(camera)
    np.testing.assert_allclose(np.linalg.norm(directions, axis=1), 1, rtol=1e-6)
    hit, t = st.trace(ball, origins, directions, epsilon=1e-4)
    closest = np.linalg.norm(np.cross(origins, directions), axis=1)  # distance of each line from the centre
    inside, outside = closest < RADIUS - 0.01, closest > RADIUS + 0.01
    assert hit[inside].all() and not hit[outside].any()
    expected = -(origins * directions).sum(1) - np.sqrt(np.maximum(RADIUS ** 2 - closest ** 2, 0))
    np.testing.assert_allclose(t[inside], expected[inside], atol=1e-3)


def test_normals_are_radial_and_the_render_shades_the_hits():
    points = np.array([[RADIUS, 0, 0], [0, -RADIUS, 0], [0, 0, RADIUS]], np.float32)
    np.testing.assert_allclose(st.normals(ball, points), points / RADIUS, atol=1e-4)
    image, hit = st.render(ball, st.Camera(eye=(0, 0, 3), target=(0, 0, 0), fov_degrees=30, side=32))
    assert image.shape == (32, 32, 3) and hit.shape == (32, 32) and hit[16, 16] and not hit[0, 0]
    assert np.allclose(image[hit], image[hit][:, :1] * st.ALBEDO / st.ALBEDO[0], atol=1e-6)  # the albedo, shaded
    assert 0 <= image.min() and image.max() <= 1


def test_rays_that_miss_the_cube_never_march():
    origins = np.array([[0, 5, 0], [0, 0, 5]], np.float32)
    directions = np.array([[0, 1, 0], [0, 0, -1]], np.float32)
    near, far = st.cube_span(origins, directions)
    assert near[0] > far[0] and (near[1], far[1]) == (4, 6)
    calls = []
    hit, _ = st.trace(lambda p: calls.append(len(p)) or ball(p), origins[:1], directions[:1])
    assert not hit.any() and calls == []
