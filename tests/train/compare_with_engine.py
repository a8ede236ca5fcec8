"""Checks that the engine reads a model folder exported by tools/train/ as the training code means it.

    compare_with_engine.py MODEL_DIR CUBEFORGE_CLI VOCAB_CHECK ENGINE_TOKENS [--reference JSON]
        [--write-reference JSON]

1. Tokenizer: the engine's CLIP tokenizer (through VOCAB_CHECK) and tools/train/bpe.py give the
   same BPE ids for training captions, held-out phrasings and text outside the caption grammar
   (capitals, punctuation, digits, accents).
2. Generation: for fixed prompts, the engine's greedy tokens (at the folder's own guidance scale,
   which both read from its config, else 3) equal those of
   tools/train/generate.py: through the engine's generate_shape() (ENGINE_TOKENS) for every
   prompt, and through `cubeforge-cli generate --json`, which also writes the mesh. The CLI
   refuses a shape without a surface, which a smoke-scale model may decode for some prompts;
   such a prompt is reported, its tokens are still checked through ENGINE_TOKENS, and at least
   one prompt must give the CLI a mesh.
3. Shape decoding: for each CLI mesh (dense grid, floaters kept, no simplification, OBJ), its
   bounding box must bracket the occupied grid points of the training code's own decoding of
   the same tokens: marching cubes puts every vertex on a grid edge between an inside and an
   outside point, so per axis occ_min - cell <= mesh_min <= occ_min and
   occ_max <= mesh_max <= occ_max + cell. This checks the autoencoder's decoder and occupancy
   head (embedding, attention, MLPs, codebook) in the engine against models.py.
4. With --reference: the prompts and tokens recorded in JSON (the shipped model's reference,
   which the C++ suite checks without PyTorch) must equal the training code's greedy tokens
   now (a block-diffusion folder's: its block diffusion at threshold 0.9), so the recorded
   file cannot go stale. --write-reference records them.
A block-diffusion folder (tools/train/diffusion.py) is checked the same way with block
diffusion instead of greedy decoding (generate.diffusion_tokens against the engine's
`--decoding diffusion`), for the threshold rule with the engine recomputing everything
(`--diffusion-cache none`) and with its prefix cache, which must decode the same, and for the
factor rule. With --reference the first rule runs over the recorded prompts and the others over
the first three: the recorded prompts add cover of the model, not of a rule's code path. The
training code's tokens are computed once per prompt and rule.
Exits non-zero with the first mismatch shown.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "train"))
import bpe  # noqa: E402
import captions  # noqa: E402
import generate  # noqa: E402
import shapes  # noqa: E402

PROMPTS = ["a tall chair", "a round table with four legs", "a wide sofa"]
# The shipped model's recorded prompts: training phrasings, held-out phrasings and attribute
# combinations, words outside the caption grammar, and two stools whose meshes meshoptimizer
# once left with non-manifold edges.
REFERENCE_PROMPTS = PROMPTS + ["render of a short mug", "a tree, tall and narrow", "a rocket",
                               "a red snowman", "3d model of a wide boat", "a stool", "render of a tall bar stool"]


def check_tokenizer(model_dir, vocab_check):
    rng = np.random.default_rng(3)
    texts = []
    for name in list(captions.NOUNS)[:12]:
        attrs = shapes.random_attributes(name, rng)
        texts.append(captions.caption(name, attrs, rng))
        texts.append(captions.caption(name, attrs, rng, captions.HELD_OUT_TEMPLATES))
    texts += ["A  TALL   Chair!!", "café au lait, 42 cups", "x'll don't", "zebra-striped teapot?", ""]
    clip_dir = os.path.join(model_dir, "clip")
    engine = subprocess.run([vocab_check, clip_dir], input="\n".join(texts) + "\n", capture_output=True,
                            text=True, check=True).stdout.split("\n")
    tokenizer = bpe.Tokenizer.load(clip_dir)
    for i, text in enumerate(texts):
        ours = " ".join(str(t) for t in tokenizer.bpe_ids(text))
        if engine[i] != ours:
            sys.exit(f"tokenizer mismatch on {text!r}:\n  engine {engine[i]}\n  python {ours}")
    print(f"tokenizer: {len(texts)} texts give the same ids in the engine and bpe.py", flush=True)


def _first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def check_mesh_bounds(shape, tokens, obj_path, resolution, prompt):
    import torch

    n = 2 ** resolution + 1
    axis = np.linspace(-1.05, 1.05, n)
    points = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3).astype(np.float32)
    with torch.no_grad():
        logits = shape.decode_indices(torch.tensor([tokens]), torch.from_numpy(points)[None])[0].numpy()
    inside = points[logits > 0]
    cube = (logits > 0).reshape(n, n, n)
    if not len(inside) or cube[[0, -1]].any() or cube[:, [0, -1]].any() or cube[:, :, [0, -1]].any():
        print(f"bounds: {prompt!r}: the decoded shape touches the grid's boundary; bounds not compared")
        return
    vertices = np.array([[float(v) for v in line.split()[1:4]] for line in open(obj_path) if line.startswith("v ")])
    cell = 2.1 / (n - 1)
    lo, hi = inside.min(0), inside.max(0)
    mesh_lo, mesh_hi = vertices.min(0), vertices.max(0)
    eps = 1e-4
    ok = (np.all(lo - cell - eps <= mesh_lo) and np.all(mesh_lo <= lo + eps) and np.all(hi - eps <= mesh_hi)
          and np.all(mesh_hi <= hi + cell + eps))
    if not ok:
        sys.exit(f"mesh bounds of {prompt!r} do not bracket the decoded occupancy:\n  occupied {lo} .. {hi}\n"
                 f"  mesh     {mesh_lo} .. {mesh_hi} (cell {cell:.4f})")
    print(f"bounds: {prompt!r}: engine mesh {np.round(mesh_lo, 3)} .. {np.round(mesh_hi, 3)} brackets the "
          f"decoded occupancy {np.round(lo, 3)} .. {np.round(hi, 3)}")


# Block diffusion's rules the check runs: (engine flags, CLI flags, generate.diffusion_tokens arguments).
DIFFUSION_RULES = [
    (["--threshold", "0.9", "--cache", "none"], ["--threshold", "0.9", "--diffusion-cache", "none"],
     {"threshold": 0.9}),
    (["--threshold", "0.9", "--cache", "prefix"], ["--threshold", "0.9", "--diffusion-cache", "prefix"],
     {"threshold": 0.9}),
    (["--factor", "1.0", "--cache", "none"], ["--factor", "1.0", "--diffusion-cache", "none"], {"factor": 1.0}),
]
GREEDY = ([], [], None)


_LOADED = {}
_TOKENS = {}


def load(model_dir):
    """The training code's model, read once per folder."""
    if model_dir not in _LOADED:
        _LOADED[model_dir] = generate.load_folder(model_dir)
    return _LOADED[model_dir]


def python_tokens(loaded, prompt, rule):
    """The training code's tokens, computed once per model, prompt and rule (decoding is deterministic)."""
    key = (id(loaded), prompt, json.dumps(rule, sort_keys=True))
    if key not in _TOKENS:
        if rule is None:
            _TOKENS[key] = generate.greedy_tokens(*loaded, prompt, guidance=generate.model_guidance(loaded[2]))
        else:
            _TOKENS[key] = generate.diffusion_tokens(*loaded, prompt, guidance=generate.model_guidance(loaded[2]),
                                                     **rule)
    return _TOKENS[key]


def check_reference(model_dir, path, write):
    loaded = load(model_dir)
    rule = DIFFUSION_RULES[0][2] if generate.block_diffusion(loaded[2]) else None
    # A block-diffusion folder's reference is its block diffusion at the first rule's threshold.
    key, what = ("block_diffusion", f"block-diffusion tokens (threshold {rule['threshold']})") if rule else \
        ("greedy", "greedy tokens")
    ours = [{"prompt": p, "tokens": python_tokens(loaded, p, rule)} for p in REFERENCE_PROMPTS]
    if write:
        with open(path + ".tmp", "w") as f:
            json.dump({"guidance": generate.model_guidance(loaded[2]), **(rule or {}), key: ours}, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)
        print(f"reference: wrote {len(ours)} prompts' {what} to {path}")
        return
    recorded = json.load(open(path))[key]
    if recorded != ours:
        sys.exit(f"{path} no longer matches the training code's {what} for {model_dir}; "
                 "rerun with --write-reference if the model was retrained on purpose")
    print(f"reference: {len(ours)} recorded prompts equal the training code's {what}")


def check_generation(model_dir, cli, engine_tokens, prompts=PROMPTS, decoding=GREEDY):
    engine_flags, cli_flags, rule = decoding
    loaded = load(model_dir)
    ours = {prompt: python_tokens(loaded, prompt, rule) for prompt in prompts}
    if rule is not None:
        cli_flags = ["--decoding", "diffusion", *cli_flags]
        print(f"block diffusion: {' '.join(cli_flags)}", flush=True)
    run = subprocess.run([engine_tokens, model_dir, *engine_flags, *prompts], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"engine_tokens failed: {run.stderr.strip()}")
    for line in run.stdout.strip().splitlines():
        report = json.loads(line)
        prompt = report["prompt"]
        if report["tokens"] != ours[prompt]:
            sys.exit(f"greedy tokens differ on {prompt!r} from position "
                     f"{_first_difference(report['tokens'], ours[prompt])}:\n"
                     f"  engine {report['tokens']}\n  python {ours[prompt]}")
        print(f"generation: {prompt!r}: {len(ours[prompt])} tokens equal (engine library)")
    meshes = 0
    with tempfile.TemporaryDirectory() as tmp:
        for prompt in prompts:
            out = os.path.join(tmp, "shape.obj")
            run = subprocess.run([cli, "generate", "--model", model_dir, "--prompt", prompt, "--resolution", "5",
                                  "--dense", "--keep-floaters", "--target-faces", "-1", "--threads", "1", "--json",
                                  "-q", "--out", out, *cli_flags], capture_output=True, text=True)
            if run.returncode != 0:
                if "has no surface" in run.stderr:
                    print(f"cli: {prompt!r}: the decoded shape has no surface (tokens checked above)")
                    continue
                sys.exit(f"cubeforge-cli generate failed on {prompt!r}: {run.stderr.strip()}")
            report = json.loads(run.stdout.strip().splitlines()[-1])
            if report["tokens"] != ours[prompt]:
                sys.exit(f"cubeforge-cli tokens differ on {prompt!r} from position "
                         f"{_first_difference(report['tokens'], ours[prompt])}")
            if not os.path.getsize(out) or report["mesh"]["faces"] <= 0:
                sys.exit(f"cubeforge-cli wrote no mesh for {prompt!r}")
            meshes += 1
            print(f"cli: {prompt!r}: tokens equal, mesh of {report['mesh']['faces']} faces")
            check_mesh_bounds(loaded[3], ours[prompt], out, 5, prompt)
    if meshes == 0:
        sys.exit("cubeforge-cli decoded no prompt to a mesh")


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("model_dir", "cli", "vocab_check", "engine_tokens"):
        ap.add_argument(name)
    ap.add_argument("--reference", help="recorded prompts and tokens to check (or write)")
    ap.add_argument("--write-reference", action="store_true")
    args = ap.parse_args()
    check_tokenizer(args.model_dir, args.vocab_check)
    diffusion = generate.block_diffusion(load(args.model_dir)[2])
    for i, decoding in enumerate(DIFFUSION_RULES if diffusion else [GREEDY]):
        check_generation(args.model_dir, args.cli, args.engine_tokens,
                         REFERENCE_PROMPTS if args.reference and i == 0 else PROMPTS, decoding)
    if args.reference:
        check_reference(args.model_dir, args.reference, args.write_reference)


if __name__ == "__main__":
    main()
