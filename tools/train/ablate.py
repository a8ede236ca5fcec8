"""Trains the autoencoder's unquantised stage alone, for comparing sizes and settings.

    /usr/bin/python3 tools/train/ablate.py DATA.npz OUT.json [--steps 2000] [--set width=128 ...]
        [--fourier-std S] [--per-category N] [--no-bottleneck] [--fit-one CATEGORY]
        [--part-half-thickness T [--make-data N]]

DATA.npz is a recipe's `checkpoints/data.npz`, so every variant sees the same shapes. `--set`
overrides a key of the preset's `ae` config (width, num_freqs, num_encoder_latents, ...) or a
training key (ae_batch, ae_lr, ae_encoder_points, ae_queries); values are JSON. The run uses a
full cosine schedule over `--steps` and writes its curve and final figures to OUT.json:
held-out IoU over the training query mix (as in curves_ae.csv) and held-out volumetric IoU over
uniform points (as evaluate.py reports it, here without quantisation), per category too.
The quantised stage usually costs a few hundredths of IoU on top; variants are compared here
before one is worth a whole recipe.

`--part-half-thickness T` builds the shapes with another thinnest part (shapes.py's
PART_HALF_THICKNESS) for the volumetric evaluation, and with `--make-data N` first writes
DATA.npz itself where it does not exist (N training shapes per category plus the preset's
held-out ones, from the recipe's seed), so that thicknesses can be compared on equal footing.
"""

import argparse
import json
import os
import sys
import time

if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import captions  # noqa: E402
import models  # noqa: E402
import shapes  # noqa: E402
import train  # noqa: E402


@torch.no_grad()
def volumetric_iou(model, rng, per_category):
    """Fresh shapes of every category's held-out attribute combination, encoded from 2048
    surface points and decoded at 20,000 uniform points."""
    model.eval()
    scores = {}
    for name in shapes.CATEGORIES:
        for _ in range(per_category):
            attrs = shapes.random_attributes(name, rng)
            attrs["height"], attrs["width"] = captions.HELD_OUT_COMBOS[name]
            field = shapes.occupancy_field(name, attrs, rng)
            s = shapes.sample_shape(field, rng, surface_points=2048, query_points=256)
            uniform = rng.uniform(-shapes.QUERY_BOUND, shapes.QUERY_BOUND, size=(20000, 3)).astype(np.float32)
            truth = field(uniform / s["scale"] + s["center"]) < 0
            logits, _ = model(torch.from_numpy(s["surface"])[None], torch.from_numpy(s["normals"])[None],
                              torch.from_numpy(uniform)[None], False)
            pred = (logits[0] > 0).numpy()
            scores.setdefault(name, []).append(float((pred & truth).sum() / max((pred | truth).sum(), 1)))
    model.train()
    return {name: float(np.mean(v)) for name, v in scores.items()}


def write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)


def fit_one_shape(model, p, category, steps, seed=5):
    """Trains on one fresh shape alone (batches of 8 resamplings of its 4096 surface points and
    65,536 labelled queries) and returns its volumetric IoU on itself every 100 steps: how
    well the network can represent a shape at all, with nothing to generalise."""
    rng = np.random.default_rng(seed)
    attrs = shapes.random_attributes(category, rng)
    field = shapes.occupancy_field(category, attrs, rng)
    s = shapes.sample_shape(field, rng, surface_points=4096, query_points=65536)
    uniform = rng.uniform(-shapes.QUERY_BOUND, shapes.QUERY_BOUND, size=(20000, 3)).astype(np.float32)
    truth = field(uniform / s["scale"] + s["center"]) < 0
    opt = torch.optim.AdamW(model.parameters(), lr=p["ae_lr"], weight_decay=0.0)
    curve = []
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = train.lr_at(step, steps, p["ae_lr"])
        si = np.stack([rng.choice(4096, p["ae_encoder_points"], replace=False) for _ in range(8)])
        qi = np.stack([rng.choice(65536, p["ae_queries"], replace=False) for _ in range(8)])
        logits, _ = model(torch.from_numpy(s["surface"][si]), torch.from_numpy(s["normals"][si]),
                          torch.from_numpy(s["queries"][qi]), False)
        loss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(s["occupancy"][qi]))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % 100 == 0 or step + 1 == steps:
            with torch.no_grad():
                pred = (model(torch.from_numpy(s["surface"][:2048])[None], torch.from_numpy(s["normals"][:2048])[None],
                              torch.from_numpy(uniform)[None], False)[0][0] > 0).numpy()
            curve.append({"step": step + 1, "loss": loss.item(),
                          "volumetric_iou": float((pred & truth).sum() / max((pred | truth).sum(), 1))})
            train.log(f"{category}: {step + 1}/{steps} loss {loss.item():.4f} IoU {curve[-1]['volumetric_iou']:.3f}")
    return curve


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--fourier-std", type=float,
                    help="initialise the Fourier frequencies with this standard deviation instead of sqrt(num_freqs / 2)")
    ap.add_argument("--per-category", type=int,
                    help="train on only the first N training shapes of each category (a test of how well the "
                         "network can fit at all: their IoU is reported as train_mix_iou)")
    ap.add_argument("--no-bottleneck", action="store_true",
                    help="diagnostic: feed the encoder's width-sized outputs straight to the decoder (no projection "
                         "to the code dimension and back); the result is not a tokenizer")
    ap.add_argument("--fit-one", metavar="CATEGORY",
                    help="instead: fit one fresh shape of CATEGORY alone (DATA.npz is not read) and report its IoU")
    ap.add_argument("--part-half-thickness", type=float, metavar="T",
                    help="build shapes with this thinnest half-thickness instead of shapes.PART_HALF_THICKNESS "
                         "(DATA.npz must have been made with the same, e.g. by --make-data)")
    ap.add_argument("--make-data", type=int, metavar="N",
                    help="where DATA.npz does not exist, make it first: N training shapes per category")
    ap.add_argument("--stretch", type=float, default=0.0, metavar="S",
                    help="augment every training shape with a random stretch: its height and its horizontal "
                         "size each scaled by exp(u), u uniform in [-S, S], then rescaled so the longest side "
                         "is what the recipe's rescale makes it (occupancy is unchanged by an affine map)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--volumetric-per-category", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(train.SEED + 2)
    p = json.loads(json.dumps(train.PRESETS["full"]))
    for item in args.set:
        key, sep, value = item.partition("=")
        target = p["ae"] if key in p["ae"] else p
        if not sep or key not in target:
            sys.exit(f"ablate.py: --set {item!r}: expected KEY=VALUE with KEY one of {sorted(p['ae'])} "
                     f"or the preset's ae_* keys")
        try:
            target[key] = json.loads(value)
        except json.JSONDecodeError:
            sys.exit(f"ablate.py: --set {item!r}: the value must be JSON (a number, true/false, or a list like [0,2])")
    if p["ae"]["width"] % p["ae"]["num_heads"]:
        sys.exit(f"ablate.py: width {p['ae']['width']} is not a multiple of num_heads {p['ae']['num_heads']}")

    if args.part_half_thickness is not None:
        if not args.part_half_thickness > 0:
            sys.exit(f"ablate.py: --part-half-thickness {args.part_half_thickness}: must be positive")
        shapes.PART_HALF_THICKNESS = args.part_half_thickness
    if args.make_data and not os.path.exists(args.data):
        work = os.path.dirname(os.path.abspath(args.data))
        if os.path.basename(args.data) != "data.npz":
            sys.exit(f"ablate.py: --make-data writes a recipe's data.npz; name DATA {args.data!r} .../data.npz")
        train.make_dataset(work, dict(p, shapes_per_category=args.make_data))
    model = models.ShapeAutoEncoder(p["ae"])
    if args.no_bottleneck:
        # An instance attribute, not a registered submodule, so that it shadows the method.
        object.__setattr__(model, "encode", model.encoder)
        model.vq.c_out = torch.nn.Identity()
    if args.fourier_std:
        with torch.no_grad():
            model.embedder.weight.normal_(0.0, args.fourier_std)
    if args.fit_one:
        if args.fit_one not in shapes.CATEGORIES:
            sys.exit(f"ablate.py: unknown category {args.fit_one!r}; known: {', '.join(shapes.CATEGORIES)}")
        curve = fit_one_shape(model, p, args.fit_one, args.steps)
        write_json(args.out, {"settings": args.set, "fourier_std": args.fourier_std, "ae": p["ae"],
                              "fit_one": args.fit_one, "steps": args.steps, "curve": curve})
        return
    data = dict(np.load(args.data, allow_pickle=True))
    held = data["held_out"].astype(bool)
    train_idx, val_idx = np.nonzero(~held)[0], np.nonzero(held)[0]
    if args.per_category:
        category = data["category"]
        train_idx = np.concatenate([train_idx[category[train_idx] == c][:args.per_category]
                                    for c in shapes.CATEGORIES])
    rng = np.random.default_rng(train.SEED + 2)
    opt = torch.optim.AdamW(model.parameters(), lr=p["ae_lr"], weight_decay=0.0)
    curve = []
    name = " ".join(args.set + ([f"fourier_std={args.fourier_std}"] if args.fourier_std else [])
                    + ([f"stretch={args.stretch}"] if args.stretch else [])
                    + ([f"per_category={args.per_category}"] if args.per_category else [])
                    + (["no_bottleneck"] if args.no_bottleneck else [])) or "preset"
    t0 = time.time()
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = train.lr_at(step, args.steps, p["ae_lr"])
        batch = rng.choice(train_idx, p["ae_batch"], replace=False)
        pts, nrm, qry, occ = train.ae_batch(data, batch, p, rng)
        if args.stretch > 0:
            pts, nrm, qry = train.stretched(pts, nrm, qry, data["extent"][batch], args.stretch, rng)
        logits, _ = model(pts, nrm, qry, False)
        loss = F.binary_cross_entropy_with_logits(logits, occ)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        done = step + 1
        if done % 250 == 0 or done == args.steps:
            val = train.evaluate_ae(model, data, val_idx, p, False)
            sps = (time.time() - t0) / done
            curve.append({"step": done, "loss": loss.item(), "train_iou": train.iou(logits, occ), "val_iou": val,
                          "seconds_per_step": sps})
            train.log(f"{name}: {done}/{args.steps} loss {loss.item():.4f} "
                      f"val_iou {val:.3f} {sps:.3f} s/step")
    train_mix = train.evaluate_ae(model, data, train_idx, p, False)
    per_category = volumetric_iou(model, np.random.default_rng(99), args.volumetric_per_category)
    result = {"settings": args.set, "fourier_std": args.fourier_std, "stretch": args.stretch,
              "no_bottleneck": args.no_bottleneck,
              "part_half_thickness": shapes.PART_HALF_THICKNESS,
              "ae": p["ae"], "steps": args.steps,
              "parameters": sum(x.numel() for x in model.parameters()),
              "training_shapes": len(train_idx), "train_mix_iou": train_mix,
              "held_out_mix_iou": curve[-1]["val_iou"],
              "held_out_volumetric_iou": float(np.mean(list(per_category.values()))),
              "per_category_volumetric_iou": per_category, "curve": curve}
    write_json(args.out, result)
    train.log(f"{name}: held-out volumetric IoU {result['held_out_volumetric_iou']:.3f}, "
              f"query mix {result['held_out_mix_iou']:.3f}, training shapes' query mix {train_mix:.3f}")


if __name__ == "__main__":
    main()
