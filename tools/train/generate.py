"""Greedy text-to-shape-token generation with the training code's own modules.

    /usr/bin/python3 tools/train/generate.py MODEL_DIR "a tall chair" ["a round table" ...]
        [--guidance 3.0]

Reads an exported model folder (config.yaml, shape_gpt.safetensors,
shape_tokenizer.safetensors, clip/) and decodes as the reference engine does:
  - cond = text_proj(CLIP last_hidden_state, all 77 positions) + bbox_proj(0) as one more
    token (with use_bbox); uncond = the same for the empty prompt "";
  - rows 0..V-1 of the token embedding = shape_proj(get_codebook());
  - BOS, then num_encoder_latents steps: at step i of N, gamma = s * (N - i) / N and
    logits = (1 + gamma) * cond - gamma * uncond over the V codes; the argmax is fed to both.
A block-diffusion folder (config.yaml with gpt_model.block_diffusion, made by diffusion.py)
decodes block by block instead (diffusion_tokens, --threshold or --factor): rows are BOS and
the tokens, masked until decided, at positions 0..N-1; every evaluation recomputes the
positions up to the current block's end with block-causal attention, takes each undecided
token of the block's most likely code (guided as above, gamma by the token's index) and its
softmax probability, and accepts those above the threshold (or, with the factor rule, the n
most confident while the n-th has at least 1 - f / (n + 1)), at least the most confident one.
That is the engine's `--decoding diffusion --diffusion-cache none`.
Prints one JSON object per prompt: {"prompt": ..., "tokens": [...]}. The engine's
`cubeforge-cli generate --json` must print the same tokens (tests/train).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import models  # noqa: E402
import shapes  # noqa: E402


def load_folder(folder):
    """The networks of a model folder; procedural shapes drawn after this are the ones its recipe
    trained on (shapes.configure_for_model)."""
    shapes.configure_for_model(folder)
    cfg = yaml.safe_load(open(os.path.join(folder, "config.yaml")))
    clip_cfg = json.load(open(os.path.join(folder, "clip", "config.json")))["text_config"]
    clip = models.ClipText(clip_cfg)
    clip.load_state_dict(models.load_safetensors(os.path.join(folder, "clip", "model.safetensors")))
    g = dict(cfg["gpt_model"])
    g.setdefault("n_single_layer", 0)
    g["rope_theta"] = float(g.get("rope_theta", 10000.0))
    g["eps"] = float(g.get("eps", 1e-6))
    gpt = models.DualStreamGPT(g)
    gpt.load_state_dict(models.load_safetensors(os.path.join(folder, "shape_gpt.safetensors")))
    s = dict(cfg["shape_model"])
    s["eps"] = float(s.get("eps", 1e-6))
    shape = models.ShapeAutoEncoder(s)
    shape.load_state_dict(models.load_safetensors(os.path.join(folder, "shape_tokenizer.safetensors")))
    tokenizer = bpe.Tokenizer.load(os.path.join(folder, "clip"))
    for m in (clip, gpt, shape):
        m.eval()
    return tokenizer, clip, gpt, shape


@torch.no_grad()
def greedy_tokens(tokenizer, clip, gpt, shape, prompt, guidance=3.0, bbox=None):
    prompts = [prompt, ""] if guidance > 0 else [prompt]
    ids, masks = zip(*[tokenizer.encode(p) for p in prompts])
    boxes = torch.zeros(len(prompts), 3)
    if bbox is not None:
        boxes[0] = torch.tensor(bbox)
    cond = gpt.condition(clip(torch.tensor(ids), torch.tensor(masks)), boxes)
    table = gpt.token_table(shape.vq.get_codebook())
    n = shape.cfg["num_encoder_latents"]
    sequence = torch.full((len(prompts), 1), gpt.bos_id, dtype=torch.long)
    out = []
    for i in range(n):
        logits = gpt(table[sequence], cond)[:, -1, :gpt.codes]
        if guidance > 0:
            gamma = guidance * (n - i) / n
            logits = (1 + gamma) * logits[0] - gamma * logits[1]
        else:
            logits = logits[0]
        token = int(torch.argmax(logits))
        out.append(token)
        sequence = torch.cat([sequence, torch.full((len(prompts), 1), token, dtype=torch.long)], dim=1)
    return out


def block_diffusion(gpt):
    """(block_size, mask_token_id) of a block-diffusion GPT, or None for an autoregressive one."""
    section = gpt.cfg.get("block_diffusion")
    return (int(section["block_size"]), int(section["mask_token_id"])) if section else None


def model_guidance(gpt):
    """The classifier-free guidance scale a folder generates at by default, as the engine reads it:
    gpt_model.guidance_scale, else the reference's 3."""
    return float(gpt.cfg.get("guidance_scale", 3.0))


def model_threshold(gpt):
    """The confidence threshold a block-diffusion folder decodes at by default, as the engine reads
    it: gpt_model.block_diffusion.threshold, else 0.9."""
    return float((gpt.cfg.get("block_diffusion") or {}).get("threshold", 0.9))


@torch.no_grad()
def diffusion_tokens(tokenizer, clip, gpt, shape, prompt, guidance=3.0, threshold=0.9, factor=None,
                     block_size=None, bbox=None):
    model_block, mask_id = block_diffusion(gpt)
    block = block_size or model_block
    prompts = [prompt, ""] if guidance > 0 else [prompt]
    ids, masks = zip(*[tokenizer.encode(p) for p in prompts])
    boxes = torch.zeros(len(prompts), 3)
    if bbox is not None:
        boxes[0] = torch.tensor(bbox)
    cond = gpt.condition(clip(torch.tensor(ids), torch.tensor(masks)), boxes)
    table = gpt.token_table(shape.vq.get_codebook())
    n = shape.cfg["num_encoder_latents"]
    # The engine compares in float32's values of the rule's constants.
    threshold = float(np.float32(threshold))
    factor = float(np.float32(factor)) if factor else None
    decided = [-1] * n
    for begin in range(0, n, block):
        end = begin + block
        while any(decided[t] < 0 for t in range(begin, end)):
            inputs = [gpt.bos_id] + [decided[t] if decided[t] >= 0 else mask_id for t in range(end - 1)]
            rows = torch.tensor([inputs] * len(prompts))
            visible = models.block_causal_visibility(end, block)
            logits = gpt.forward_visible(table[rows], cond, torch.arange(end), visible)[:, :, :gpt.codes]
            candidates = []
            for t in range(begin, end):
                if decided[t] >= 0:
                    continue
                row = logits[:, t]
                if guidance > 0:
                    gamma = guidance * (n - t) / n
                    row = (1 + gamma) * row[0] - gamma * row[1]
                else:
                    row = row[0]
                code = int(torch.argmax(row))
                confidence = 1.0 / float(torch.exp(row.double() - row[code].double()).sum())
                candidates.append((confidence, t, code))
            candidates.sort(key=lambda c: (-c[0], c[1]))
            keep = 1
            while keep < len(candidates):
                confidence = candidates[keep][0]
                if (confidence >= 1.0 - factor / (keep + 2)) if factor else (confidence > threshold):
                    keep += 1
                else:
                    break
            for _, t, code in candidates[:keep]:
                decided[t] = code
    return decided


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("prompts", nargs="+")
    ap.add_argument("--guidance", type=float, help="default: the model's (gpt_model.guidance_scale, else 3)")
    ap.add_argument("--threshold", type=float,
                    help="block diffusion: the confidence threshold (default: the model's, else 0.9)")
    ap.add_argument("--factor", type=float, help="block diffusion: the factor rule instead")
    args = ap.parse_args()
    torch.set_num_threads(1)
    loaded = load_folder(args.model)
    guidance = args.guidance if args.guidance is not None else model_guidance(loaded[2])
    for prompt in args.prompts:
        if block_diffusion(loaded[2]):
            threshold = args.threshold if args.threshold is not None else model_threshold(loaded[2])
            tokens = diffusion_tokens(*loaded, prompt, guidance, threshold, args.factor)
        else:
            tokens = greedy_tokens(*loaded, prompt, guidance)
        print(json.dumps({"prompt": prompt, "tokens": tokens}))


if __name__ == "__main__":
    main()
