"""Checks that the engine reads a model folder exported by tools/train/ as the training code means it.

    compare_with_engine.py MODEL_DIR CUBEFORGE_CLI VOCAB_CHECK ENGINE_TOKENS

1. Tokenizer: the engine's CLIP tokenizer (through VOCAB_CHECK) and tools/train/bpe.py give the
   same BPE ids for training captions, held-out phrasings and text outside the caption grammar
   (capitals, punctuation, digits, accents).
2. Generation: for fixed prompts, the engine's greedy tokens (guidance 3.0) equal those of
   tools/train/generate.py: through the engine's generate_shape() (ENGINE_TOKENS) for every
   prompt, and through `cubeforge-cli generate --json`, which also writes the mesh. The CLI
   refuses a shape without a surface, which a smoke-scale model may decode for some prompts;
   such a prompt is reported, its tokens are still checked through ENGINE_TOKENS, and at least
   one prompt must give the CLI a mesh.
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


def check_generation(model_dir, cli, engine_tokens):
    loaded = generate.load_folder(model_dir)
    ours = {prompt: generate.greedy_tokens(*loaded, prompt, guidance=3.0) for prompt in PROMPTS}
    run = subprocess.run([engine_tokens, model_dir, *PROMPTS], capture_output=True, text=True)
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
        for prompt in PROMPTS:
            out = os.path.join(tmp, "shape.glb")
            run = subprocess.run([cli, "generate", "--model", model_dir, "--prompt", prompt, "--resolution", "5",
                                  "--threads", "1", "--json", "-q", "--out", out], capture_output=True, text=True)
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
    if meshes == 0:
        sys.exit("cubeforge-cli decoded no prompt to a mesh")


def main():
    model_dir, cli, vocab_check, engine_tokens = sys.argv[1:5]
    check_tokenizer(model_dir, vocab_check)
    check_generation(model_dir, cli, engine_tokens)


if __name__ == "__main__":
    main()
