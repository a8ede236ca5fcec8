"""Training recipe (tools/train/): the stretch augmentation (train.stretched) maps a shape to the
shape under its diagonal map. Checked on spheres, whose image is known in closed form: an
ellipsoid with semi-axes r * d. Surface points must lie on it, normals must be its unit
normals (the inverse transpose, not the map itself), a query's label must still say whether
it is inside, the longest side must keep its length, and height against width must stay
within the drawn range.

    tests/train/python_test.sh REPO_ROOT tests/train/stretch_test.py
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(sys.argv[1], "tools", "train"))
import train  # noqa: E402


def main():
    rng = np.random.default_rng(7)
    shapes, points = 64, 500
    radius = rng.uniform(0.3, 0.9, size=shapes)
    on = rng.normal(size=(shapes, points, 3))
    on /= np.linalg.norm(on, axis=-1, keepdims=True)
    surface = on * radius[:, None, None]
    normals = on.copy()
    queries = rng.uniform(-1, 1, size=(shapes, points, 3))
    inside = np.linalg.norm(queries, axis=-1) < radius[:, None]
    extent = np.repeat(2 * radius[:, None], 3, axis=1)
    amount = 0.4
    to = lambda a: torch.from_numpy(a.astype(np.float32))
    pts, nrm, qry = (t.numpy().astype(np.float64) for t in
                     train.stretched(to(surface), to(normals), to(queries), extent, amount, rng))

    # The map of each shape, read back from where its surface points went.
    d = np.empty((shapes, 3))
    for i in range(shapes):
        nonzero = np.abs(surface[i]) > 1e-3
        d[i] = [np.median(pts[i][nonzero[:, a], a] / surface[i][nonzero[:, a], a]) for a in range(3)]
    failures = []
    for i in range(shapes):
        a = radius[i] * d[i]
        level = ((pts[i] / a) ** 2).sum(-1)
        if np.abs(level - 1).max() > 1e-4:
            failures.append(f"shape {i}: surface points off the stretched sphere by {np.abs(level - 1).max():.2e}")
        grad = pts[i] / a ** 2
        grad /= np.linalg.norm(grad, axis=-1, keepdims=True)
        if np.abs(nrm[i] - grad).max() > 1e-4:
            failures.append(f"shape {i}: normals differ from the ellipsoid's by {np.abs(nrm[i] - grad).max():.2e}")
        now_inside = ((qry[i] / a) ** 2).sum(-1) < 1
        if (now_inside != inside[i]).sum() > 0:
            failures.append(f"shape {i}: {(now_inside != inside[i]).sum()} queries changed side")
        if abs((2 * a).max() - extent[i].max()) > 1e-4:
            failures.append(f"shape {i}: longest side {(2 * a).max():.5f}, was {extent[i].max():.5f}")
        if abs(d[i, 0] - d[i, 2]) > 1e-5:
            failures.append(f"shape {i}: the two horizontal scales differ ({d[i, 0]:.5f}, {d[i, 2]:.5f})")
        ratio = np.log(d[i, 1] / d[i, 0])
        if abs(ratio) > 2 * amount + 1e-5:
            failures.append(f"shape {i}: height against width scaled by e^{ratio:.3f}, beyond e^+-{2 * amount}")
    # The draws must actually vary, both ways.
    ratios = np.log(d[:, 1] / d[:, 0])
    if not (ratios.min() < -amount / 2 and ratios.max() > amount / 2):
        failures.append(f"height-to-width scales drawn only within e^[{ratios.min():.3f}, {ratios.max():.3f}]")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"stretch: {shapes} spheres mapped to their ellipsoids (height/width e^[{ratios.min():.2f}, "
          f"{ratios.max():.2f}])")


if __name__ == "__main__":
    main()
