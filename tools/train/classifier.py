"""An occupancy-grid category classifier that owes nothing to the trained model.

evaluate.py needs to say which category a generated shape is. It asks this classifier: a small
3D convolutional network trained on fresh procedural shapes (shapes.py, its own seed, random
attributes, never the training set), rasterised exactly from their signed distance fields on
the evaluation grid. It never sees the autoencoder, the GPT or anything they produced, so its
verdicts on generated shapes are independent of the generator. Its accuracy on further fresh
true shapes is measured and reported with every evaluation, to say how far it can be trusted.

Input: occupancy on an n^3 grid over [-QUERY_BOUND, QUERY_BOUND]^3 (n divisible by 2),
averaged over 2x2x2 blocks to (n/2)^3 fractions, which keeps thin parts (legs, handles) as
partial cells instead of dropping them.
"""

import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import shapes

SEED = 4242


def grid_points(n):
    axis = np.linspace(-shapes.QUERY_BOUND, shapes.QUERY_BOUND, n)
    return np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3).astype(np.float32)


def true_grid(category, attrs, rng, points):
    """Exact occupancy of a fresh shape on the grid, in the normalised frame the model uses."""
    field = shapes.occupancy_field(category, attrs, rng)
    s = shapes.sample_shape(field, rng, surface_points=512, query_points=16)
    return field(points / s["scale"] + s["center"]) < 0


def pooled(occupancy, n):
    """[N, n^3] booleans -> [N, 1, n/2, n/2, n/2] block fractions."""
    x = torch.as_tensor(np.asarray(occupancy, dtype=np.float32)).reshape(-1, 1, n, n, n)
    return F.avg_pool3d(x, 2)


class Net(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.c1 = nn.Conv3d(1, 16, 3, padding=1)
        self.c2 = nn.Conv3d(16, 32, 3, padding=1)
        self.c3 = nn.Conv3d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 2 * 2 * 2, 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool3d(F.relu(self.c1(x)), 2)
        x = F.max_pool3d(F.relu(self.c2(x)), 2)
        x = F.max_pool3d(F.relu(self.c3(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def _augment(x, rng):
    """Mirror images across x and z (the categories are mirror-symmetric there) and shifts of
    up to one cell, so the network keys on shape, not exact placement."""
    if rng.random() < 0.5:
        x = x.flip(2)
    if rng.random() < 0.5:
        x = x.flip(4)
    shift = tuple(int(v) for v in rng.integers(-1, 2, size=3))
    return torch.roll(x, shifts=shift, dims=(2, 3, 4))


class Classifier:
    def __init__(self, n=32, per_category=40, test_per_category=6, epochs=25, log=print):
        self.n = n
        self.names = list(shapes.CATEGORIES)
        rng = np.random.default_rng(SEED)
        points = grid_points(n)
        t0 = time.time()
        train_x, train_y, test_x, test_y, aspects = [], [], [], [], {}
        for label, name in enumerate(self.names):
            ratios = []
            for i in range(per_category + test_per_category):
                occ = true_grid(name, shapes.random_attributes(name, rng), rng, points)
                (train_x if i < per_category else test_x).append(occ)
                (train_y if i < per_category else test_y).append(label)
                if i < per_category:
                    ratios.append(aspect(occ, n))
            aspects[name] = float(np.nanmedian(ratios))  # a thin slab can miss every grid point
        self.median_aspect = aspects
        log(f"classifier: {len(train_x)} + {len(test_x)} fresh shapes in {time.time() - t0:.0f} s")
        x = pooled(train_x, n)
        y = torch.tensor(train_y)
        torch.manual_seed(SEED)
        self.net = Net(len(self.names))
        opt = torch.optim.Adam(self.net.parameters(), lr=2e-3)
        batch = 32
        t0 = time.time()
        for epoch in range(epochs):
            order = torch.from_numpy(rng.permutation(len(x)))
            for g in opt.param_groups:
                g["lr"] = 2e-3 * 0.5 * (1 + np.cos(np.pi * epoch / epochs))
            for start in range(0, len(x), batch):
                idx = order[start:start + batch]
                loss = F.cross_entropy(self.net(_augment(x[idx], rng)), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        self.net.eval()
        predicted = self.predict(test_x)
        self.accuracy_on_true_shapes = float(np.mean([p == self.names[t] for p, t in zip(predicted, test_y)]))
        log(f"classifier: trained in {time.time() - t0:.0f} s; accuracy on {len(test_x)} fresh true shapes "
            f"{self.accuracy_on_true_shapes:.3f}")

    @torch.no_grad()
    def predict(self, occupancies):
        logits = self.net(pooled(occupancies, self.n))
        return [self.names[i] for i in logits.argmax(1).tolist()]


def aspect(occupancy, n):
    """Height over the larger horizontal side of the occupied cells' bounding box (NaN if empty)."""
    cells = np.argwhere(np.asarray(occupancy).reshape(n, n, n))
    if len(cells) == 0:
        return float("nan")
    ext = cells.max(0) - cells.min(0) + 1
    return ext[1] / max(ext[0], ext[2])
