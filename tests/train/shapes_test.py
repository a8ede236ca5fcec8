"""Every procedural category comes out as one connected piece on the engine's resolution-7 grid.

The built-in model learns what shapes.py draws; a shape whose parts only nearly touch (a lamp
shade above its pole, a sail beside its mast) teaches it to draw floating parts. For each
category, the four extreme (height, width) combinations, where parts are thinnest or furthest
apart, with its other attributes (form, legs) drawn at random, are rasterised on the engine's
resolution-7 grid (129^3 points over [-1.05, 1.05]^3, in the frame the model is trained in) and
their pieces counted with face connectivity.

    shapes_test.py REPO_ROOT
"""

import os
import sys

import numpy as np

try:
    import scipy  # noqa: F401  (pieces.count_pieces labels the grid with scipy.ndimage)
except ImportError:
    print("SKIP: this python cannot import scipy; install it with tools/train/setup.sh")
    sys.exit(77)

sys.path.insert(0, os.path.join(sys.argv[1], "tools", "train"))
import pieces  # noqa: E402
import shapes  # noqa: E402

def attribute_sets(name, rng):
    _, kinds = shapes.CATEGORIES[name]
    sets = []
    for height in shapes.HEIGHT:
        for width in shapes.WIDTH:
            attrs = {k: v for k, v in shapes.random_attributes(name, rng, p_unspecified=0.0).items()
                     if k not in ("height", "width")}
            sets.append(dict(attrs, height=height, width=width))
    return sets


def main():
    rng = np.random.default_rng(1234)
    failures = []
    for name in shapes.CATEGORIES:
        counts = []
        for attrs in attribute_sets(name, rng):
            field = shapes.occupancy_field(name, attrs, rng)
            sample = shapes.sample_shape(field, rng, surface_points=256, query_points=16)
            count = pieces.shape_pieces(field, sample)
            counts.append(count)
            if count == 0 or (count > 1 and name not in shapes.SEVERAL_PIECES):
                failures.append(f"{name} {attrs}: {count} pieces on the resolution-7 grid")
        print(f"{name:10s} pieces {counts}", flush=True)
    if failures:
        print("FAIL: shapes that are not one piece:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all categories are one piece")


if __name__ == "__main__":
    main()
