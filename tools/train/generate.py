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
Prints one JSON object per prompt: {"prompt": ..., "tokens": [...]}. The engine's
`cubeforge-cli generate --json` must print the same tokens (tests/train).
"""

import argparse
import json
import os
import sys

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import models  # noqa: E402


def load_folder(folder):
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("prompts", nargs="+")
    ap.add_argument("--guidance", type=float, default=3.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    loaded = load_folder(args.model)
    for prompt in args.prompts:
        print(json.dumps({"prompt": prompt, "tokens": greedy_tokens(*loaded, prompt, args.guidance)}))


if __name__ == "__main__":
    main()
