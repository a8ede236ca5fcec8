"""Measures the recipe's step times and extrapolates the whole run, for sizing presets.

    /usr/bin/python3 tools/train/measure.py [--preset full] [--threads 1] [--steps 4]

Times a few real steps of every stage with the preset's sizes (on a handful of generated
shapes) and prints, per stage, wall and CPU seconds per step and the stage's extrapolated
total. CPU seconds are what the process itself used: on a machine shared with other jobs,
they estimate an idle machine's wall time better than the wall clock does.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import captions  # noqa: E402
import shapes  # noqa: E402
import train  # noqa: E402


def timed(fn, steps):
    fn()  # warm-up (allocations, caches)
    wall, cpu = time.time(), time.process_time()
    for _ in range(steps):
        fn()
    return (time.time() - wall) / steps, (time.process_time() - cpu) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="full", choices=sorted(train.PRESETS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    p = train.PRESETS[args.preset]
    rng = np.random.default_rng(0)
    rows = []

    names = list(shapes.CATEGORIES)
    made = []

    def one_shape():
        name = names[len(made) % len(names)]
        made.append(shapes.make_shape(name, shapes.random_attributes(name, rng), rng,
                                      surface_points=p["surface_points"], query_points=p["query_points"]))

    n_shapes = len(names) * (p["shapes_per_category"] + p["held_out_per_category"])
    wall, cpu = timed(one_shape, max(args.steps, 8))
    rows.append(("data (per shape)", wall, cpu, n_shapes))

    data = {k: np.stack([m[k] for m in made]) for k in ("surface", "normals", "queries", "occupancy")}
    index = np.arange(len(made))
    model = train.models.ShapeAutoEncoder(p["ae"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def ae_step(quantise):
        batch = rng.choice(index, p["ae_batch"], replace=len(index) < p["ae_batch"])
        pts, nrm, qry, occ = train.ae_batch(data, batch, p, rng)
        logits, aux = model(pts, nrm, qry, quantise)
        loss = F.binary_cross_entropy_with_logits(logits, occ)
        if quantise:
            loss = loss + aux["codebook_loss"] + 0.25 * aux["commit_loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()

    rows.append(("ae_warm", *timed(lambda: ae_step(False), args.steps), p["ae_warm_steps"]))
    rows.append(("ae_vq", *timed(lambda: ae_step(True), args.steps), p["ae_vq_steps"]))

    texts = captions.corpus(np.random.default_rng(1), 2000)
    vocab, merges = bpe.train(texts)
    tokenizer = bpe.Tokenizer(vocab, merges)
    gpt, clip = train.build_gpt_and_clip(p, tokenizer)
    params = list(gpt.parameters()) + list(clip.parameters())
    gopt = torch.optim.AdamW(params, lr=1e-4)
    codebook = model.vq.get_codebook().detach()
    b, length, codes = p["gpt_batch"], p["ae"]["num_encoder_latents"], p["ae"]["num_codes"]

    def gpt_step():
        enc = [tokenizer.encode(texts[i]) for i in rng.integers(len(texts), size=b)]
        ids, masks = torch.tensor([e[0] for e in enc]), torch.tensor([e[1] for e in enc])
        target = torch.from_numpy(rng.integers(codes, size=(b, length)))
        cond = gpt.condition(clip(ids, masks), torch.zeros(b, 3))
        inputs = torch.cat([torch.full((b, 1), gpt.bos_id), target[:, :-1]], dim=1)
        logits = gpt(gpt.token_table(codebook)[inputs], cond)
        loss = F.cross_entropy(logits[..., :codes].reshape(-1, codes), target.reshape(-1))
        gopt.zero_grad()
        loss.backward()
        gopt.step()

    rows.append(("gpt+clip", *timed(gpt_step, args.steps), p["gpt_steps"]))
    print(f"preset {args.preset}, {args.threads} thread(s), load average {os.getloadavg()[0]:.1f}; "
          f"gpt {sum(x.numel() for x in gpt.parameters()) / 1e6:.2f} M, clip "
          f"{sum(x.numel() for x in clip.parameters()) / 1e6:.2f} M, autoencoder "
          f"{sum(x.numel() for x in model.parameters()) / 1e6:.2f} M parameters")
    print(f"{'stage':18s} {'wall s/step':>12s} {'cpu s/step':>11s} {'steps':>6s} {'total wall':>11s} {'total cpu':>10s}")
    tw = tc = 0.0
    for name, wall, cpu, steps in rows:
        tw += wall * steps
        tc += cpu * steps
        print(f"{name:18s} {wall:12.3f} {cpu:11.3f} {steps:6d} {wall * steps / 60:9.1f} m {cpu * steps / 60:8.1f} m")
    print(f"{'total':18s} {'':12s} {'':11s} {'':6s} {tw / 60:9.1f} m {tc / 60:8.1f} m")


if __name__ == "__main__":
    main()
