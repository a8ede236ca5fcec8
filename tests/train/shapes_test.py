"""Every procedural category comes out as one connected piece on the engine's resolution-7 grid.

The built-in model learns what shapes.py draws; a shape whose parts only nearly touch (a lamp
shade above its pole, a sail beside its mast) teaches it to draw floating parts. For each
category, the four extreme (height, width) combinations, where parts are thinnest or furthest
apart, with its other attributes (form, legs) drawn at random, are rasterised on the engine's
resolution-7 grid (129^3 points over [-1.05, 1.05]^3, in the frame the model is trained in) and
their pieces counted with face connectivity. Stools and tables are checked with straight legs and
with flared ones (shapes.LEG_FLARE), and every category at the first chunky shapes' part
half-thickness as well as at the recipe's default (shapes.PART_HALF_THICKNESS): settings a model's
recipe may name (shapes.configure_for_model, also checked here).

    shapes_test.py REPO_ROOT
"""

import json
import os
import sys
import tempfile

import numpy as np

try:
    import scipy  # noqa: F401  (pieces.count_pieces labels the grid with scipy.ndimage)
except ImportError:
    print("SKIP: this python cannot import scipy; install it with tools/train/setup.sh")
    sys.exit(77)

sys.path.insert(0, os.path.join(sys.argv[1], "tools", "train"))
import pieces  # noqa: E402
import shapes  # noqa: E402

DEFAULT_THICKNESS = shapes.PART_HALF_THICKNESS

def attribute_sets(name, rng):
    _, kinds = shapes.CATEGORIES[name]
    sets = []
    for height in shapes.HEIGHT:
        for width in shapes.WIDTH:
            attrs = {k: v for k, v in shapes.random_attributes(name, rng, p_unspecified=0.0).items()
                     if k not in ("height", "width")}
            sets.append(dict(attrs, height=height, width=width))
    return sets


FLARED = 1.8  # a flare a recipe has used (tools/train/README.md, "Flared legs")


def check_configure_for_model():
    """A model folder's recipe sets the flare; a recipe without it means straight legs; a folder
    without a recipe leaves the setting alone."""
    with tempfile.TemporaryDirectory() as folder:
        shapes.LEG_FLARE = 1.0
        shapes.configure_for_model(folder)
        assert shapes.LEG_FLARE == 1.0, shapes.LEG_FLARE
        os.makedirs(os.path.join(folder, "checkpoints"))
        with open(os.path.join(folder, "checkpoints", "recipe.json"), "w") as f:
            json.dump({"preset": "full", "leg_flare": FLARED}, f)
        shapes.configure_for_model(folder)
        assert shapes.LEG_FLARE == FLARED, shapes.LEG_FLARE
        os.makedirs(os.path.join(folder, "training"))
        with open(os.path.join(folder, "training", "recipe.json"), "w") as f:
            json.dump({"preset": "full"}, f)
        shapes.configure_for_model(folder)
        assert shapes.LEG_FLARE == 1.0, shapes.LEG_FLARE
        for bad in ('{"leg_flare": 0.5}', '{"leg_flare": "wide"}', '{"leg_flare": 1e999}', '[1.8]', '{"leg'):
            with open(os.path.join(folder, "training", "recipe.json"), "w") as f:
                f.write(bad)
            try:
                shapes.configure_for_model(folder)
            except ValueError as e:
                assert "recipe.json" in str(e), e
            else:
                raise AssertionError(f"a recipe of {bad} was taken (leg flare {shapes.LEG_FLARE})")
    print("configure_for_model: the recipe's flare, straight legs when it names none, an error naming "
          "the file for a bad one")


def check_thickness_for_model():
    """A model folder's recipe sets the part half-thickness; a recipe without it was drawn at the
    chunky shapes' thickness; a bad one is an error that names the file."""
    with tempfile.TemporaryDirectory() as folder:
        os.makedirs(os.path.join(folder, "training"))
        recipe = os.path.join(folder, "training", "recipe.json")
        with open(recipe, "w") as f:
            json.dump({"preset": "full", "part_half_thickness": shapes.MAX_PART_HALF_THICKNESS}, f)
        shapes.configure_for_model(folder)
        assert shapes.PART_HALF_THICKNESS == shapes.MAX_PART_HALF_THICKNESS, shapes.PART_HALF_THICKNESS
        with open(recipe, "w") as f:
            json.dump({"preset": "full"}, f)
        shapes.configure_for_model(folder)
        assert shapes.PART_HALF_THICKNESS == shapes.CHUNKY_PART_HALF_THICKNESS, shapes.PART_HALF_THICKNESS
        for bad in (0, -0.05, 1.0, "thick", None, True, 1e999):
            with open(recipe, "w") as f:
                json.dump({"part_half_thickness": bad}, f)
            try:
                shapes.configure_for_model(folder)
            except ValueError as e:
                assert "recipe.json" in str(e) and "half-thickness" in str(e), e
            else:
                raise AssertionError(f"a part half-thickness of {bad!r} was taken ({shapes.PART_HALF_THICKNESS})")
    shapes.PART_HALF_THICKNESS = DEFAULT_THICKNESS
    print("configure_for_model: the recipe's part half-thickness, the chunky shapes' when it names none, an "
          "error naming the file for a bad one")


def main():
    check_configure_for_model()
    check_thickness_for_model()
    rng = np.random.default_rng(1234)
    failures = []
    chunky = shapes.CHUNKY_PART_HALF_THICKNESS
    cases = ([(name, 1.0, thickness) for thickness in sorted({chunky, DEFAULT_THICKNESS}) for name in shapes.CATEGORIES]
             + [("stool", FLARED, chunky), ("table", FLARED, chunky)])
    for name, flare, thickness in cases:
        shapes.LEG_FLARE = flare
        shapes.PART_HALF_THICKNESS = thickness
        counts = []
        for attrs in attribute_sets(name, rng):
            field = shapes.occupancy_field(name, attrs, rng)
            sample = shapes.sample_shape(field, rng, surface_points=256, query_points=16)
            count = pieces.shape_pieces(field, sample)
            counts.append(count)
            if count == 0 or (count > 1 and name not in shapes.SEVERAL_PIECES):
                failures.append(f"{name} {attrs} (leg flare {flare}, part half-thickness {thickness}): {count} pieces "
                                "on the resolution-7 grid")
        print(f"{name:10s} leg flare {flare} part half-thickness {thickness} pieces {counts}", flush=True)
    if failures:
        print("FAIL: shapes that are not one piece:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all categories are one piece")


if __name__ == "__main__":
    main()
