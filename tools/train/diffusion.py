"""Fine-tunes the built-in autoregressive model into a block-diffusion model, from a fixed seed.

    /usr/bin/python3 tools/train/diffusion.py OUT [--from assets/model] [--preset full|smoke]
        [--steps N] [--block-size B] [--device cpu|cuda] [--batch-scale K] [--max-seconds S]
        [--threads 1] [--blas-threads 2]

The block-diffusion model has the autoregressive model's architecture and tensors; only its
inputs and attention differ:
  - layout: the shape rows are the autoregressive inputs, BOS then tokens, at rotary positions
    0..N-1, and row p still predicts token p (the token whose input is row p+1). Rows form
    blocks of B; block k is rows kB..kB+B-1 and predicts tokens kB..kB+B-1. Its first row holds
    a known token (BOS or the previous block's last token); each other row holds its token once
    decoded and the mask token before (the padding token's embedding row, which the
    autoregressive model never reads). Block size 1 is the autoregressive model.
  - attention: bidirectional inside a block, causal across blocks (models.block_causal_visibility);
    the condition stays a causal prefix that every shape row sees.
Training (BD3-LM's two-copy form): the GPT sees [noisy copy ; clean copy] of the sequence, both
at positions 0..N-1. Noisy rows of block k see their own block and the clean rows of earlier
blocks; clean rows see clean rows of their block and earlier ones, as decoded blocks are seen at
inference. In every block of the noisy copy, m of the B-1 rows after the first are masked, m
uniform in 0..B-1; the loss is cross entropy on the tokens the block cannot see (masked rows
and the block's last token). Each batch draws its block size from BLOCK_SIZES, so one model
decodes with any of them and the block size can be chosen by measurement (the config records
the chosen one).

Stages (each checkpoints under OUT/checkpoints/ and is skipped or resumed when run again):
  1. data       the source run's shapes (train.make_dataset, the seed its recipe records
                and the same preset);
  2. tokens     encoded with the source model's shape tokenizer (train.encode_tokens);
  3. diffusion  the GPT from the source model's weights, fine-tuned; the CLIP text encoder, the
                shape tokenizer and the codebook stay frozen, so the folder shares them;
  4. export     OUT is a model folder: the fine-tuned shape_gpt.safetensors, copies of the
                source's shape tokenizer and clip/, and config.yaml with a block_diffusion
                section (block_size, mask_token_id, and the threshold to decode at by default
                when the preset or --threshold names one) that tells the engine how to decode it.
Curves go to OUT/checkpoints/curves_diffusion.csv; step times to OUT/checkpoints/timing.json.
--device, --batch-scale and --max-seconds work as in train.py, and a stopped run resumes exactly.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

if __name__ == "__main__":
    for i, arg in enumerate(sys.argv):
        if arg.startswith("--blas-threads"):
            value = arg.split("=", 1)[1] if "=" in arg else sys.argv[i + 1]
            os.environ["OPENBLAS_NUM_THREADS"] = value
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(os.cpu_count() or 1))

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import captions  # noqa: E402
import generate  # noqa: E402
import models  # noqa: E402
import shapes  # noqa: E402
import train  # noqa: E402

SEED = 20260202
BLOCK_SIZES = (4, 8, 16)
CHECKPOINT_EVERY = 100

PRESETS = {
    # Sized for the 2-core machine: 600 steps take about 5 minutes there (README.md). The
    # threshold the exported config names is the one measured on the shipped run (README.md,
    # "The block-diffusion fine-tune"): the highest with 3x fewer evaluations than tokens.
    "full": {"data_preset": "full", "batch": 16, "lr": 5e-4, "steps": 600, "block_sizes": BLOCK_SIZES,
             "block_size": 16, "threshold": 0.45},
    "smoke": {"data_preset": "smoke", "batch": 16, "lr": 1e-3, "steps": 120, "block_sizes": (2, 4),
              "block_size": 4},
}


def mask_token_id(gpt):
    """The padding token's row: the autoregressive model never reads it, so it is free to
    become the mask embedding without a new tensor shape."""
    return gpt.codes + 2


def noisy_inputs(clean, block_size, mask_id, rng):
    """In every block of every row, m uniform in 0..B-1 of the rows after the block's first are
    masked. Returns the noisy inputs and which targets count in the loss (the tokens the noisy
    block cannot see: masked inputs, and each block's last token, whose input row is in the
    next block), both on clean's device; the draws are NumPy's on the CPU."""
    batch, length = clean.shape
    blocks = length // block_size
    inner = block_size - 1
    masked = np.zeros((batch, length), dtype=bool)
    if inner > 0:
        counts = rng.integers(0, block_size, size=(batch, blocks, 1))
        ranks = np.argsort(np.argsort(rng.random((batch, blocks, inner)), axis=-1), axis=-1)
        inner_mask = ranks < counts
        full = np.zeros((batch, blocks, block_size), dtype=bool)
        full[:, :, 1:] = inner_mask
        masked = full.reshape(batch, length)
    noisy = clean.clone()
    noisy[torch.from_numpy(masked).to(clean.device)] = mask_id
    # Target p is token p, the input of row p + 1.
    unseen = np.zeros((batch, length), dtype=bool)
    unseen[:, :-1] = masked[:, 1:]
    unseen[:, block_size - 1::block_size] = True
    return noisy, torch.from_numpy(unseen).to(clean.device)


def two_copy_visibility(length, block_size):
    """[2L, 2L] visibility of [noisy ; clean]: noisy block k sees itself and clean blocks < k;
    clean block k sees clean blocks <= k."""
    block = torch.arange(length) // block_size
    same = block[None, :] == block[:, None]
    earlier = block[None, :] < block[:, None]
    upto = block[None, :] <= block[:, None]
    none = torch.zeros(length, length, dtype=torch.bool)
    top = torch.cat([same, earlier], dim=1)
    bottom = torch.cat([none, upto], dim=1)
    return torch.cat([top, bottom], dim=0)


def load_source(folder):
    tokenizer, clip, gpt, shape = generate.load_folder(folder)
    for p in list(clip.parameters()) + list(shape.parameters()):
        p.requires_grad_(False)
    return tokenizer, clip, gpt, shape


def finetune(work, data, tokens, source, p, budget=train.UNBOUNDED):
    tokenizer, clip, gpt, shape = source
    device = train.device_of(gpt)
    ckpt = os.path.join(work, "diffusion.pt")
    opt = torch.optim.AdamW(gpt.parameters(), lr=p["lr"], weight_decay=0.01, betas=(0.9, 0.95))
    step = 0
    rng = np.random.default_rng(SEED)
    resumed = os.path.exists(ckpt)
    if resumed:
        saved = train.load_checkpoint(ckpt)
        gpt.load_state_dict(saved["gpt"])
        opt.load_state_dict(saved["opt"])
        step, rng = saved["step"], train.restore_random_state(saved["rng"])
        train.log(f"diffusion: resumed at step {step}")
    gpt.train()
    with torch.no_grad():
        codebook = shape.vq.get_codebook().detach()
    held = data["held_out"].astype(bool)
    train_idx = np.nonzero(~held)[0]
    val_idx = np.nonzero(held)[0]
    steps = p["steps"]
    mask_id = mask_token_id(gpt)
    length = tokens.shape[1]
    resumed_at = step if resumed else -1
    curves = train.Curves(os.path.join(work, "curves_diffusion.csv"),
                          ["step", "block_size", "loss", "val_loss_b%d" % p["block_size"], "seconds_per_step"],
                          keep=lambda row: int(row[0]) <= resumed_at)
    batch_size = p["batch"] * p.get("batch_scale", 1)
    log_every, eval_every = train.every(10, p), train.every(100, p)
    cache = {}

    def text_features(texts):
        ids, masks = zip(*[cache.setdefault(t, tokenizer.encode(t)) for t in texts])
        with torch.no_grad():
            return clip(torch.tensor(ids, device=device), torch.tensor(masks, device=device))

    def batch(index, rng, templates, drop=0.1):
        texts, boxes = [], []
        for i in index:
            attrs = json.loads(str(data["attrs"][i]))
            text = captions.caption(str(data["category"][i]), attrs, rng, templates)
            texts.append("" if rng.random() < drop else text)
            boxes.append(train.bbox_condition(data["extent"][i]) if rng.random() < 0.5 else np.zeros(3, np.float32))
        return (texts, torch.from_numpy(np.stack(boxes).astype(np.float32)).to(device),
                torch.from_numpy(tokens[index]).to(device))

    def loss_of(texts, boxes, target, block_size, rng):
        cond = gpt.condition(text_features(texts), boxes)
        table = gpt.token_table(codebook)
        bos = torch.full((len(texts), 1), gpt.bos_id, dtype=torch.long, device=device)
        clean = torch.cat([bos, target[:, :-1]], dim=1)
        noisy, unseen = noisy_inputs(clean, block_size, mask_id, rng)
        positions = torch.cat([torch.arange(length), torch.arange(length)])
        visible = two_copy_visibility(length, block_size)
        logits = gpt.forward_visible(table[torch.cat([noisy, clean], dim=1)], cond, positions, visible)
        logits = logits[:, :length, :gpt.codes]
        return F.cross_entropy(logits[unseen], target[unseen])

    def validation_loss():
        with torch.no_grad():
            vrng = np.random.default_rng(11)
            return loss_of(*batch(val_idx, vrng, captions.HELD_OUT_TEMPLATES, drop=0.0), p["block_size"], vrng).item()

    if step == 0:
        # Where fine-tuning starts: the autoregressive model on this objective.
        curves.add(0, p["block_size"], -1.0, validation_loss(), 0.0)
    t_start, first = time.time(), step
    while step < steps:
        for g in opt.param_groups:
            g["lr"] = train.lr_at(step, steps, p["lr"], warmup=p["warmup"])
        block_size = int(p["block_sizes"][rng.integers(len(p["block_sizes"]))])
        index = rng.choice(train_idx, batch_size, replace=len(train_idx) < batch_size)
        loss = loss_of(*batch(index, rng, captions.TRAIN_TEMPLATES), block_size, rng)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(gpt.parameters(), 1.0)
        opt.step()
        step += 1
        if step % log_every == 0 or step == steps:
            sps = (time.time() - t_start) / (step - first)
            val = validation_loss() if step % eval_every == 0 or step == steps else -1.0
            curves.add(step, block_size, loss.item(), val, sps)
            train.log(f"diffusion {step}/{steps} block {block_size} loss {loss.item():.4f} val {val:.4f} "
                      f"{sps:.3f} s/step")
        stop = budget.spent()
        if stop or step % CHECKPOINT_EVERY == 0 or step == steps:
            train.save_checkpoint(ckpt, gpt=gpt.state_dict(), opt=opt.state_dict(), step=step,
                                  rng=train.random_state(rng))
        if stop:
            raise train.Stopped(f"diffusion step {step} of {steps}")
    if step > first:
        train.record_timing(work, "diffusion", (time.time() - t_start) / (step - first))
    gpt.eval()
    return gpt


def export(out, source_dir, gpt, shape, block_size, threshold=None):
    gpt.cpu()
    shape.cpu()
    state = {k: v.clone() for k, v in gpt.state_dict().items()}
    with torch.no_grad():
        # The engine overwrites these rows with shape_proj(codebook) at load; store the same.
        state["transformer.wte.weight"][:gpt.codes] = gpt.shape_proj(shape.vq.get_codebook())
    models.save_safetensors(os.path.join(out, "shape_gpt.safetensors"), state)
    shutil.copyfile(os.path.join(source_dir, "shape_tokenizer.safetensors"),
                    os.path.join(out, "shape_tokenizer.safetensors"))
    shutil.copytree(os.path.join(source_dir, "clip"), os.path.join(out, "clip"), dirs_exist_ok=True)
    lines = open(os.path.join(source_dir, "config.yaml")).read().split("\n")
    at = lines.index("shape_model:")
    while at > 0 and lines[at - 1] == "":
        at -= 1
    section = ["  block_diffusion:", f"    block_size: {block_size}", f"    mask_token_id: {mask_token_id(gpt)}"]
    if threshold is not None:
        section.append(f"    threshold: {threshold}")
    lines[at:at] = section
    open(os.path.join(out, "config.yaml"), "w").write("\n".join(lines))
    train.log(f"export: block-diffusion model folder written to {out} (block size {block_size}, "
              f"threshold {threshold if threshold is not None else 'the engine default'})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="model folder to write (work files go to OUT/checkpoints)")
    ap.add_argument("--from", dest="source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                   "..", "..", "assets", "model"),
                    help="the autoregressive model folder to start from (default: the built-in model)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="full",
                    help="full: the built-in model's data; smoke: the smoke recipe's (train.py --preset smoke)")
    ap.add_argument("--steps", type=int, help="fine-tuning steps instead of the preset's")
    ap.add_argument("--block-size", type=int, help="the block size the exported config names")
    ap.add_argument("--threshold", type=float,
                    help="the confidence threshold the exported config names (default: the preset's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--blas-threads", type=int, default=os.cpu_count() or 1)
    train.add_run_arguments(ap)
    args = ap.parse_args()
    budget = train.Budget(args.max_seconds, args.stop_after_units)
    torch.set_num_threads(args.threads)
    device = train.pick_device(args.device)
    torch.manual_seed(SEED)
    p = dict(PRESETS[args.preset])
    if args.steps:
        p["steps"] = args.steps
    if args.block_size:
        p["block_size"] = args.block_size
    if args.threshold is not None:
        if not 0.0 < args.threshold <= 1.0:
            sys.exit(f"--threshold {args.threshold}: a confidence threshold is in (0, 1]")
        p["threshold"] = args.threshold
    p = scale_batch(p, args.batch_scale)
    # The shapes the source model was trained on: its recipe's seed as well as its preset.
    data_p = dict(train.PRESETS[p["data_preset"]], seed=train.recipe_seed(args.source))
    p["data_seed"] = data_p["seed"]
    work = os.path.join(args.out, "checkpoints")
    os.makedirs(work, exist_ok=True)
    source = load_source(args.source)
    # The source's shapes (load_source configured them); recorded so this folder draws them too.
    p["leg_flare"] = shapes.LEG_FLARE
    p["part_half_thickness"] = shapes.PART_HALF_THICKNESS
    train.write_recipe(os.path.join(work, "recipe_diffusion.json"), {"preset": args.preset, "seed": SEED, **p})
    t0 = time.time()
    for module in source[1:]:
        module.to(device)
    try:
        data = train.make_dataset(work, data_p, budget)
        tokens = train.encode_tokens(work, source[3], data, data_p, budget)
        if tokens.shape[1] % max(p["block_sizes"]) or tokens.shape[1] % p["block_size"]:
            sys.exit(f"{tokens.shape[1]} tokens per shape are not a whole number of blocks of {p['block_sizes']}")
        gpt = finetune(work, data, tokens, source, p, budget)
    except train.Stopped as where:
        train.stopped(where, t0, work)
    export(args.out, args.source, gpt, source[3], p["block_size"], p.get("threshold"))
    train.log(f"total {time.time() - t0:.0f} s")


def scale_batch(p, k):
    """--batch-scale K as train.scale_batch: K times the batch, steps and warm-up divided by K
    (rounded up), the peak learning rate times sqrt(K)."""
    q = dict(p, batch_scale=k)
    q["warmup"] = -(-(30 if p["steps"] > 200 else 10) // k)
    q["steps"] = -(-p["steps"] // k)
    q["lr"] = p["lr"] * math.sqrt(k)
    return q


if __name__ == "__main__":
    main()
