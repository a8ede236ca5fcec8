"""Counts the connected pieces of an occupancy grid, and builds the engine's meshing grid.

The built-in model's shapes are meant to come out in one piece (a table whose top floats above
its legs is a broken object, however good its IoU). shapes_test.py checks that the procedural
shapes themselves are one piece on the grid the engine meshes at resolution 7, and evaluate.py
counts the pieces of what the model generates. Pieces are counted with face connectivity (two
occupied cells join only across a shared face), the strictest reading: parts that touch only
along an edge or at a corner count apart.
"""

import numpy as np

import shapes


def engine_grid_axis(resolution):
    """The engine's grid coordinates along one axis at a resolution: 2^r + 1 points over
    [-1.05, 1.05] (inference/geometry/occupancy_grid.h)."""
    return np.linspace(-shapes.QUERY_BOUND, shapes.QUERY_BOUND, (1 << resolution) + 1)


def grid_points(axis):
    return np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)


def count_pieces(occupancy):
    """Connected pieces (face connectivity) of a boolean [n, n, n] grid; 0 when empty."""
    from scipy import ndimage  # python3-scipy (tools/setup.sh --train)

    _, count = ndimage.label(np.asarray(occupancy, dtype=bool))
    return int(count)


def shape_pieces(field, sample, resolution=7):
    """Pieces of a procedural shape on the engine's grid: `field` its signed distance (shapes.py)
    and `sample` what shapes.sample_shape returned for it (its normalisation)."""
    axis = engine_grid_axis(resolution)
    inside = field(grid_points(axis) / sample["scale"] + sample["center"]) < 0
    return count_pieces(inside.reshape(len(axis), len(axis), len(axis)))
