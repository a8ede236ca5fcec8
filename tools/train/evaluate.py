"""Measures an exported model folder against the issue's quality targets, in PyTorch.

    /usr/bin/python3 tools/train/evaluate.py MODEL_DIR [--per-category 12] [--grid 32] [--json out.json]

All on shapes and captions the model never trained on:
  - tokenizer IoU: held-out shapes (held-out attribute combinations) encoded to codes and
    decoded; IoU of the occupancy at their labelled query points (target >= 0.85);
  - category accuracy: a caption per category in a held-out phrasing -> greedy tokens with
    guidance -> occupancy on a grid -> the category of the nearest reference shape by IoU.
    The references are fresh procedural shapes (another seed, random attributes) rasterised
    from their signed distance fields: a classifier that owes nothing to the trained model
    (target >= 90%). Its own accuracy on fresh true shapes is reported alongside;
  - attribute agreement: captions with one height or width word; the generated shape's
    aspect ratio (height over the larger horizontal side) against the median of the
    category's references: tall/narrow must be above it, short/wide below (target >= 80%);
  - non-empty, closed shapes: some occupied and some empty cells, none on the grid's
    boundary, so marching cubes gives a closed surface (target >= 98%).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import captions  # noqa: E402
import generate  # noqa: E402
import shapes  # noqa: E402


def grid_points(n):
    axis = np.linspace(-shapes.QUERY_BOUND, shapes.QUERY_BOUND, n)
    return np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3).astype(np.float32)


def reference_grid(category, attrs, rng, points):
    field = shapes.occupancy_field(category, attrs, rng)
    s = shapes.sample_shape(field, rng, surface_points=512, query_points=16)
    return field(points / s["scale"] + s["center"]) < 0


@torch.no_grad()
def decode_grid(shape, tokens, points):
    idx = torch.tensor(tokens).unsqueeze(0)
    logits = shape.decode_indices(idx, torch.from_numpy(points).unsqueeze(0))[0]
    return (logits > 0).numpy()


def aspect(occ, n):
    cells = np.argwhere(occ.reshape(n, n, n))
    if len(cells) == 0:
        return float("nan")
    ext = cells.max(0) - cells.min(0) + 1
    return ext[1] / max(ext[0], ext[2])


def iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--per-category", type=int, default=12, help="reference shapes per category")
    ap.add_argument("--grid", type=int, default=32)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tokenizer, clip, gpt, shape = generate.load_folder(args.model)
    rng = np.random.default_rng(99)
    n = args.grid
    points = grid_points(n)
    names = list(shapes.CATEGORIES)

    references, ref_aspect = [], {}
    for name in names:
        ratios = []
        for _ in range(args.per_category):
            occ = reference_grid(name, shapes.random_attributes(name, rng), rng, points)
            references.append((name, occ))
            ratios.append(aspect(occ, n))
        ref_aspect[name] = float(np.median(ratios))

    # The classifier itself, on fresh ground-truth shapes: how far its verdicts can be trusted.
    truth_correct = 0
    for name in names:
        occ = reference_grid(name, shapes.random_attributes(name, rng), rng, points)
        truth_correct += max((iou(occ, ref), ref_name) for ref_name, ref in references)[1] == name

    # Tokenizer reconstruction on held-out shapes.
    recon = []
    for name in names:
        attrs = dict(zip(("height", "width"), captions.HELD_OUT_COMBOS[name]))
        s = shapes.make_shape(name, attrs, rng, surface_points=2048, query_points=2048)
        with torch.no_grad():
            z = shape.encode(torch.from_numpy(s["surface"])[None], torch.from_numpy(s["normals"])[None])
            codes = shape.vq.nearest(z)
            logits = shape.decode_indices(codes, torch.from_numpy(s["queries"])[None])[0]
        recon.append(iou(logits.numpy() > 0, s["occupancy"] > 0.5))

    # Generation from held-out phrasings.
    correct, closed, agree, agree_total, rows = 0, 0, 0, 0, []
    for name in names:
        for attrs in ({}, {"height": "tall"}, {"height": "short"}, {"width": "wide"}, {"width": "narrow"}):
            text = captions.caption(name, attrs, rng, captions.HELD_OUT_TEMPLATES)
            occ = decode_grid(shape, generate.greedy_tokens(tokenizer, clip, gpt, shape, text), points)
            cube = occ.reshape(n, n, n)
            boundary = np.concatenate([cube[[0, -1]].ravel(), cube[:, [0, -1]].ravel(), cube[:, :, [0, -1]].ravel()])
            ok = 0 < occ.sum() < occ.size and not boundary.any()
            closed += ok
            scores = [(iou(occ, ref), ref_name) for ref_name, ref in references]
            predicted = max(scores)[1]
            correct += predicted == name
            ratio = aspect(occ, n)
            agreed = None
            if attrs:
                kind, word = next(iter(attrs.items()))
                above = ratio > ref_aspect[name]
                agreed = bool(above == (word in ("tall", "narrow")))
                agree += agreed
                agree_total += 1
            rows.append({"caption": text, "category": name, "predicted": predicted, "closed": bool(ok),
                         "aspect": None if np.isnan(ratio) else round(float(ratio), 3), "attribute_agrees": agreed})
    total = len(rows)
    figures = {
        "tokenizer_iou_held_out": float(np.mean(recon)),
        "category_accuracy": correct / total,
        "attribute_agreement": agree / max(agree_total, 1),
        "non_empty_closed": closed / total,
        "captions": total,
        "classifier_accuracy_on_true_shapes": truth_correct / len(names),
    }
    for k, v in figures.items():
        print(f"{k:24s} {v:.3f}" if isinstance(v, float) else f"{k:24s} {v}")
    if args.json:
        json.dump({"figures": figures, "rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
