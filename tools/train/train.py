"""Trains the built-in model from a fixed seed and exports a model folder the engine reads.

    /usr/bin/python3 tools/train/train.py OUT [--preset full|smoke] [--shapes-per-category N] [--ae-fourier-std S]
        [--threads 1] [--blas-threads 2]

Stages (each one checkpoints under OUT/checkpoints/ and is skipped or resumed when run again):
  1. data      procedural shapes (shapes.py) with captions' attributes; training shapes avoid
               the held-out attribute combinations (captions.py), which form a separate set;
  2. bpe       a CLIP-format BPE vocabulary trained on the caption corpus (bpe.py);
  3. ae_warm   the shape autoencoder without quantisation (occupancy BCE): a naive VQ from
               the start collapses its codebook and does not learn (see README.md);
  4. kmeans    codebook initialised by spherical k-means on encoder outputs;
  5. ae_vq     quantised training (straight-through), codebook + commitment losses, and
               dead-code restarts from recent encoder outputs;
  6. tokens    every training shape encoded to its token sequence;
  7. gpt       GPT and CLIP text encoder trained jointly, end to end, on next-token cross
               entropy (captions dropped to "" 10% of the time for classifier-free guidance,
               bbox given half of the time, zero otherwise, as the engine does without one);
  8. export    OUT/shape_gpt.safetensors, OUT/shape_tokenizer.safetensors, OUT/config.yaml,
               OUT/clip/ (config.json, model.safetensors, vocab.json, merges.txt).
Learning curves go to OUT/checkpoints/curves_<stage>.csv; step times to OUT/checkpoints/timing.json.
"""

import argparse
import csv
import json
import math
import os
import sys
import time

# Debian's PyTorch does its matrix products in OpenBLAS, whose thread count is fixed when the
# library loads: it must be set before torch is imported (see --blas-threads).
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
import bpe  # noqa: E402
import captions  # noqa: E402
import models  # noqa: E402
import shapes  # noqa: E402

PRESETS = {
    # Sized for about two hours on two cores (README.md has the measured step times).
    "full": {
        "shapes_per_category": 60, "held_out_per_category": 6, "surface_points": 1024, "query_points": 2048,
        # Width 64: the occupancy decoder runs once per grid point at inference, and its cost
        # grows with width squared; 64 keeps a resolution-7 object near the 1 s target.
        "ae": {"num_encoder_latents": 64, "num_codes": 512, "embed_dim": 16, "width": 64, "num_heads": 4,
               "num_freqs": 16, "num_encoder_layers": 3, "encoder_cross_attention_levels": [0],
               "num_decoder_layers": 4, "eps": 1e-6, "point_feats": 3},
        "ae_batch": 16, "ae_encoder_points": 512, "ae_queries": 768, "ae_lr": 1e-3, "ae_label_tau": 0.0,
        "ae_warm_steps": 4500, "ae_vq_steps": 2500, "dead_code_every": 100,
        "gpt": {"n_layer": 4, "n_single_layer": 1, "n_head": 4, "n_embd": 128, "rope_theta": 10000.0,
                "bias": True, "eps": 1e-6, "use_bbox": True},
        "clip": {"width": 96, "layers": 2, "heads": 4},
        "gpt_batch": 24, "gpt_lr": 1e-3, "gpt_steps": 2500,
    },
    # Minutes at most: checks the whole recipe end to end, not a usable model.
    "smoke": {
        "shapes_per_category": 2, "held_out_per_category": 1, "surface_points": 256, "query_points": 512,
        "ae": {"num_encoder_latents": 16, "num_codes": 64, "embed_dim": 8, "width": 32, "num_heads": 2,
               "num_freqs": 8, "num_encoder_layers": 2, "encoder_cross_attention_levels": [0],
               "num_decoder_layers": 1, "eps": 1e-6, "point_feats": 3},
        "ae_batch": 8, "ae_encoder_points": 256, "ae_queries": 256, "ae_lr": 3e-3, "ae_label_tau": 0.0,
        "ae_warm_steps": 800, "ae_vq_steps": 400, "dead_code_every": 25,
        "gpt": {"n_layer": 2, "n_single_layer": 1, "n_head": 2, "n_embd": 32, "rope_theta": 10000.0,
                "bias": True, "eps": 1e-6, "use_bbox": True},
        "clip": {"width": 32, "layers": 1, "heads": 2},
        "gpt_batch": 16, "gpt_lr": 3e-3, "gpt_steps": 300,
    },
}

SEED = 20260101
CHECKPOINT_EVERY = 250


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Curves:
    def __init__(self, path, fields):
        new = not os.path.exists(path)
        self.file = open(path, "a", newline="")
        self.writer = csv.writer(self.file)
        if new:
            self.writer.writerow(fields)

    def add(self, *row):
        self.writer.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in row])
        self.file.flush()


def record_timing(work, stage, seconds_per_step):
    path = os.path.join(work, "timing.json")
    data = json.load(open(path)) if os.path.exists(path) else {}
    data[stage] = seconds_per_step
    json.dump(data, open(path, "w"), indent=1)


def lr_at(step, total, peak, warmup=50):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


def save_checkpoint(path, **state):
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


# --------------------------------------------------------------------------------------
# 1. data


def make_dataset(work, p):
    path = os.path.join(work, "data.npz")
    if os.path.exists(path):
        return dict(np.load(path, allow_pickle=True))
    rng = np.random.default_rng(SEED)
    records = {"surface": [], "normals": [], "queries": [], "occupancy": [], "distance": [], "extent": [], "category": [],
               "attrs": [], "held_out": []}
    t0 = time.time()
    for name in shapes.CATEGORIES:
        made = {False: 0, True: 0}
        want = {False: p["shapes_per_category"], True: p["held_out_per_category"]}
        while made[False] < want[False] or made[True] < want[True]:
            attrs = shapes.random_attributes(name, rng)
            held = captions.is_held_out(name, attrs)
            if made[held] >= want[held]:
                if held or not made[True] < want[True]:
                    continue
                # Still short of held-out shapes: draw their combination directly.
                attrs["height"], attrs["width"] = captions.HELD_OUT_COMBOS[name]
                held = True
            try:
                s = shapes.make_shape(name, attrs, rng, surface_points=p["surface_points"],
                                      query_points=p["query_points"])
            except ValueError as e:
                log(f"skipped {name} {attrs}: {e}")
                continue
            for k in ("surface", "normals", "queries", "occupancy", "distance", "extent"):
                records[k].append(s[k])
            records["category"].append(name)
            records["attrs"].append(json.dumps(attrs))
            records["held_out"].append(held)
            made[held] += 1
        log(f"data: {name} done ({time.time() - t0:.0f} s)")
    data = {k: np.stack(v) if k not in ("category", "attrs") else np.array(v) for k, v in records.items()}
    np.savez(path, **data)
    record_timing(work, "data_seconds", time.time() - t0)
    return data


# --------------------------------------------------------------------------------------
# 2. BPE


def make_vocabulary(clip_dir):
    if os.path.exists(os.path.join(clip_dir, "merges.txt")):
        return bpe.Tokenizer.load(clip_dir)
    os.makedirs(clip_dir, exist_ok=True)
    texts = captions.corpus(np.random.default_rng(SEED + 1), 20000)
    vocab, merges = bpe.train(texts)
    bpe.save(clip_dir, vocab, merges)
    log(f"bpe: {len(vocab)} tokens, {len(merges)} merges")
    return bpe.Tokenizer(vocab, merges)


# --------------------------------------------------------------------------------------
# 3-5. shape autoencoder


def ae_batch(data, index, p, rng):
    pts = p["ae_encoder_points"]
    q = p["ae_queries"]
    s_idx = np.stack([rng.choice(data["surface"].shape[1], pts, replace=False) for _ in index])
    q_idx = np.stack([rng.choice(data["queries"].shape[1], q, replace=False) for _ in index])
    rows = np.asarray(index)[:, None]
    tau = p.get("ae_label_tau", 0.0)
    if tau > 0:
        if "distance" not in data:
            sys.exit("ae_label_tau needs distances in data.npz; this one was made before train.py stored them: "
                     "make it again (delete it and rerun)")
        # Soft labels: sigmoid(-distance / tau) is above 1/2 exactly inside, so the surface is
        # where it was, while every query also says how far it is from the surface.
        target = torch.sigmoid(torch.from_numpy(-data["distance"][rows, q_idx] / tau))
    else:
        target = torch.from_numpy(data["occupancy"][rows, q_idx])
    return (torch.from_numpy(data["surface"][rows, s_idx]), torch.from_numpy(data["normals"][rows, s_idx]),
            torch.from_numpy(data["queries"][rows, q_idx]), target)


def iou(logits, occupancy):
    pred = logits > 0
    truth = occupancy > 0.5
    inter = (pred & truth).sum().item()
    union = (pred | truth).sum().item()
    return inter / max(union, 1)


@torch.no_grad()
def evaluate_ae(model, data, index, p, quantise):
    rng = np.random.default_rng(7)
    model.eval()
    total_iou, n = 0.0, 0
    for start in range(0, len(index), p["ae_batch"]):
        chunk = index[start:start + p["ae_batch"]]
        pts, nrm, qry, occ = ae_batch(data, chunk, p, rng)
        logits, _ = model(pts, nrm, qry, quantise)
        for b in range(len(chunk)):
            total_iou += iou(logits[b], occ[b])
            n += 1
    model.train()
    return total_iou / max(n, 1)


@torch.no_grad()
def kmeans_codebook(model, data, train_idx, p, rng, iterations=15):
    zs = []
    for start in range(0, len(train_idx), p["ae_batch"]):
        pts, nrm, _, _ = ae_batch(data, train_idx[start:start + p["ae_batch"]], p, rng)
        zs.append(model.encode(pts, nrm).reshape(-1, p["ae"]["embed_dim"]))
    z = torch.cat(zs)
    k = p["ae"]["num_codes"]
    centroids = z[torch.from_numpy(rng.choice(len(z), k, replace=len(z) < k))].clone()
    for _ in range(iterations):
        assign = torch.cdist(z, centroids).argmin(1)
        for c in range(k):
            members = z[assign == c]
            if len(members):
                centroids[c] = members.mean(0)
            else:  # empty cluster: reseed from a random vector
                centroids[c] = z[rng.integers(len(z))]
        centroids = centroids * torch.rsqrt((centroids ** 2).mean(-1, keepdim=True) + 1e-5)
    vq = model.vq
    vq.cb_weight.fill_(1.0)
    vq.cb_bias.zero_()
    vq.codebook.weight.copy_(centroids)
    used = torch.cdist(z, vq.get_codebook()).argmin(1).unique().numel()
    log(f"kmeans: {used}/{k} codes used by {len(z)} encoder vectors")


def train_autoencoder(work, data, p):
    ckpt = os.path.join(work, "ae.pt")
    model = models.ShapeAutoEncoder(p["ae"])
    if p.get("ae_fourier_std"):
        with torch.no_grad():
            model.embedder.weight.normal_(0.0, p["ae_fourier_std"])
    opt = torch.optim.AdamW(model.parameters(), lr=p["ae_lr"], weight_decay=0.0)
    state = {"stage": "ae_warm", "step": 0}
    rng = np.random.default_rng(SEED + 2)
    if os.path.exists(ckpt):
        saved = torch.load(ckpt)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        rng = saved["rng"]
        log(f"autoencoder: resumed at {state}")
    if state["stage"] == "done":
        return model
    held = data["held_out"].astype(bool)
    train_idx = np.nonzero(~held)[0]
    val_idx = np.nonzero(held)[0]
    curves = Curves(os.path.join(work, "curves_ae.csv"),
                    ["stage", "step", "loss", "train_iou", "val_iou", "codes_used", "seconds_per_step"])
    usage = torch.zeros(p["ae"]["num_codes"])
    for stage, steps in (("ae_warm", p["ae_warm_steps"]), ("ae_vq", p["ae_vq_steps"])):
        if state["stage"] != stage:
            continue
        quantise = stage == "ae_vq"
        t_start = time.time()
        first = state["step"]
        while state["step"] < steps:
            step = state["step"]
            for g in opt.param_groups:
                g["lr"] = lr_at(step, steps, p["ae_lr"])
            batch = rng.choice(train_idx, p["ae_batch"], replace=False)
            pts, nrm, qry, occ = ae_batch(data, batch, p, rng)
            logits, aux = model(pts, nrm, qry, quantise)
            loss = F.binary_cross_entropy_with_logits(logits, occ)
            if quantise:
                loss = loss + aux["codebook_loss"] + 0.25 * aux["commit_loss"]
                usage += torch.bincount(aux["indices"].flatten(), minlength=usage.numel()).float()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            state["step"] += 1
            if quantise and state["step"] % p["dead_code_every"] == 0:
                dead = torch.nonzero(usage == 0).flatten()
                if len(dead):
                    with torch.no_grad():
                        z = aux["z"].reshape(-1, aux["z"].shape[-1])
                        pick = z[torch.from_numpy(rng.integers(len(z), size=len(dead)))]
                        vq = model.vq
                        vq.codebook.weight[dead] = (pick - vq.cb_bias) / vq.cb_weight
                codes_used = int((usage > 0).sum())
                usage.zero_()
            else:
                codes_used = -1
            done = state["step"]
            if done % 25 == 0 or done == steps:
                sps = (time.time() - t_start) / (done - first)
                val = evaluate_ae(model, data, val_idx, p, quantise) if done % 100 == 0 or done == steps else -1.0
                curves.add(stage, done, loss.item(), iou(logits, occ), val, codes_used, sps)
                log(f"{stage} {done}/{steps} loss {loss.item():.4f} iou {iou(logits, occ):.3f} "
                    f"val_iou {val:.3f} codes {codes_used} {sps:.3f} s/step")
            if done % CHECKPOINT_EVERY == 0:
                save_checkpoint(ckpt, model=model.state_dict(), opt=opt.state_dict(), state=state, rng=rng)
        record_timing(work, stage, (time.time() - t_start) / max(1, state["step"] - first))
        if stage == "ae_warm":
            kmeans_codebook(model, data, train_idx, p, rng)
            state = {"stage": "ae_vq", "step": 0}
            opt = torch.optim.AdamW(model.parameters(), lr=p["ae_lr"], weight_decay=0.0)
            save_checkpoint(ckpt, model=model.state_dict(), opt=opt.state_dict(), state=state, rng=rng)
    state = {"stage": "done", "step": 0}
    save_checkpoint(ckpt, model=model.state_dict(), opt=opt.state_dict(), state=state, rng=rng)
    log(f"autoencoder: held-out IoU {evaluate_ae(model, data, np.nonzero(held)[0], p, True):.3f} (quantised)")
    return model


@torch.no_grad()
def encode_tokens(work, model, data, p):
    path = os.path.join(work, "tokens.npy")
    if os.path.exists(path):
        return np.load(path)
    model.eval()
    rng = np.random.default_rng(SEED + 3)
    out = []
    for start in range(0, len(data["surface"]), p["ae_batch"]):
        idx = np.arange(start, min(start + p["ae_batch"], len(data["surface"])))
        pts, nrm, _, _ = ae_batch(data, idx, p, rng)
        out.append(model.vq.nearest(model.encode(pts, nrm)).numpy())
    tokens = np.concatenate(out).astype(np.int64)
    np.save(path, tokens)
    log(f"tokens: {tokens.shape}, {len(np.unique(tokens))} distinct codes")
    return tokens


# --------------------------------------------------------------------------------------
# 7. GPT + CLIP


def bbox_condition(extent):
    """What the engine feeds bbox_proj for a user bbox: scaled so its largest side is 1.925."""
    return extent / extent.max() * 1.925


def build_gpt_and_clip(p, tokenizer):
    clip_cfg = models.clip_config(p["clip"]["width"], p["clip"]["layers"], p["clip"]["heads"],
                                  len(tokenizer.vocab), tokenizer.start_id, tokenizer.end_id)
    gpt_cfg = dict(p["gpt"], shape_model_vocab_size=p["ae"]["num_codes"],
                   shape_model_embed_dim=p["ae"]["embed_dim"], text_model_embed_dim=p["clip"]["width"])
    return models.DualStreamGPT(gpt_cfg), models.ClipText(clip_cfg)


def train_gpt(work, data, tokens, shape_model, tokenizer, p):
    ckpt = os.path.join(work, "gpt.pt")
    gpt, clip = build_gpt_and_clip(p, tokenizer)
    params = list(gpt.parameters()) + list(clip.parameters())
    opt = torch.optim.AdamW(params, lr=p["gpt_lr"], weight_decay=0.01, betas=(0.9, 0.95))
    step = 0
    rng = np.random.default_rng(SEED + 4)
    if os.path.exists(ckpt):
        saved = torch.load(ckpt)
        gpt.load_state_dict(saved["gpt"])
        clip.load_state_dict(saved["clip"])
        opt.load_state_dict(saved["opt"])
        step, rng = saved["step"], saved["rng"]
        log(f"gpt: resumed at step {step}")
    with torch.no_grad():
        codebook = shape_model.vq.get_codebook().detach()
    held = data["held_out"].astype(bool)
    train_idx = np.nonzero(~held)[0]
    val_idx = np.nonzero(held)[0]
    steps = p["gpt_steps"]
    curves = Curves(os.path.join(work, "curves_gpt.csv"), ["step", "loss", "val_loss", "seconds_per_step"])
    cache = {}

    def encode_text(texts):
        ids, masks = zip(*[cache.setdefault(t, tokenizer.encode(t)) for t in texts])
        return torch.tensor(ids), torch.tensor(masks)

    def batch(index, rng, templates, drop=0.1):
        texts, boxes = [], []
        for i in index:
            attrs = json.loads(str(data["attrs"][i]))
            text = captions.caption(str(data["category"][i]), attrs, rng, templates)
            texts.append("" if rng.random() < drop else text)
            boxes.append(bbox_condition(data["extent"][i]) if rng.random() < 0.5 else np.zeros(3, np.float32))
        return texts, torch.from_numpy(np.stack(boxes).astype(np.float32)), torch.from_numpy(tokens[index])

    def loss_of(texts, boxes, target):
        ids, masks = encode_text(texts)
        cond = gpt.condition(clip(ids, masks), boxes)
        table = gpt.token_table(codebook)
        bos = torch.full((len(texts), 1), gpt.bos_id, dtype=torch.long)
        inputs = torch.cat([bos, target[:, :-1]], dim=1)
        logits = gpt(table[inputs], cond)
        return F.cross_entropy(logits[..., :gpt.codes].reshape(-1, gpt.codes), target.reshape(-1))

    t_start, first = time.time(), step
    while step < steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, p["gpt_lr"], warmup=100 if steps > 400 else 10)
        index = rng.choice(train_idx, p["gpt_batch"], replace=len(train_idx) < p["gpt_batch"])
        loss = loss_of(*batch(index, rng, captions.TRAIN_TEMPLATES))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % 25 == 0 or step == steps:
            sps = (time.time() - t_start) / (step - first)
            val = -1.0
            if step % 100 == 0 or step == steps:
                with torch.no_grad():
                    vrng = np.random.default_rng(11)
                    val = loss_of(*batch(val_idx, vrng, captions.HELD_OUT_TEMPLATES, drop=0.0)).item()
            curves.add(step, loss.item(), val, sps)
            log(f"gpt {step}/{steps} loss {loss.item():.4f} val {val:.4f} {sps:.3f} s/step")
        if step % CHECKPOINT_EVERY == 0 or step == steps:
            save_checkpoint(ckpt, gpt=gpt.state_dict(), clip=clip.state_dict(), opt=opt.state_dict(),
                            step=step, rng=rng)
    if step > first:
        record_timing(work, "gpt", (time.time() - t_start) / (step - first))
    return gpt, clip


# --------------------------------------------------------------------------------------
# 8. export


def export(out, p, shape_model, gpt, clip):
    shape_state = shape_model.state_dict()
    models.save_safetensors(os.path.join(out, "shape_tokenizer.safetensors"), shape_state)
    gpt_state = {k: v.clone() for k, v in gpt.state_dict().items()}
    with torch.no_grad():
        # The engine overwrites these rows with shape_proj(codebook) at load; store the same.
        gpt_state["transformer.wte.weight"][:gpt.codes] = gpt.shape_proj(shape_model.vq.get_codebook())
    models.save_safetensors(os.path.join(out, "shape_gpt.safetensors"), gpt_state)
    clip_dir = os.path.join(out, "clip")
    models.save_safetensors(os.path.join(clip_dir, "model.safetensors"), clip.state_dict())
    tcfg = dict(clip.cfg, model_type="clip_text_model")
    config = {"architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": tcfg["projection_dim"],
              "text_config": tcfg,
              "vision_config": {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                                "intermediate_size": 256, "image_size": 32, "patch_size": 16}}
    json.dump(config, open(os.path.join(clip_dir, "config.json"), "w"), indent=1)
    json.dump({"bos_token": bpe.START, "eos_token": bpe.END, "pad_token": bpe.END, "unk_token": bpe.END},
              open(os.path.join(clip_dir, "special_tokens_map.json"), "w"), indent=1)
    json.dump({"model_max_length": bpe.CONTEXT, "do_lower_case": True, "bos_token": bpe.START,
               "eos_token": bpe.END, "pad_token": bpe.END, "unk_token": bpe.END,
               "tokenizer_class": "CLIPTokenizer"}, open(os.path.join(clip_dir, "tokenizer_config.json"), "w"),
              indent=1)
    a, g = p["ae"], gpt.cfg
    lines = ["gpt_model:"]
    for key in ("n_layer", "n_single_layer", "rope_theta", "n_head", "n_embd", "bias", "eps",
                "shape_model_vocab_size", "text_model_embed_dim"):
        lines.append(f"  {key}: {_yaml(g[key])}")
    lines += ["  use_pooled_text_embed: false", f"  shape_model_embed_dim: {a['embed_dim']}",
              "  encoder_with_cls_token: true", f"  use_bbox: {_yaml(g['use_bbox'])}", "", "shape_model:",
              "  encoder_with_cls_token: true", f"  num_encoder_latents: {a['num_encoder_latents']}",
              "  num_decoder_latents: 0"]
    for key in ("embed_dim", "width", "num_heads"):
        lines.append(f"  {key}: {a[key]}")
    lines += ["  out_dim: 1", f"  eps: {_yaml(a['eps'])}", f"  num_freqs: {a['num_freqs']}",
              "  point_feats: 3", "  embed_point_feats: false", f"  num_encoder_layers: {a['num_encoder_layers']}",
              f"  encoder_cross_attention_levels: {a['encoder_cross_attention_levels']}",
              f"  num_decoder_layers: {a['num_decoder_layers']}", f"  num_codes: {a['num_codes']}", "",
              'text_model_pretrained_model_name_or_path: "clip"', ""]
    open(os.path.join(out, "config.yaml"), "w").write("\n".join(lines))
    captions.write_model_card(os.path.join(out, "card.json"))
    log(f"export: model folder written to {out}")


def _yaml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        # YAML 1.1 readers (PyYAML) take exponents only with a dot in the mantissa: 1.0e-06.
        return repr(v) if "e" not in repr(v) else f"{v:.6e}"
    return str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="model folder to write (work files go to OUT/checkpoints)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="full")
    ap.add_argument("--steps-scale", type=float, default=1.0,
                    help="multiply every stage's step count (a quick check of a preset end to end)")
    ap.add_argument("--shapes-per-category", type=int,
                    help="training shapes per category instead of the preset's (data is generated once per OUT)")
    ap.add_argument("--ae-fourier-std", type=float,
                    help="initialise the autoencoder's Fourier frequencies with this standard deviation instead of "
                         "sqrt(num_freqs / 2) (README.md: 8 lets one shape be fitted far better)")
    ap.add_argument("--threads", type=int, default=1,
                    help="PyTorch intra-op threads (default 1: with OpenBLAS already on both cores, a second "
                         "PyTorch thread made steps 1.6-2x slower on the 2-core machine; README.md)")
    ap.add_argument("--blas-threads", type=int, default=os.cpu_count() or 1,
                    help="OpenBLAS threads for matrix products (default: every core)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    log(f"{args.threads} PyTorch thread(s), {os.environ['OPENBLAS_NUM_THREADS']} OpenBLAS thread(s)")
    torch.manual_seed(SEED)
    p = dict(PRESETS[args.preset])
    for key in ("ae_warm_steps", "ae_vq_steps", "gpt_steps"):
        p[key] = max(1, int(round(p[key] * args.steps_scale)))
    if args.shapes_per_category:
        p["shapes_per_category"] = args.shapes_per_category
    if args.ae_fourier_std:
        p["ae_fourier_std"] = args.ae_fourier_std
    work = os.path.join(args.out, "checkpoints")
    os.makedirs(os.path.join(args.out, "clip"), exist_ok=True)
    os.makedirs(work, exist_ok=True)
    json.dump({"preset": args.preset, **p}, open(os.path.join(work, "recipe.json"), "w"), indent=1)
    t0 = time.time()
    data = make_dataset(work, p)
    tokenizer = make_vocabulary(os.path.join(args.out, "clip"))
    shape_model = train_autoencoder(work, data, p)
    tokens = encode_tokens(work, shape_model, data, p)
    gpt, clip = train_gpt(work, data, tokens, shape_model, tokenizer, p)
    export(args.out, p, shape_model, gpt, clip)
    log(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
