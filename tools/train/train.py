"""Trains the built-in model from a fixed seed and exports a model folder the engine reads.

    /usr/bin/python3 tools/train/train.py OUT [--preset full|smoke] [--shapes-per-category N] [--ae-fourier-std S]
        [--device cpu|cuda] [--batch-scale K] [--max-seconds S] [--threads 1] [--blas-threads 2]

Stages (each one checkpoints under OUT/checkpoints/ and is skipped or resumed when run again):
  1. data      procedural shapes (shapes.py) with captions' attributes; training shapes avoid
               the held-out attribute combinations (captions.py), which form a separate set;
               saved per category, so that an interrupted run keeps the categories it made;
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

Resuming is exact: a checkpoint holds the weights, the optimiser, the NumPy and PyTorch random
states and every counter a step reads, so a run stopped at any step (--max-seconds, or a crash
after the last periodic checkpoint) and run again with the same command exports the same bytes
as one that never stopped. The networks are initialised on the CPU and every random draw of
training is NumPy's; batches are assembled on the CPU and moved to --device, so both devices
start from the same weights and see the same data in the same order.
"""

import argparse
import csv
import json
import math
import os
import shutil
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
        "shapes_per_category": 180, "held_out_per_category": 6, "surface_points": 1024, "query_points": 2048,
        # Width 96: the occupancy decoder runs once per grid point at inference, and its cost
        # grows with width squared; 96 places thin parts markedly better than 64 and still keeps
        # a resolution-7 object under the 1 s target (README.md, "Width 96").
        # 1,024 codes: once the quantised stage stretches its shapes, 2,048 reconstruct no better
        # and would take the assets past their size limit (README.md, "Codes and stretched shapes").
        "ae": {"num_encoder_latents": 64, "num_codes": 1024, "embed_dim": 16, "width": 96, "num_heads": 4,
               "num_freqs": 16, "num_encoder_layers": 3, "encoder_cross_attention_levels": [0],
               "num_decoder_layers": 4, "eps": 1e-6, "point_feats": 3},
        "ae_batch": 16, "ae_encoder_points": 512, "ae_queries": 768, "ae_lr": 1e-3, "ae_label_tau": 0.0,
        "ae_warm_steps": 4500, "ae_vq_steps": 4000, "dead_code_every": 100,
        # The quantised stage sees each shape stretched at random (height and horizontal size each
        # by up to e^0.4), so proportions between the attribute combinations are not new to the
        # tokenizer: what moved held-out reconstruction to its target (README.md, same section).
        "ae_vq_stretch": 0.4,
        "gpt": {"n_layer": 4, "n_single_layer": 1, "n_head": 4, "n_embd": 128, "rope_theta": 10000.0,
                "bias": True, "eps": 1e-6, "use_bbox": True},
        "clip": {"width": 96, "layers": 2, "heads": 4},
        "gpt_batch": 24, "gpt_lr": 1e-3, "gpt_steps": 2500,
        # The guidance scale the exported folder names (gpt_model.guidance_scale): measured on the
        # finished model against the reference's 3, it draws more shapes whole and recognisable
        # (docs/builtin-model.md, "The guidance scale").
        "guidance_scale": 2.0,
    },
    # Minutes at most: checks the whole recipe end to end, not a usable model.
    "smoke": {
        "shapes_per_category": 2, "held_out_per_category": 1, "surface_points": 256, "query_points": 512,
        "ae": {"num_encoder_latents": 16, "num_codes": 64, "embed_dim": 8, "width": 32, "num_heads": 2,
               "num_freqs": 8, "num_encoder_layers": 2, "encoder_cross_attention_levels": [0],
               "num_decoder_layers": 1, "eps": 1e-6, "point_feats": 3},
        "ae_batch": 8, "ae_encoder_points": 256, "ae_queries": 256, "ae_lr": 3e-3, "ae_label_tau": 0.0,
        "ae_warm_steps": 800, "ae_vq_steps": 400, "dead_code_every": 25,
        # The quantised stage's stretch, so the resume and engine checks go through it too.
        "ae_vq_stretch": 0.4,
        "gpt": {"n_layer": 2, "n_single_layer": 1, "n_head": 2, "n_embd": 32, "rope_theta": 10000.0,
                "bias": True, "eps": 1e-6, "use_bbox": True},
        "clip": {"width": 32, "layers": 1, "heads": 2},
        "gpt_batch": 16, "gpt_lr": 3e-3, "gpt_steps": 300,
        # Not the reference's 3, so the checks against the engine show both read the folder's scale.
        "guidance_scale": 2.0,
    },
}

SEED = 20260101
CHECKPOINT_EVERY = 250
# Exit status of a run stopped by --max-seconds (EX_TEMPFAIL, sysexits.h: "try again later").
EXIT_STOPPED = 75


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Curves:
    def __init__(self, path, fields, keep=None):
        """keep(row) -> bool, row as the CSV's strings: on a resumed run, the rows of earlier
        sittings to keep (those up to the checkpoint resumed from; a crash can leave later ones,
        which the resumed run writes again)."""
        new = not os.path.exists(path)
        if not new and keep is not None:
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
            kept = rows[:1] + [row for row in rows[1:] if keep(row)]
            if len(kept) < len(rows):
                with open(path, "w", newline="") as f:
                    csv.writer(f).writerows(kept)
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


# --------------------------------------------------------------------------------------
# Devices, checkpoints and bounded runs


def pick_device(name):
    """torch.device for --device, or exit naming what is missing. On CUDA, deterministic
    kernels where PyTorch has them (a warning names any op without one), so that a resumed run
    repeats an uninterrupted one there too; cuBLAS needs its workspace fixed for that, before
    its first use."""
    if name == "cpu":
        return torch.device("cpu")
    if torch.version.cuda is None:
        sys.exit(f"--device cuda: this PyTorch ({torch.__version__}, {torch.__file__}) was built without CUDA; "
                 "run with a CUDA build of PyTorch, or with --device cpu")
    if not torch.cuda.is_available():
        sys.exit(f"--device cuda: PyTorch {torch.__version__} (CUDA {torch.version.cuda}) finds no CUDA device: "
                 "no GPU or no NVIDIA driver is visible to this process")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    log(f"device: {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}")
    return torch.device("cuda")


def device_of(module):
    return next(module.parameters()).device


def to_cpu(value):
    """Tensors inside dicts, lists and tuples copied to the CPU: a checkpoint written on either
    device loads on either."""
    if torch.is_tensor(value):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def random_state(rng):
    """The NumPy generator's state (a plain dict, readable by any NumPy version) and PyTorch's."""
    state = {"numpy": rng.bit_generator.state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def restore_random_state(saved):
    """Sets PyTorch's generators from `saved` and returns the NumPy generator. Checkpoints
    written before the states were saved hold the pickled generator alone."""
    if isinstance(saved, np.random.Generator):
        return saved
    rng = np.random.Generator(getattr(np.random, saved["numpy"]["bit_generator"])())
    rng.bit_generator.state = saved["numpy"]
    torch.set_rng_state(saved["torch"])
    if "cuda" in saved and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.set_rng_state(saved["cuda"])
    return rng


def save_checkpoint(path, **state):
    torch.save(to_cpu(state), path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(path):
    # weights_only=False: the file holds the random states and counters besides tensors (and
    # only this recipe writes it). PyTorch 2.6 and later default to True.
    return torch.load(path, map_location="cpu", weights_only=False)


class Stopped(Exception):
    """Raised at a safe point (everything done so far is saved) when the run's time is up."""


class Budget:
    """When this run stops: the first safe point after --max-seconds of wall time, or after
    --stop-after-units N units of work (a test hook: a wall-clock stop lands anywhere, this one
    on a chosen step). A unit is the work between two safe points: one category of data, the
    vocabulary, one training step, k-means, the token encoding. Units loaded from an earlier
    sitting are not counted."""

    def __init__(self, max_seconds=None, stop_after=None):
        self.deadline = None if max_seconds is None else time.time() + max_seconds
        self.left = stop_after

    def spent(self):
        """Counts one unit as done; True when the run must save and stop here."""
        if self.left is not None:
            self.left -= 1
            if self.left <= 0:
                return True
        return self.deadline is not None and time.time() >= self.deadline


UNBOUNDED = Budget()


def scale_batch(p, k):
    """--batch-scale K: batches K times larger, every step count divided by K (rounded up, so
    the stage sees at least as many samples), warm-ups, the dead-code window and the curve
    intervals too, and peak learning rates times sqrt(K). Square root, not linear: with Adam the
    update size does not grow with the gradient's, and the square-root rule keeps the noise of
    an update the same (Malladi et al. 2022, "On the SDEs and Scaling Rules for Adaptive
    Gradient Algorithms"); the linear rule, derived for SGD, would put the autoencoder's peak
    at 1.6e-2 for K = 16. Training batch sizes are p[..._batch] * p["batch_scale"]; the
    unscaled size stays the chunk of the no-gradient passes (evaluation, k-means, tokens), so
    their samples do not depend on K. K = 1 changes nothing."""
    q = dict(p, batch_scale=k)
    q["ae_warmup"] = 50
    q["gpt_warmup"] = 100 if p["gpt_steps"] > 400 else 10
    for key in ("ae_warm_steps", "ae_vq_steps", "gpt_steps", "ae_warmup", "gpt_warmup"):
        q[key] = -(-p.get(key, q[key]) // k)
    q["dead_code_every"] = max(1, round(p["dead_code_every"] / k))
    for key in ("ae_lr", "gpt_lr"):
        q[key] = p[key] * math.sqrt(k)
    return q


def every(n, p):
    """Curves every n steps at batch scale 1, every n / K steps at batch scale K."""
    return max(1, round(n / p.get("batch_scale", 1)))


# --------------------------------------------------------------------------------------
# 1. data


DATA_ARRAYS = ("surface", "normals", "queries", "occupancy", "distance", "extent")


def make_dataset(work, p, budget=UNBOUNDED):
    path = os.path.join(work, "data.npz")
    if os.path.exists(path):
        return dict(np.load(path, allow_pickle=True))
    # One file per category with the generator's state after it: a stopped run resumes at the
    # next category with the same draws.
    parts_dir = os.path.join(work, "data_parts")
    os.makedirs(parts_dir, exist_ok=True)
    rng = np.random.default_rng(p.get("seed", SEED))
    parts, seconds = [], 0.0
    for number, name in enumerate(shapes.CATEGORIES):
        part_path = os.path.join(parts_dir, f"{number:02d}_{name}.npz")
        if os.path.exists(part_path):
            part = dict(np.load(part_path))
            rng.bit_generator.state = json.loads(str(part.pop("rng_state")))
            seconds = float(part.pop("seconds"))
            parts.append(part)
            continue
        t0 = time.time()
        part = make_category(name, p, rng)
        seconds += time.time() - t0
        np.savez(part_path + ".tmp.npz", rng_state=json.dumps(rng.bit_generator.state), seconds=seconds, **part)
        os.replace(part_path + ".tmp.npz", part_path)
        parts.append(part)
        log(f"data: {name} done ({seconds:.0f} s)")
        if number + 1 < len(shapes.CATEGORIES) and budget.spent():
            raise Stopped(f"data, {number + 1} of {len(shapes.CATEGORIES)} categories")
    data = {k: np.concatenate([part[k] for part in parts]) for k in DATA_ARRAYS + ("held_out",)}
    for k in ("category", "attrs"):
        data[k] = np.array([str(v) for part in parts for v in part[k]])
    np.savez(path + ".tmp.npz", **data)
    os.replace(path + ".tmp.npz", path)
    shutil.rmtree(parts_dir)
    record_timing(work, "data_seconds", seconds)
    if budget.spent():
        raise Stopped("data, all categories")
    return data


def make_category(name, p, rng):
    """The shapes of one category: p["shapes_per_category"] training shapes and
    p["held_out_per_category"] of its held-out attribute combination."""
    records = {k: [] for k in DATA_ARRAYS + ("category", "attrs", "held_out")}
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
        for k in DATA_ARRAYS:
            records[k].append(s[k])
        records["category"].append(name)
        records["attrs"].append(json.dumps(attrs))
        records["held_out"].append(held)
        made[held] += 1
    return {k: np.stack(v) if k not in ("category", "attrs") else np.array(v) for k, v in records.items()}


# --------------------------------------------------------------------------------------
# 2. BPE


def make_vocabulary(clip_dir, budget=UNBOUNDED, seed=SEED):
    if os.path.exists(os.path.join(clip_dir, "merges.txt")):
        return bpe.Tokenizer.load(clip_dir)
    os.makedirs(clip_dir, exist_ok=True)
    texts = captions.corpus(np.random.default_rng(seed + 1), 20000)
    vocab, merges = bpe.train(texts)
    bpe.save(clip_dir, vocab, merges)
    log(f"bpe: {len(vocab)} tokens, {len(merges)} merges")
    if budget.spent():
        raise Stopped("vocabulary")
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


def stretched(points, normals, queries, extent, amount, rng):
    """The batch under a random diagonal map per shape (height and horizontal scales drawn
    log-uniformly within +-amount), rescaled so each shape's longest side stays as long:
    points and queries move with the map, normals with its inverse transpose, labels stay."""
    u = rng.uniform(-amount, amount, size=(len(extent), 2))
    diagonal = np.exp(np.stack([u[:, 0], u[:, 1], u[:, 0]], axis=1))
    diagonal *= (extent.max(1) / (extent * diagonal).max(1))[:, None]
    d = torch.from_numpy(diagonal.astype(np.float32))[:, None, :]
    turned = normals / d
    return points * d, turned / turned.norm(dim=-1, keepdim=True), queries * d


def iou(logits, occupancy):
    pred = logits > 0
    truth = occupancy > 0.5
    inter = (pred & truth).sum().item()
    union = (pred | truth).sum().item()
    return inter / max(union, 1)


@torch.no_grad()
def evaluate_ae(model, data, index, p, quantise):
    rng = np.random.default_rng(7)
    device = device_of(model)
    model.eval()
    total_iou, n = 0.0, 0
    for start in range(0, len(index), p["ae_batch"]):
        chunk = index[start:start + p["ae_batch"]]
        pts, nrm, qry, occ = (t.to(device) for t in ae_batch(data, chunk, p, rng))
        logits, _ = model(pts, nrm, qry, quantise)
        for b in range(len(chunk)):
            total_iou += iou(logits[b], occ[b])
            n += 1
    model.train()
    return total_iou / max(n, 1)


@torch.no_grad()
def kmeans_codebook(model, data, train_idx, p, rng, iterations=15):
    device = device_of(model)
    zs = []
    for start in range(0, len(train_idx), p["ae_batch"]):
        pts, nrm, _, _ = ae_batch(data, train_idx[start:start + p["ae_batch"]], p, rng)
        zs.append(model.encode(pts.to(device), nrm.to(device)).reshape(-1, p["ae"]["embed_dim"]))
    z = torch.cat(zs)
    k = p["ae"]["num_codes"]
    centroids = z[torch.from_numpy(rng.choice(len(z), k, replace=len(z) < k)).to(device)].clone()
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


AE_STAGES = ("ae_warm", "ae_vq", "done")


def train_autoencoder(work, data, p, device="cpu", budget=UNBOUNDED):
    ckpt = os.path.join(work, "ae.pt")
    # Built on the CPU from the CPU's generator, so both devices start from the same weights.
    model = models.ShapeAutoEncoder(p["ae"])
    if p.get("ae_fourier_std"):
        with torch.no_grad():
            model.embedder.weight.normal_(0.0, p["ae_fourier_std"])
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=p["ae_lr"], weight_decay=0.0)
    state = {"stage": "ae_warm", "step": 0}
    rng = np.random.default_rng(p.get("seed", SEED) + 2)
    # Codes chosen since the last dead-code restart (ae_vq).
    usage = torch.zeros(p["ae"]["num_codes"], device=device)
    if os.path.exists(ckpt):
        saved = load_checkpoint(ckpt)
        model.load_state_dict(saved["model"])
        if "opt" in saved:  # not in the finished autoencoder's
            opt.load_state_dict(saved["opt"])
        state = saved["state"]
        rng = restore_random_state(saved["rng"])
        if "usage" in saved:
            usage.copy_(saved["usage"])
        log(f"autoencoder: resumed at {state}")
    if state["stage"] == "done":
        return model

    def save():
        save_checkpoint(ckpt, model=model.state_dict(), opt=opt.state_dict(), state=state, rng=random_state(rng),
                        usage=usage)

    held = data["held_out"].astype(bool)
    train_idx = np.nonzero(~held)[0]
    val_idx = np.nonzero(held)[0]
    resumed_at = (AE_STAGES.index(state["stage"]), state["step"])
    curves = Curves(os.path.join(work, "curves_ae.csv"),
                    ["stage", "step", "loss", "train_iou", "val_iou", "codes_used", "seconds_per_step"],
                    keep=lambda row: (AE_STAGES.index(row[0]), int(row[1])) <= resumed_at)
    batch_size = p["ae_batch"] * p.get("batch_scale", 1)
    log_every, eval_every = every(25, p), every(100, p)
    for stage, steps in (("ae_warm", p["ae_warm_steps"]), ("ae_vq", p["ae_vq_steps"])):
        if state["stage"] != stage:
            continue
        quantise = stage == "ae_vq"
        t_start = time.time()
        first = state["step"]
        while state["step"] < steps:
            step = state["step"]
            for g in opt.param_groups:
                g["lr"] = lr_at(step, steps, p["ae_lr"], warmup=p.get("ae_warmup", 50))
            batch = rng.choice(train_idx, batch_size, replace=len(train_idx) < batch_size)
            pts, nrm, qry, occ = ae_batch(data, batch, p, rng)
            if quantise and p.get("ae_vq_stretch", 0.0) > 0:
                pts, nrm, qry = stretched(pts, nrm, qry, data["extent"][batch], p["ae_vq_stretch"], rng)
            pts, nrm, qry, occ = (t.to(device) for t in (pts, nrm, qry, occ))
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
                        pick = z[torch.from_numpy(rng.integers(len(z), size=len(dead))).to(device)]
                        vq = model.vq
                        vq.codebook.weight[dead] = (pick - vq.cb_bias) / vq.cb_weight
                codes_used = int((usage > 0).sum())
                usage.zero_()
            else:
                codes_used = -1
            done = state["step"]
            if done % log_every == 0 or done == steps:
                sps = (time.time() - t_start) / (done - first)
                evaluate = done % eval_every == 0 or done == steps
                val = evaluate_ae(model, data, val_idx, p, quantise) if evaluate else -1.0
                curves.add(stage, done, loss.item(), iou(logits, occ), val, codes_used, sps)
                log(f"{stage} {done}/{steps} loss {loss.item():.4f} iou {iou(logits, occ):.3f} "
                    f"val_iou {val:.3f} codes {codes_used} {sps:.3f} s/step")
            stop = budget.spent()
            if stop or done % CHECKPOINT_EVERY == 0:
                save()
            if stop:
                raise Stopped(f"{stage} step {done} of {steps}")
        if state["step"] > first:
            record_timing(work, stage, (time.time() - t_start) / (state["step"] - first))
        if stage == "ae_warm":
            kmeans_codebook(model, data, train_idx, p, rng)
            state = {"stage": "ae_vq", "step": 0}
            opt = torch.optim.AdamW(model.parameters(), lr=p["ae_lr"], weight_decay=0.0)
            save()
            if budget.spent():
                raise Stopped("k-means")
    # Finished: without the optimiser, which nothing reads again, the file is a third the size
    # (small enough to keep with the curves, and all a later sitting needs besides the data).
    state = {"stage": "done", "step": 0}
    save_checkpoint(ckpt, model=model.state_dict(), state=state, rng=random_state(rng))
    log(f"autoencoder: held-out IoU {evaluate_ae(model, data, np.nonzero(held)[0], p, True):.3f} (quantised)")
    return model


@torch.no_grad()
def encode_tokens(work, model, data, p, budget=UNBOUNDED):
    path = os.path.join(work, "tokens.npy")
    if os.path.exists(path):
        return np.load(path)
    model.eval()
    device = device_of(model)
    rng = np.random.default_rng(p.get("seed", SEED) + 3)
    out = []
    for start in range(0, len(data["surface"]), p["ae_batch"]):
        idx = np.arange(start, min(start + p["ae_batch"], len(data["surface"])))
        pts, nrm, _, _ = ae_batch(data, idx, p, rng)
        out.append(model.vq.nearest(model.encode(pts.to(device), nrm.to(device))).cpu().numpy())
    tokens = np.concatenate(out).astype(np.int64)
    np.save(path + ".tmp.npy", tokens)
    os.replace(path + ".tmp.npy", path)
    log(f"tokens: {tokens.shape}, {len(np.unique(tokens))} distinct codes")
    if budget.spent():
        raise Stopped("tokens")
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


def train_gpt(work, data, tokens, shape_model, tokenizer, p, budget=UNBOUNDED):
    ckpt = os.path.join(work, "gpt.pt")
    device = device_of(shape_model)
    gpt, clip = build_gpt_and_clip(p, tokenizer)
    gpt.to(device)
    clip.to(device)
    params = list(gpt.parameters()) + list(clip.parameters())
    opt = torch.optim.AdamW(params, lr=p["gpt_lr"], weight_decay=0.01, betas=(0.9, 0.95))
    step = 0
    rng = np.random.default_rng(p.get("seed", SEED) + 4)
    if os.path.exists(ckpt):
        saved = load_checkpoint(ckpt)
        gpt.load_state_dict(saved["gpt"])
        clip.load_state_dict(saved["clip"])
        opt.load_state_dict(saved["opt"])
        step, rng = saved["step"], restore_random_state(saved["rng"])
        log(f"gpt: resumed at step {step}")
    with torch.no_grad():
        codebook = shape_model.vq.get_codebook().detach()
    held = data["held_out"].astype(bool)
    train_idx = np.nonzero(~held)[0]
    val_idx = np.nonzero(held)[0]
    steps = p["gpt_steps"]
    resumed_at = step
    curves = Curves(os.path.join(work, "curves_gpt.csv"), ["step", "loss", "val_loss", "seconds_per_step"],
                    keep=lambda row: int(row[0]) <= resumed_at)
    batch_size = p["gpt_batch"] * p.get("batch_scale", 1)
    log_every, eval_every = every(25, p), every(100, p)
    warmup = p.get("gpt_warmup", 100 if steps > 400 else 10)
    cache = {}

    def encode_text(texts):
        ids, masks = zip(*[cache.setdefault(t, tokenizer.encode(t)) for t in texts])
        return torch.tensor(ids, device=device), torch.tensor(masks, device=device)

    def batch(index, rng, templates, drop=0.1):
        texts, boxes = [], []
        for i in index:
            attrs = json.loads(str(data["attrs"][i]))
            text = captions.caption(str(data["category"][i]), attrs, rng, templates)
            texts.append("" if rng.random() < drop else text)
            boxes.append(bbox_condition(data["extent"][i]) if rng.random() < 0.5 else np.zeros(3, np.float32))
        return (texts, torch.from_numpy(np.stack(boxes).astype(np.float32)).to(device),
                torch.from_numpy(tokens[index]).to(device))

    def loss_of(texts, boxes, target):
        ids, masks = encode_text(texts)
        cond = gpt.condition(clip(ids, masks), boxes)
        table = gpt.token_table(codebook)
        bos = torch.full((len(texts), 1), gpt.bos_id, dtype=torch.long, device=device)
        inputs = torch.cat([bos, target[:, :-1]], dim=1)
        logits = gpt(table[inputs], cond)
        return F.cross_entropy(logits[..., :gpt.codes].reshape(-1, gpt.codes), target.reshape(-1))

    t_start, first = time.time(), step
    while step < steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, p["gpt_lr"], warmup=warmup)
        index = rng.choice(train_idx, batch_size, replace=len(train_idx) < batch_size)
        loss = loss_of(*batch(index, rng, captions.TRAIN_TEMPLATES))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % log_every == 0 or step == steps:
            sps = (time.time() - t_start) / (step - first)
            val = -1.0
            if step % eval_every == 0 or step == steps:
                with torch.no_grad():
                    vrng = np.random.default_rng(11)
                    val = loss_of(*batch(val_idx, vrng, captions.HELD_OUT_TEMPLATES, drop=0.0)).item()
            curves.add(step, loss.item(), val, sps)
            log(f"gpt {step}/{steps} loss {loss.item():.4f} val {val:.4f} {sps:.3f} s/step")
        stop = budget.spent()
        if stop or step % CHECKPOINT_EVERY == 0 or step == steps:
            save_checkpoint(ckpt, gpt=gpt.state_dict(), clip=clip.state_dict(), opt=opt.state_dict(),
                            step=step, rng=random_state(rng))
        if stop:
            raise Stopped(f"gpt step {step} of {steps}")
    if step > first:
        record_timing(work, "gpt", (time.time() - t_start) / (step - first))
    return gpt, clip


# --------------------------------------------------------------------------------------
# 8. export


def export(out, p, shape_model, gpt, clip):
    """Writes the model folder from the modules, moved to the CPU first: the exported bytes do
    not depend on the device's arithmetic beyond the trained weights."""
    for module in (shape_model, gpt, clip):
        module.cpu()
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
              "  encoder_with_cls_token: true", f"  use_bbox: {_yaml(g['use_bbox'])}"]
    if p.get("guidance_scale") is not None:
        # The scale the recipe's model was measured to draw best at: what the engine and the tools
        # generate with when a run leaves guidance to the model.
        lines.append(f"  guidance_scale: {_yaml(float(p['guidance_scale']))}")
    lines += ["", "shape_model:",
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
    ap.add_argument("--ae-width", type=int,
                    help="the autoencoder's width instead of the preset's (README.md, \"Chunky shapes\": 96 ranked "
                         "next to 128 for about half its occupancy cost)")
    ap.add_argument("--ae-codes", type=int,
                    help="the codebook's size instead of the preset's: the shape tokens' vocabulary (README.md, "
                         "\"Codes and stretched shapes\")")
    ap.add_argument("--ae-vq-stretch", type=float, metavar="S",
                    help="in the quantised stage, stretch every training shape at random: its height and its "
                         "horizontal size each scaled by exp(u), u uniform in [-S, S], then rescaled to its longest "
                         "side; 0 turns the preset's stretch off (README.md, \"Codes and stretched shapes\")")
    ap.add_argument("--ae-vq-steps", type=int, metavar="N",
                    help="steps of the quantised stage instead of the preset's (README.md, \"Codes and stretched "
                         "shapes\")")
    ap.add_argument("--leg-flare", type=float,
                    help="stools' and tables' legs this many times wider where they meet the top than at the "
                         f"foot, instead of shapes.py's {shapes.LEG_FLARE} (README.md, \"Flared legs\")")
    ap.add_argument("--part-half-thickness", type=float, metavar="T",
                    help="draw every part at least T thick on each side of its middle, instead of shapes.py's "
                         f"{shapes.PART_HALF_THICKNESS} (README.md, \"Thicker parts\")")
    ap.add_argument("--seed", type=int, default=SEED,
                    help=f"the run's seed instead of the recipe's {SEED}: another run of the same recipe, to tell "
                         "a change from the spread between runs (README.md)")
    ap.add_argument("--threads", type=int, default=1,
                    help="PyTorch intra-op threads (default 1: with OpenBLAS already on both cores, a second "
                         "PyTorch thread made steps 1.6-2x slower on the 2-core machine; README.md)")
    ap.add_argument("--blas-threads", type=int, default=os.cpu_count() or 1,
                    help="OpenBLAS threads for matrix products (default: every core)")
    add_run_arguments(ap)
    args = ap.parse_args()
    budget = Budget(args.max_seconds, args.stop_after_units)
    torch.set_num_threads(args.threads)
    log(f"{args.threads} PyTorch thread(s), {os.environ['OPENBLAS_NUM_THREADS']} OpenBLAS thread(s)")
    device = pick_device(args.device)
    p = dict(PRESETS[args.preset])
    for key in ("ae_warm_steps", "ae_vq_steps", "gpt_steps"):
        p[key] = max(1, int(round(p[key] * args.steps_scale)))
    if args.shapes_per_category:
        p["shapes_per_category"] = args.shapes_per_category
    if args.ae_fourier_std:
        p["ae_fourier_std"] = args.ae_fourier_std
    if args.ae_width:
        p["ae"] = dict(p["ae"], width=args.ae_width)
    if args.ae_codes is not None:
        if not 2 <= args.ae_codes <= 16384:
            sys.exit(f"train.py --ae-codes {args.ae_codes}: expected a codebook of 2 to 16384 codes")
        p["ae"] = dict(p["ae"], num_codes=args.ae_codes)
    if args.ae_vq_steps is not None:
        if args.ae_vq_steps < 1:
            sys.exit(f"train.py --ae-vq-steps {args.ae_vq_steps}: expected at least 1 step")
        p["ae_vq_steps"] = args.ae_vq_steps
    if args.ae_vq_stretch is not None:
        if not 0 <= args.ae_vq_stretch <= 1:
            sys.exit(f"train.py --ae-vq-stretch {args.ae_vq_stretch}: expected a value in [0, 1] (0: no stretch)")
        p["ae_vq_stretch"] = args.ae_vq_stretch
    if args.leg_flare is not None:
        try:
            p["leg_flare"] = shapes.checked_leg_flare(args.leg_flare, "train.py --leg-flare")
        except ValueError as e:
            sys.exit(str(e))
    if args.part_half_thickness is not None:
        try:
            p["part_half_thickness"] = shapes.checked_part_half_thickness(args.part_half_thickness,
                                                                          "train.py --part-half-thickness")
        except ValueError as e:
            sys.exit(str(e))
    # The shapes the data is drawn from; the recipe records them, so tools that draw shapes for
    # this model draw the same ones (shapes.configure_for_model).
    shapes.LEG_FLARE = p.setdefault("leg_flare", shapes.LEG_FLARE)
    shapes.PART_HALF_THICKNESS = p.setdefault("part_half_thickness", shapes.PART_HALF_THICKNESS)
    # Every random draw of the run (shapes, captions, initial weights, batches) follows from it.
    p["seed"] = args.seed
    torch.manual_seed(p["seed"])
    p = scale_batch(p, args.batch_scale)
    work = os.path.join(args.out, "checkpoints")
    os.makedirs(os.path.join(args.out, "clip"), exist_ok=True)
    os.makedirs(work, exist_ok=True)
    write_recipe(os.path.join(work, "recipe.json"), {"preset": args.preset, **p})
    t0 = time.time()
    try:
        data = make_dataset(work, p, budget)
        tokenizer = make_vocabulary(os.path.join(args.out, "clip"), budget, p["seed"])
        shape_model = train_autoencoder(work, data, p, device, budget)
        tokens = encode_tokens(work, shape_model, data, p, budget)
        gpt, clip = train_gpt(work, data, tokens, shape_model, tokenizer, p, budget)
    except Stopped as where:
        stopped(where, t0, work)
    export(args.out, p, shape_model, gpt, clip)
    log(f"total {time.time() - t0:.0f} s")


def add_run_arguments(ap):
    """The options train.py and diffusion.py share for where and how long a run goes."""
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the networks train (batches are drawn on the CPU either way; README.md)")
    ap.add_argument("--batch-scale", type=int, default=1, metavar="K",
                    help="K times larger batches, K times fewer steps, learning rates times sqrt(K) (for a GPU)")
    ap.add_argument("--max-seconds", type=float, metavar="S",
                    help=f"stop at the first safe point (a training step, a data category) after S seconds, with "
                         f"everything saved, and exit with status {EXIT_STOPPED}; the same command continues")
    ap.add_argument("--stop-after-units", type=int, metavar="N",
                    help="test hook: stop as --max-seconds does, after N units of work (a training step, a data "
                         "category, the vocabulary, k-means, the tokens) instead of a wall-clock time")


def write_recipe(path, recipe):
    """Writes the run's settings, or, when the folder already holds a run, exits if they differ:
    resuming with other settings would silently mix two runs. (Settings an older recipe did not
    record are not compared.)"""
    recipe = json.loads(json.dumps(recipe))
    if os.path.exists(path):
        before = json.load(open(path))
        changed = sorted(k for k in set(before) & set(recipe) if before[k] != recipe[k])
        if changed:
            sys.exit(f"{path} holds a run with other settings ({', '.join(changed)}): use another folder, or delete "
                     f"that file to continue the run with these settings anyway")
    json.dump(recipe, open(path, "w"), indent=1)


def recipe_seed(folder):
    """The seed an autoregressive model folder's run drew from (its recorded recipe), so that a
    fine-tune of it draws the same shapes; the recipe's own seed for a folder whose recipe
    predates --seed or that has none."""
    for name in ("training/recipe.json", "checkpoints/recipe.json"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            try:
                recipe = json.load(open(path))
            except (OSError, ValueError) as e:
                sys.exit(f"{path}: not a readable recipe ({e})")
            seed = recipe.get("seed", SEED) if isinstance(recipe, dict) else None
            if not isinstance(seed, int) or isinstance(seed, bool):
                sys.exit(f"{path}: \"seed\" must be an integer, not {seed!r}")
            return seed
    return SEED


def stopped(where, t0, work):
    log(f"stopped after {where} ({time.time() - t0:.0f} s), saved in {work}: run the same command again to continue")
    sys.exit(EXIT_STOPPED)


if __name__ == "__main__":
    main()
