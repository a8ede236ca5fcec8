"""Where a model folder's shape tokenizer loses held-out shapes: three probes of the exported
tokenizer, none of which changes the folder.

    /usr/bin/python3 tools/train/probe_tokenizer.py MODEL_DIR OUT.json [--per-category 3]
        [--decoder-data DATA.npz ... --decoder-steps 3000 --decoder-lr 3e-4]

  - quantisation: held-out volumetric IoU with the codes (what the engine decodes) and with the
    encoder's continuous vectors fed to the same decoder, and the codes' relative squared
    error; the difference bounds what a finer codebook could give back;
  - the occupancy threshold: held-out and fresh volumetric IoU, and how many one-piece shapes
    come back in one piece (the engine's resolution-6 grid, as evaluate.py counts them), when
    the decoded logits are cut at thresholds below 0 (the engine cuts at 0): whether a more
    generous decoder would join parts without losing IoU;
  - with --decoder-data, the decoder alone trained further (the encoder, the Fourier embedder
    and the codebook frozen, so every shape keeps its tokens and the GPT stays valid) on a
    recipe's data.npz, then the same figures: whether the decoder or the codes are the limit.

The shapes are evaluate.py's (its seeds 99 and 98), so the figures compare with its output.
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
import evaluate  # noqa: E402
import models  # noqa: E402
import pieces  # noqa: E402
import shapes  # noqa: E402
import train  # noqa: E402

THRESHOLDS = (0.0, -0.5, -1.0, -1.5, -2.0)


def load_tokenizer(folder):
    recipe = next((os.path.join(folder, name) for name in ("training/recipe.json", "checkpoints/recipe.json")
                   if os.path.exists(os.path.join(folder, name))), None)
    if recipe is None:
        sys.exit(f"{folder}: no training/recipe.json or checkpoints/recipe.json to read the tokenizer's sizes from")
    p = json.load(open(recipe))
    model = models.ShapeAutoEncoder(p["ae"])
    model.load_state_dict(models.load_safetensors(os.path.join(folder, "shape_tokenizer.safetensors")))
    model.eval()
    return model, p


@torch.no_grad()
def logits_at(model, latents, points, chunk=40000):
    return np.concatenate([model.occupancy_decoder(torch.from_numpy(points[i:i + chunk])[None], latents)[0].numpy()
                           for i in range(0, len(points), chunk)])


@torch.no_grad()
def figures(model, per_category):
    axis = pieces.engine_grid_axis(evaluate.RECONSTRUCTION_PIECES_RESOLUTION)
    grid = pieces.grid_points(axis).astype(np.float32)
    rows = []
    for held, seed in ((True, 99), (False, 98)):
        for name, s, uniform, truth in evaluate.tokenizer_test_shapes(np.random.default_rng(seed), per_category, held):
            z = model.encode(torch.from_numpy(s["surface"])[None], torch.from_numpy(s["normals"])[None])
            zq = model.vq.get_codebook()[model.vq.nearest(z)]
            latents = model.decoder(model.vq.c_out(zq))
            coded = logits_at(model, latents, uniform)
            row = {"held_out": held, "category": name,
                   "iou": {t: evaluate.iou(coded > t, truth) for t in THRESHOLDS}}
            if held:
                row["continuous_iou"] = evaluate.iou(logits_at(model, model.decoder(model.vq.c_out(z)), uniform) > 0,
                                                     truth)
                row["code_error"] = float(((z - zq) ** 2).sum() / (z ** 2).sum())
            if name not in shapes.SEVERAL_PIECES:
                occupancy = logits_at(model, latents, grid).reshape(len(axis), len(axis), len(axis))
                row["whole"] = {t: pieces.count_pieces(occupancy > t) == 1 for t in THRESHOLDS}
            rows.append(row)

    def mean(values):
        values = list(values)
        return float(np.mean(values)) if values else None

    out = {}
    for held, key in ((True, "held_out"), (False, "fresh")):
        mine = [r for r in rows if r["held_out"] == held]
        out[key] = {f"{t:g}": {"volumetric_iou": mean(r["iou"][t] for r in mine),
                                "whole": mean(r["whole"][t] for r in mine if "whole" in r)} for t in THRESHOLDS}
        out[key]["per_category_iou"] = {name: mean(r["iou"][0.0] for r in mine if r["category"] == name)
                                        for name in shapes.CATEGORIES}
    held_rows = [r for r in rows if r["held_out"]]
    out["held_out"]["continuous_iou"] = mean(r["continuous_iou"] for r in held_rows)
    out["held_out"]["code_relative_squared_error"] = mean(r["code_error"] for r in held_rows)
    return out


def train_decoder(model, p, paths, steps, lr, pos_weight=1.0, seed=5):
    """The decoder side of the tokenizer alone, on codes the frozen encoder picks: a fresh AdamW
    with the recipe's warm-up and cosine schedule, the recipe's batch and query counts. A
    pos_weight above 1 weighs the queries inside the shape more, so a doubtful point is drawn
    full: the trained counterpart of cutting at a lower threshold."""
    parts = [dict(np.load(path, allow_pickle=True)) for path in paths]
    data = {k: np.concatenate([part[k] for part in parts]) for k in ("surface", "normals", "queries", "occupancy",
                                                                     "held_out")}
    train_idx = np.nonzero(~data["held_out"].astype(bool))[0]
    frozen = set(map(id, [*model.encoder.parameters(), *model.embedder.parameters(), *model.vq.c_in.parameters(),
                          model.vq.codebook.weight, model.vq.cb_weight, model.vq.cb_bias]))
    params = [q for q in model.parameters() if id(q) not in frozen]
    for q in model.parameters():
        q.requires_grad_(id(q) not in frozen)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    model.train()
    t0 = time.time()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = train.lr_at(step, steps, lr, warmup=p.get("ae_warmup", 50))
        batch = rng.choice(train_idx, p["ae_batch"], replace=False)
        pts, nrm, qry, occ = train.ae_batch(data, batch, p, rng)
        with torch.no_grad():
            zq = model.vq.get_codebook()[model.vq.nearest(model.encode(pts, nrm))]
        loss = F.binary_cross_entropy_with_logits(model.occupancy_decoder(qry, model.decoder(model.vq.c_out(zq))), occ,
                                                  pos_weight=torch.tensor(pos_weight))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % 250 == 0 or step + 1 == steps:
            train.log(f"decoder {step + 1}/{steps} loss {loss.item():.4f} {(time.time() - t0) / (step + 1):.3f} s/step")
    model.eval()
    return sum(q.numel() for q in params)


def summary(label, f):
    h, r = f["held_out"], f["fresh"]
    line = (f"{label}: held-out volumetric IoU {h['0']['volumetric_iou']:.3f}, fresh {r['0']['volumetric_iou']:.3f}; "
            f"in one piece held out {h['0']['whole']:.3f}, fresh {r['0']['whole']:.3f}")
    if "continuous_iou" in h:
        line += (f"; continuous vectors {h['continuous_iou']:.3f} (codes' relative squared error "
                 f"{h['code_relative_squared_error']:.3f})")
    train.log(line)
    for t in THRESHOLDS[1:]:
        train.log(f"  cut at {t:+g}: held-out IoU {h[f'{t:g}']['volumetric_iou']:.3f}, fresh "
                  f"{r[f'{t:g}']['volumetric_iou']:.3f}; one piece {h[f'{t:g}']['whole']:.3f}, {r[f'{t:g}']['whole']:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--per-category", type=int, default=3, help="shapes per category, held out and fresh each")
    ap.add_argument("--decoder-data", nargs="+", metavar="DATA.npz",
                    help="train the decoder alone on these recipe data files, then probe again")
    ap.add_argument("--decoder-steps", type=int, default=3000)
    ap.add_argument("--decoder-lr", type=float, default=3e-4)
    ap.add_argument("--decoder-pos-weight", type=float, default=1.0,
                    help="weight of the inside queries' loss (1: the recipe's plain cross entropy)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    try:
        shapes.configure_for_model(args.model)
    except ValueError as e:
        sys.exit(str(e))
    model, p = load_tokenizer(args.model)
    result = {"model": os.path.basename(os.path.normpath(args.model)), "per_category": args.per_category,
              "thresholds": list(THRESHOLDS), "as_exported": figures(model, args.per_category)}
    summary("as exported", result["as_exported"])
    if args.decoder_data:
        trained = train_decoder(model, p, args.decoder_data, args.decoder_steps, args.decoder_lr,
                                args.decoder_pos_weight)
        result["decoder_trained"] = {"steps": args.decoder_steps, "peak_lr": args.decoder_lr,
                                     "pos_weight": args.decoder_pos_weight,
                                     "parameters_trained": trained, **figures(model, args.per_category)}
        summary(f"decoder trained {args.decoder_steps} more steps", result["decoder_trained"])
    if args.decoder_data:
        torch.save(model.state_dict(), args.out + ".tokenizer.pt")
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
