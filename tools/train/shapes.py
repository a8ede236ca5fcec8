"""Procedural everyday shapes as signed distance fields, for training the built-in model.

Each shape is a union (min) of a few primitives (boxes, cylinders, spheres, tori, cones,
capsules), with subtraction (max(a, -b)) where an object is hollow (mug, bowl, vase).
A category builder turns a set of attributes (tall/short, wide/narrow, round/square, number
of legs) plus a random generator into one such field, so the same attributes always mean the
same geometric change and the captions (captions.py) can state them truthfully.

Per shape the generator produces what the shape tokenizer trains on, in the frame the
reference uses for meshes: centred on its bounding box and scaled so its longest side spans
0.96 of [-1, 1]^3.
  - surface points with unit normals, found by projecting points of a thin band around the
    zero set onto it along the field's gradient (no marching cubes needed);
  - occupancy queries with labels (inside = field < 0): half near the surface (surface
    points plus Gaussian noise), half uniform over the decoding box [-1.05, 1.05]^3.
Y is up.
"""

import json
import math
import os

import numpy as np

MESH_SCALE = 0.96
QUERY_BOUND = 1.05

# --------------------------------------------------------------------------------------
# Primitives: each returns f(p) -> signed distance for points p of shape [N, 3].


def _length(v):
    return np.sqrt(np.sum(v * v, axis=-1))


def box(center, half, rounding=0.0):
    c = np.asarray(center, dtype=np.float64)
    h = np.asarray(half, dtype=np.float64) - rounding

    def f(p):
        q = np.abs(p - c) - h
        outside = _length(np.maximum(q, 0.0))
        inside = np.minimum(np.max(q, axis=-1), 0.0)
        return outside + inside - rounding

    return f


def _axis_frame(p, center, axis):
    """Coordinates (along-axis, radial distance) of p about an axis through center."""
    d = p - np.asarray(center, dtype=np.float64)
    i = "xyz".index(axis)
    along = d[:, i]
    others = [j for j in range(3) if j != i]
    radial = np.sqrt(d[:, others[0]] ** 2 + d[:, others[1]] ** 2)
    return along, radial


def cylinder(center, radius, half_height, axis="y"):
    def f(p):
        along, radial = _axis_frame(p, center, axis)
        dx = radial - radius
        dy = np.abs(along) - half_height
        outside = np.sqrt(np.maximum(dx, 0.0) ** 2 + np.maximum(dy, 0.0) ** 2)
        return outside + np.minimum(np.maximum(dx, dy), 0.0)

    return f


def cone(center, radius_bottom, radius_top, half_height, axis="y"):
    """A capped cone (frustum); the distance is a Lipschitz bound, which projection tolerates."""
    slope = (radius_top - radius_bottom) / (2.0 * half_height)
    scale = 1.0 / math.sqrt(1.0 + slope * slope)

    def f(p):
        along, radial = _axis_frame(p, center, axis)
        r = radius_bottom + (np.clip(along, -half_height, half_height) + half_height) * slope
        side = (radial - r) * scale
        caps = np.abs(along) - half_height
        return np.maximum(side, caps)

    return f


def tapered_box(center, half_bottom, half_top, half_height):
    """A square frustum along y: half-width half_bottom at its foot, half_top at its top; the
    distance is a Lipschitz bound, as the cone's."""
    c = np.asarray(center, dtype=np.float64)
    slope = (half_top - half_bottom) / (2.0 * half_height)
    scale = 1.0 / math.sqrt(1.0 + slope * slope)

    def f(p):
        d = p - c
        r = half_bottom + (np.clip(d[:, 1], -half_height, half_height) + half_height) * slope
        side = (np.maximum(np.abs(d[:, 0]), np.abs(d[:, 2])) - r) * scale
        caps = np.abs(d[:, 1]) - half_height
        return np.maximum(side, caps)

    return f


def sphere(center, radius):
    c = np.asarray(center, dtype=np.float64)
    return lambda p: _length(p - c) - radius


def ellipsoid(center, radii):
    c = np.asarray(center, dtype=np.float64)
    r = np.asarray(radii, dtype=np.float64)

    def f(p):
        k = _length((p - c) / r)
        return (k - 1.0) * np.min(r)

    return f


def torus(center, major, minor, axis="y"):
    def f(p):
        along, radial = _axis_frame(p, center, axis)
        return np.sqrt((radial - major) ** 2 + along ** 2) - minor

    return f


def capsule(a, b, radius):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ab = b - a
    denom = float(np.dot(ab, ab))

    def f(p):
        t = np.clip(((p - a) @ ab) / denom, 0.0, 1.0)
        return _length(p - (a + t[:, None] * ab)) - radius

    return f


def union(*fields):
    def f(p):
        out = fields[0](p)
        for g in fields[1:]:
            out = np.minimum(out, g(p))
        return out

    return f


def subtract(a, b):
    return lambda p: np.maximum(a(p), -b(p))


# --------------------------------------------------------------------------------------
# Attributes. Each category lists which ones it understands; None means "unspecified",
# which the generator fills with a random neutral value and the caption leaves out.

HEIGHT = ("tall", "short")
WIDTH = ("wide", "narrow")
FORM = ("round", "square")
LEGS = (3, 4)


def _height_scale(attrs, rng):
    return {"tall": rng.uniform(1.5, 1.9), "short": rng.uniform(0.5, 0.65)}.get(attrs.get("height"),
                                                                              rng.uniform(0.9, 1.1))


def _width_scale(attrs, rng):
    return {"wide": rng.uniform(1.45, 1.8), "narrow": rng.uniform(0.55, 0.7)}.get(attrs.get("width"),
                                                                               rng.uniform(0.9, 1.1))


def _leg_positions(n, half_x, half_z, round_layout):
    if n == 3 or round_layout:
        return [(half_x * math.cos(2 * math.pi * k / n + 0.3), half_z * math.sin(2 * math.pi * k / n + 0.3))
                for k in range(n)]
    return [(sx * half_x, sz * half_z) for sx in (-1, 1) for sz in (-1, 1)][:n]


def _legs(n, top_y, length, half_x, half_z, radius, round_layout, square_legs=False, flare=1.0):
    """Legs standing on y = 0 up to top_y; with flare > 1 each widens linearly to flare times its
    radius where it meets what it carries."""
    legs = []
    for x, z in _leg_positions(n, half_x, half_z, round_layout):
        center = (x, top_y - length / 2, z)
        if flare != 1.0:
            legs.append(tapered_box(center, radius, radius * flare, length / 2) if square_legs else
                        cone(center, radius, radius * flare, length / 2))
        elif square_legs:
            legs.append(box(center, (radius, length / 2, radius)))
        else:
            legs.append(cylinder(center, radius, length / 2))
    return legs


def _slab(center, half_x, half_y, half_z, round_form):
    if round_form:
        return cylinder(center, max(half_x, half_z), half_y)
    return box(center, (half_x, half_y, half_z), rounding=min(half_y, 0.02))


# Each builder: (attrs, rng) -> sdf. Sizes are in arbitrary units (an object is about one unit
# across); the shape is rescaled. The shapes are chunky toy props, not realistic furniture: every
# part is at least PART_HALF_THICKNESS thick on each side of its middle (a leg's or stem's
# radius, half a board's, rail's or wall's thickness), and parts that meet overlap,
# so each object is one connected piece (tests/train/shapes_test.py checks it on the
# engine's resolution-7 grid). Chosen by measurement (tools/train/README.md, "Chunky shapes" and
# "Thicker parts"): the tokenizer places thicker parts better, and 0.1 still keeps the narrowest
# objects' parts apart. A recipe records the value it drew (part_half_thickness; train.py
# --part-half-thickness names another).
PART_HALF_THICKNESS = 0.1
# What a recipe that names no part half-thickness was drawn at: the first chunky shapes.
CHUNKY_PART_HALF_THICKNESS = 0.065
# Thicker than this and the parts of the narrowest objects (chair and stool legs, a narrow
# shelf's boards) would fill the gaps between them.
MAX_PART_HALF_THICKNESS = 0.12
# How much wider than at its foot a stool's or table's leg is where it meets the top (1: straight
# legs). The tokenizer loses straight legs just under a top; a whole run with flared ones (1.8)
# drew stools and tables whole more often but was no better overall than the spread between runs
# (tools/train/README.md, "Flared legs"), so straight legs stay the default.
LEG_FLARE = 1.0


def checked_part_half_thickness(value, where):
    """The thinnest half-thickness as a recipe or an option gives it: a finite number in
    (0, MAX_PART_HALF_THICKNESS], or an error that names where it came from."""
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = math.nan
    if isinstance(value, bool) or not (math.isfinite(t) and 0.0 < t <= MAX_PART_HALF_THICKNESS):
        raise ValueError(f"{where}: part half-thickness {value!r} must be a number above 0 and at most "
                         f"{MAX_PART_HALF_THICKNESS}")
    return t


def checked_leg_flare(value, where):
    """A leg flare as a recipe or an option gives it: a finite number of at least 1, or an error
    that names where it came from."""
    try:
        flare = float(value)
    except (TypeError, ValueError):
        flare = math.nan
    if not (math.isfinite(flare) and flare >= 1.0):
        raise ValueError(f"{where}: leg flare {value!r} must be a finite number of at least 1 (1: straight legs)")
    return flare


# Where a model folder records the recipe it was trained with: its own run, or the autoregressive
# run a block-diffusion folder was fine-tuned from (diffusion.py copies the setting over).
RECIPE_FILES = ("training/recipe.json", "checkpoints/recipe.json",
                "training/recipe_diffusion.json", "checkpoints/recipe_diffusion.json")


def configure_for_model(folder):
    """Draws shapes as the recipe that trained the model in `folder` did, so that held-out shapes,
    the judge's references and the examples are the kind of shape the model learned. A recipe
    that does not name the leg flare predates it: straight legs; one that does not name the part
    half-thickness was drawn at CHUNKY_PART_HALF_THICKNESS. A folder with no recipe keeps this
    module's settings."""
    global LEG_FLARE, PART_HALF_THICKNESS
    for name in RECIPE_FILES:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            try:
                recipe = json.load(open(path))
            except (OSError, ValueError) as e:
                raise ValueError(f"{path}: not a readable recipe ({e})") from e
            if not isinstance(recipe, dict):
                raise ValueError(f"{path}: a recipe is a JSON object of settings, not {type(recipe).__name__}")
            LEG_FLARE = checked_leg_flare(recipe.get("leg_flare", 1.0), path)
            PART_HALF_THICKNESS = checked_part_half_thickness(
                recipe.get("part_half_thickness", CHUNKY_PART_HALF_THICKNESS), path)
            return


def _t(factor=1.0):
    """The thinnest half-thickness a part may have, times factor (read at call time, so that a
    measurement can change PART_HALF_THICKNESS)."""
    return PART_HALF_THICKNESS * factor


def make_chair(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    seat_y, half_x, half_z = 0.45, 0.22 * w, 0.22
    round_form = a.get("form") == "round"
    parts = [_slab((0, seat_y, 0), half_x, t, half_z, round_form)]
    parts += _legs(a.get("legs") or 4, seat_y, seat_y, half_x - t, half_z - t, t, round_form,
                   square_legs=not round_form)
    back_h = 0.45 * h
    # The back stands on the seat's rear edge, down into the seat.
    parts.append(box((0, seat_y + back_h / 2, -(half_z - t)), (half_x, back_h / 2 + t, t)))
    return union(*parts)


def make_stool(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    f = LEG_FLARE
    # At least 3t across (and enough for flared tops), so that narrow stools keep gaps between
    # their legs.
    height, r = 0.5 * h, max(0.18 * w, 3 * t, 2.2 * f * t)
    round_form = a.get("form") != "square"
    parts = [_slab((0, height, 0), r, t * 1.2, r, round_form)]
    parts += _legs(a.get("legs") or 3, height, height, r - f * t, r - f * t, t, round_form,
                   square_legs=not round_form, flare=f)
    return union(*parts)


def make_table(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    height, half_x, half_z = 0.5 * h, 0.5 * w, 0.32
    round_form = a.get("form") == "round"
    if round_form:
        half_x = half_z = 0.38 * w
    parts = [_slab((0, height, 0), half_x, t, half_z, round_form)]
    f = LEG_FLARE
    inset = (1.5 * t if round_form else 1.2 * t) + (f - 1) * t
    parts += _legs(a.get("legs") or 4, height, height, half_x - inset, half_z - inset, t, round_form,
                   square_legs=not round_form, flare=f)
    return union(*parts)


def make_bench(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    height, half_x = 0.3 * h, 0.6 * w
    parts = [box((0, height, 0), (half_x, t, 0.14), rounding=0.02)]
    for x in (-(half_x - 2 * t), half_x - 2 * t):
        parts.append(box((x, height / 2, 0), (t, height / 2, 0.12)))
    return union(*parts)


def make_sofa(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    half_x = 0.55 * w
    base = box((0, 0.18, 0), (half_x, 0.12, 0.28), rounding=0.05)
    back = box((0, 0.25 + 0.2 * h, -0.22), (half_x, 0.2 * h, max(0.07, _t())), rounding=0.05)
    arms = [box((s * (half_x - 0.06), 0.32, 0), (max(0.07, _t()), 0.14, 0.28), rounding=0.05) for s in (-1, 1)]
    return union(base, back, *arms)


def make_bed(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    half_x = 0.45 * w
    frame = box((0, 0.15, 0), (half_x, 0.08, 0.5), rounding=0.02)
    mattress = box((0, 0.27, 0.02), (half_x * 0.95, 0.05, 0.47), rounding=0.04)
    head = box((0, 0.2 + 0.2 * h, -(0.5 - t)), (half_x, 0.2 * h + 0.12, t))
    legs = _legs(4, 0.12, 0.12, half_x - t, 0.5 - t, t, False, square_legs=True)
    return union(frame, mattress, head, *legs)


def make_shelf(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    height, half_x, half_z = 0.9 * h, 0.35 * w, 0.15
    shelves = max(2, int(round(3 * h)))
    parts = [box((s * (half_x - t), height / 2, 0), (t, height / 2, half_z)) for s in (-1, 1)]
    parts.append(box((0, height / 2, -(half_z - t)), (half_x, height / 2, t)))
    for k in range(shelves + 1):
        y = t + (height - 2 * t) * k / shelves
        parts.append(box((0, y, 0), (half_x, t, half_z)))
    return union(*parts)


def make_mug(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    r, half_h = 0.2 * w, 0.22 * h
    round_form = a.get("form") != "square"
    outer = cylinder((0, half_h, 0), r, half_h) if round_form else box((0, half_h, 0), (r, half_h, r), 0.02)
    # Walls and bottom 2t thick; an opening only where its radius can be at least t.
    inner_r = r - 2 * t
    body = outer
    if inner_r >= t:
        inner = cylinder((0, half_h + 2 * t, 0), inner_r, half_h) if round_form else box(
            (0, half_h + 2 * t, 0), (inner_r, half_h, inner_r))
        body = subtract(outer, inner)
    major = max(0.55 * half_h, 2 * t)
    handle = torus((r + major - t, half_h, 0), major, t, axis="z")
    return union(body, subtract(handle, outer))


def make_bowl(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    r = 0.35 * w
    outer = ellipsoid((0, 0.25 * h, 0), (r, 0.25 * h, r))
    inner = ellipsoid((0, 0.25 * h + 2 * t, 0), (r - 2 * t, 0.25 * h, r - 2 * t))
    cut = box((0, 0.25 * h + 0.5, 0), (1.0, 0.5, 1.0))
    foot = cylinder((0, t, 0), r * 0.45, t)
    return union(subtract(subtract(outer, inner), cut), foot)


def make_vase(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    r = 0.16 * w
    body = ellipsoid((0, 0.25 * h, 0), (r, 0.25 * h, r))
    neck_r = max(r * 0.5, 1.2 * t)
    neck = cylinder((0, 0.55 * h, 0), neck_r, 0.12 * h + 0.05 * h)
    lip = cone((0, 0.67 * h + t, 0), neck_r, neck_r + t, t)
    return union(body, neck, lip)


def make_bottle(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    r = 0.12 * w
    round_form = a.get("form") != "square"
    body = cylinder((0, 0.3 * h, 0), r, 0.3 * h) if round_form else box((0, 0.3 * h, 0), (r, 0.3 * h, r), 0.03)
    neck_r = max(r * 0.35, t)
    shoulder = cone((0, 0.6 * h + 0.05, 0), r, neck_r, 0.07)
    neck = cylinder((0, 0.6 * h + 0.18, 0), neck_r, 0.08)
    return union(body, shoulder, neck)


def make_lamp(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    height = 0.8 * h
    base = cylinder((0, t, 0), max(0.15 * w, 3 * t), t)
    pole = cylinder((0, height / 2, 0), t, height / 2)
    # A solid shade, so that the pole runs up into it.
    shade = cone((0, height, 0), max(0.2 * w, 3 * t), max(0.1 * w, 1.5 * t), 0.1)
    return union(base, pole, shade)


def make_tree(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    trunk = cylinder((0, 0.2 * h + t, 0), max(0.05, 1.2 * t), 0.2 * h + t)
    if a.get("form") == "round":
        crown = sphere((0, 0.4 * h + 0.25 * w, 0), 0.28 * w)
        return union(trunk, crown)
    tiers = [cone((0, 0.35 * h + k * 0.22 * h, 0), 0.32 * w * (1 - 0.25 * k), 0.02, 0.16 * h) for k in range(3)]
    return union(trunk, *tiers)


def make_mushroom(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    stem = cylinder((0, 0.2 * h + 0.02, 0), max(0.07 * w, 1.2 * _t()), 0.2 * h + 0.02)
    cap = subtract(ellipsoid((0, 0.4 * h, 0), (0.3 * w, 0.18, 0.3 * w)), box((0, 0.4 * h - 0.5, 0), (1, 0.5, 1)))
    return union(stem, cap)


def make_snowman(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    r0 = 0.25 * w
    balls, y, r = [], r0, r0
    count = 4 if a.get("height") == "tall" else (2 if a.get("height") == "short" else 3)
    for _ in range(count):
        balls.append(sphere((0, y, 0), r))
        y += r * 1.55
        r *= 0.72
    return union(*balls)


def make_house(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    half_x, wall_h = 0.4 * w, 0.35 * h
    walls = box((0, wall_h / 2, 0), (half_x, wall_h / 2, 0.3))
    # Gabled roof: a box rotated 45 degrees about x, intersected with the half-space above the walls.
    def roof(p):
        q = p.copy()
        q[:, 1] -= wall_h
        y, z = q[:, 1], q[:, 2]
        q[:, 1], q[:, 2] = (y + z) / math.sqrt(2), (y - z) / math.sqrt(2)
        prism = box((0, 0, 0), (half_x + 0.04, 0.25, 0.25))(q)
        return np.maximum(prism, -p[:, 1] + wall_h)
    chimney = box((half_x * 0.5, wall_h + 0.2, -0.1), (max(0.04, 1.2 * t), 0.12, max(0.04, 1.2 * t)))
    return union(walls, roof, chimney)


def make_tower(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    height, r = 1.0 * h, 0.18 * w
    round_form = a.get("form") != "square"
    body = cylinder((0, height / 2, 0), r, height / 2) if round_form else box((0, height / 2, 0), (r, height / 2, r))
    top = cone((0, height + 0.15, 0), r * 1.2, 0.0, 0.15) if round_form else box(
        (0, height + 0.04, 0), (r * 1.15, max(0.04, _t()), r * 1.15))
    return union(body, top)


def make_car(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    half_x = 0.45 * w
    body = box((0, 0.16, 0), (half_x, 0.08, 0.2), rounding=0.04)
    cabin = box((-0.05 * w, 0.24 + 0.06 * h, 0), (half_x * 0.55, 0.07 * h, 0.17), rounding=0.04)
    wheels = [cylinder((sx * half_x * 0.65, 0.08, sz * 0.2), 0.08, max(0.03, t), axis="z")
              for sx in (-1, 1) for sz in (-1, 1)]
    return union(body, cabin, *wheels)


def make_rocket(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    r, body_h = 0.1 * w, 0.5 * h
    body = cylinder((0, body_h / 2 + 0.1, 0), r, body_h / 2)
    nose = cone((0, body_h + 0.1 + 0.12, 0), r, 0.0, 0.12)
    # Four fins from inside the body outwards, each t thick on either side of its plane.
    reach = 0.08 + t
    fins = [box((sx * (r + reach) / 2, 0.12, sz * (r + reach) / 2),
                ((r + reach) / 2 if sx else t, 0.1, (r + reach) / 2 if sz else t))
            for sx, sz in ((1, 0), (-1, 0), (0, 1), (0, -1))]
    nozzle = cone((0, 0.05, 0), r * 0.8, max(r * 0.5, t), 0.05)
    return union(body, nose, nozzle, *fins)


def make_boat(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    half_x = 0.5 * w
    hull = subtract(ellipsoid((0, 0.15, 0), (half_x, 0.15, 0.18)), box((0, 0.65, 0), (1, 0.5, 1)))
    # The mast starts inside the hull; the sail hangs on the mast from just above the deck.
    mast = cylinder((0, 0.15 + 0.3 * h - t, 0), t, 0.3 * h + t)
    sail_w = max(0.1 * w, 2 * t)
    sail = box((sail_w, 0.2 + 0.3 * h, 0), (sail_w, 0.22 * h, t))
    return union(hull, mast, sail)


def make_dumbbell(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    half = 0.3 * w
    bar = cylinder((0, 0, 0), max(0.03, t), half, axis="x")
    round_form = a.get("form") != "square"
    r = max(0.11 * h, 2.2 * t)
    weights = [sphere((s * half, 0, 0), r) if round_form else box((s * half, 0, 0), (max(0.05, t), r, r))
               for s in (-1, 1)]
    return union(bar, *weights)


def make_ring(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    if a.get("form") == "square":
        outer = box((0, 0, 0), (0.4 * w, 0.4 * w, max(0.05 * h, t)), rounding=0.03)
        inner = box((0, 0, 0), (0.4 * w - max(0.1 * w, 2 * t), 0.4 * w - max(0.1 * w, 2 * t), 0.5))
        return subtract(outer, inner)
    return torus((0, 0, 0), 0.4 * w, max(0.08 * h, 1.2 * t), axis="z")


def make_arch(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    half_x, height = 0.4 * w, 0.6 * h
    block = box((0, height / 2, 0), (half_x, height / 2, 0.1))
    # Pillars at least 2t wide.
    opening_r = min(half_x * 0.6, half_x - 2 * t)
    opening = union(box((0, (height - 0.15 - opening_r) / 2 - 0.1, 0), (opening_r, (height - 0.15 - opening_r) / 2 + 0.1, 0.3)),
                    cylinder((0, height - 0.15 - opening_r, 0), opening_r, 0.3, axis="z"))
    return subtract(block, opening)


def make_bridge(a, rng):
    h, w = _height_scale(a, rng), _width_scale(a, rng)
    t = _t()
    half_x, deck_y, half_z = 0.7 * w, 0.3 * h, 0.15
    deck = box((0, deck_y, 0), (half_x, t, half_z))
    piers = [box((x, deck_y / 2, 0), (max(0.04, t), deck_y / 2, 0.12)) for x in (-half_x * 0.6, 0, half_x * 0.6)]
    # Low walls along both edges of the deck instead of rails on posts, standing in the deck.
    wall_top = deck_y + t + 0.08
    walls = [box((0, (deck_y + wall_top) / 2, s * (half_z - t)), (half_x, (wall_top - deck_y) / 2, t))
             for s in (-1, 1)]
    return union(deck, *piers, *walls)


# name -> (builder, attribute kinds it understands)
CATEGORIES = {
    "chair": (make_chair, ("height", "width", "form", "legs")),
    "stool": (make_stool, ("height", "width", "form", "legs")),
    "table": (make_table, ("height", "width", "form", "legs")),
    "bench": (make_bench, ("height", "width")),
    "sofa": (make_sofa, ("height", "width")),
    "bed": (make_bed, ("height", "width")),
    "shelf": (make_shelf, ("height", "width")),
    "mug": (make_mug, ("height", "width", "form")),
    "bowl": (make_bowl, ("height", "width")),
    "vase": (make_vase, ("height", "width")),
    "bottle": (make_bottle, ("height", "width", "form")),
    "lamp": (make_lamp, ("height", "width")),
    "tree": (make_tree, ("height", "width", "form")),
    "mushroom": (make_mushroom, ("height", "width")),
    "snowman": (make_snowman, ("height", "width")),
    "house": (make_house, ("height", "width")),
    "tower": (make_tower, ("height", "width", "form")),
    "car": (make_car, ("height", "width")),
    "rocket": (make_rocket, ("height", "width")),
    "boat": (make_boat, ("height", "width")),
    "dumbbell": (make_dumbbell, ("height", "width", "form")),
    "ring": (make_ring, ("height", "width", "form")),
    "arch": (make_arch, ("height", "width")),
    "bridge": (make_bridge, ("height", "width")),
}

# Categories whose objects are meant to be several separate pieces (tests/train/shapes_test.py
# checks that every other one is one piece; evaluate.py counts the pieces of generations): none.
SEVERAL_PIECES = frozenset()

ATTRIBUTE_VALUES = {"height": HEIGHT, "width": WIDTH, "form": FORM, "legs": LEGS}


def random_attributes(category, rng, p_unspecified=0.35):
    """Draws attributes for a category; each one is left unspecified with probability p."""
    _, kinds = CATEGORIES[category]
    attrs = {}
    for kind in kinds:
        if rng.random() < p_unspecified:
            continue
        values = ATTRIBUTE_VALUES[kind]
        attrs[kind] = values[rng.integers(len(values))]
    return attrs


# --------------------------------------------------------------------------------------
# Sampling.


def _gradient(field, p, h=1e-3):
    g = np.empty_like(p)
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        g[:, i] = field(p + e) - field(p - e)
    return g / (2 * h)


def _project(field, p, iterations=6):
    for _ in range(iterations):
        d = field(p)
        g = _gradient(field, p)
        n2 = np.maximum(np.sum(g * g, axis=-1), 1e-12)
        p = p - (d / n2)[:, None] * g
    return p


# Every builder keeps its shape inside this region (y up, resting near y = 0).
REGION_LO = np.array([-1.5, -0.5, -1.5])
REGION_HI = np.array([1.5, 2.5, 1.5])


def _band_points(field, rng, count, grid=32):
    """Random points in the grid cells that the zero set may cross."""
    axes = [np.linspace(REGION_LO[i], REGION_HI[i], grid) for i in range(3)]
    cell = (REGION_HI - REGION_LO) / (grid - 1)
    centers = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    near = centers[np.abs(field(centers)) < 0.9 * _length(cell)]
    if len(near) < 8:
        raise ValueError("the shape has no surface inside the sampling region")
    picks = near[rng.integers(len(near), size=count)]
    return picks + rng.uniform(-0.5, 0.5, size=(count, 3)) * cell


def sample_shape(field, rng, surface_points=2048, query_points=2048, near_sigma=0.02):
    """Samples one shape in the normalised frame.

    Returns a dict of float32 arrays: surface [S, 3], normals [S, 3], queries [Q, 3],
    occupancy [Q] (1 inside, 0 outside), distance [Q] (the signed field there), the shape's
    normalised bbox extent [3], and the normalisation itself (center [3], scale []:
    normalised = (original - center) * scale).
    """
    p = _project(field, _band_points(field, rng, surface_points * 3))
    p = p[np.abs(field(p)) < 2e-4]
    # Where two parts touch face to face (a bottle's shoulder on its body), the union's zero
    # set has an internal face with a vanishing gradient; such points are not on the outside.
    gradient = _gradient(field, p)
    norm = _length(gradient)
    keep = norm > 0.2
    p, gradient, norm = p[keep], gradient[keep], norm[keep]
    if len(p) < surface_points:
        raise ValueError("projection found too few surface points")
    # Bounds from the surface itself, then the reference's rescale.
    bb_lo, bb_hi = p.min(0), p.max(0)
    center = (bb_lo + bb_hi) / 2
    scale = 2.0 * MESH_SCALE / (bb_hi - bb_lo).max()
    pick = rng.choice(len(p), size=surface_points, replace=False)
    normal = gradient[pick] / norm[pick, None]
    surface = (p[pick] - center) * scale
    # Queries: near-surface and uniform, labelled in the original frame.
    near_n = query_points // 2
    near = surface[rng.integers(len(surface), size=near_n)] + rng.normal(0, near_sigma, size=(near_n, 3))
    far = rng.uniform(-QUERY_BOUND, QUERY_BOUND, size=(query_points - near_n, 3))
    queries = np.concatenate([near, far])
    # The field in the normalised frame: a signed distance (or a bound on one, where CSG
    # combines primitives), negative inside.
    distance = field(queries / scale + center) * scale
    occupancy = (distance < 0).astype(np.float32)
    return {
        "surface": surface.astype(np.float32),
        "normals": normal.astype(np.float32),
        "queries": queries.astype(np.float32),
        "occupancy": occupancy,
        "distance": distance.astype(np.float32),
        "extent": ((bb_hi - bb_lo) * scale).astype(np.float32),
        "center": center.astype(np.float32),
        "scale": np.float32(scale),
    }


def make_shape(category, attrs, rng, **kwargs):
    builder, _ = CATEGORIES[category]
    return sample_shape(builder(attrs, rng), rng, **kwargs)


def occupancy_field(category, attrs, rng):
    """The shape's field, for evaluation code that needs exact inside/outside tests."""
    builder, _ = CATEGORIES[category]
    return builder(attrs, rng)


if __name__ == "__main__":
    import sys
    import time

    rng = np.random.default_rng(0)
    for name in CATEGORIES:
        t = time.time()
        attrs = random_attributes(name, rng)
        s = make_shape(name, attrs, rng)
        print(f"{name:10s} {str(attrs):50s} extent {np.round(s['extent'], 2)} "
              f"inside {s['occupancy'].mean():.2f} {time.time() - t:.2f}s", file=sys.stderr)
