"""Chooses a model folder's example prompts by measurement: those the model draws recognisably.

    /usr/bin/python3 tools/train/choose_examples.py MODEL_DIR [--count 8] [--min-confidence 0.8]
        [--json OUT.json] [--write]

The app opens on the first example of the model's card (card.json) and lists the others in its
Examples menu, so they are what a newcomer sees first. This script generates every candidate
prompt (each category by its first name, plain and with each single attribute it takes) with the
training code's decoding (the engine decodes the same tokens: tests/train checks it), decodes the
tokens to occupancy on the evaluation grid, and asks the independent judge of evaluate.py
(classifier.py: trained only on fresh procedural shapes, never on the model's output) how sure it
is that the shape is the category asked for. A candidate qualifies when the judge names the asked
category with at least --min-confidence, and the shape comes out in no more connected pieces than
the category's own fresh shapes do (their median). Each category gives at most one example: its
qualifying prompt the judge is surest of (to two decimals; the shorter prompt on a tie). The
categories are ranked by how reliably the model draws them: the share of their candidates that
qualify, then the judge's mean confidence over all of them; the examples are the --count best,
best first. --write stores them as the card's "examples"; every candidate's figures go to --json,
and --from-json ranks a previous run's figures again without generating.
"""

import argparse
import json
import os
import sys
from collections import deque

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import captions  # noqa: E402
import classifier  # noqa: E402
import generate  # noqa: E402
import shapes  # noqa: E402

def candidates(category):
    """A category's plain prompt and one prompt per attribute value it takes, in the caption grammar."""
    noun = captions.NOUNS[category][0]
    article = "an" if noun[0] in "aeiou" else "a"
    out = [f"{article} {noun}"]
    _, kinds = shapes.CATEGORIES[category]
    for kind in kinds:
        for value in shapes.ATTRIBUTE_VALUES[kind]:
            if kind == "legs":
                out.append(f"{article} {noun} with {captions.LEG_WORDS[value][0]} legs")
            else:  # height, width and form values are their own first adjective
                out.append(f"{'an' if value[0] in 'aeiou' else 'a'} {value} {noun}")
    return out


def pieces(occupancy, n):
    """Connected pieces of an occupancy grid (cells sharing a face are connected)."""
    cube = np.asarray(occupancy).reshape(n, n, n)
    seen = np.zeros_like(cube, dtype=bool)
    count = 0
    for start in map(tuple, np.argwhere(cube)):
        if seen[start]:
            continue
        count += 1
        seen[start] = True
        queue = deque([start])
        while queue:
            x, y, z = queue.popleft()
            for dx, dy, dz in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)):
                p = (x + dx, y + dy, z + dz)
                if all(0 <= c < n for c in p) and cube[p] and not seen[p]:
                    seen[p] = True
                    queue.append(p)
    return count


@torch.no_grad()
def confidence(judge, occupancy, category):
    """The judge's probability that the occupancy is `category`."""
    logits = judge.net(classifier.pooled([occupancy], judge.n))
    return float(torch.softmax(logits, 1)[0, judge.names.index(category)])


def measure(args):
    """Every candidate's figures, and the judge's accuracy on fresh true shapes."""
    torch.manual_seed(0)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    loaded = generate.load_folder(args.model_dir)
    diffusion = generate.block_diffusion(loaded[2]) is not None
    threshold = generate.model_threshold(loaded[2])  # what the engine decodes the folder at by default
    guidance = generate.model_guidance(loaded[2])
    n = args.grid
    points = classifier.grid_points(n)
    judge = classifier.Classifier(n=n, per_category=args.classifier_shapes, log=log)
    rng = np.random.default_rng(7)
    rows = []
    for category in shapes.CATEGORIES:
        # The pieces a category's own shapes come in on this grid (thin parts may part at
        # this resolution): a generated shape should not come in more.
        expected = int(np.median([pieces(classifier.true_grid(category, shapes.random_attributes(category, rng),
                                                               rng, points), n) for _ in range(5)]))
        for prompt in candidates(category):
            tokens = (generate.diffusion_tokens(*loaded, prompt, guidance=guidance, threshold=threshold) if diffusion
                      else generate.greedy_tokens(*loaded, prompt, guidance=guidance))
            with torch.no_grad():
                idx = torch.as_tensor(tokens).reshape(1, -1)
                occ = (loaded[3].decode_indices(idx, torch.from_numpy(points).unsqueeze(0))[0] > 0).numpy()
            row = {"prompt": prompt, "category": category, "predicted": judge.predict([occ])[0],
                   "confidence": round(confidence(judge, occ, category), 4), "pieces": pieces(occ, n),
                   "category_pieces": expected}
            rows.append(row)
            log(f"{prompt!r}: judge says {row['predicted']} ({row['confidence']:.2f} for {category}), "
                f"{row['pieces']} piece(s) (its shapes: {expected})")
    return rows, judge.accuracy_on_true_shapes


def qualifies(row, min_confidence):
    return bool(row["predicted"] == row["category"] and row["confidence"] >= min_confidence
                and row["pieces"] <= row["category_pieces"])


def choose(rows, count):
    """The examples, best first, and each category's figures (see the module's description)."""
    categories = {}
    for row in rows:
        c = categories.setdefault(row["category"], {"candidates": 0, "qualifying": 0, "confidence": 0.0,
                                                    "best": None})
        c["candidates"] += 1
        c["confidence"] += row["confidence"]
        if row["qualifies"]:
            c["qualifying"] += 1
            key = (round(row["confidence"], 2), -len(row["prompt"]))
            if c["best"] is None or key > (round(c["best"]["confidence"], 2), -len(c["best"]["prompt"])):
                c["best"] = row
    for c in categories.values():
        c["qualifying_share"] = c["qualifying"] / c["candidates"]
        c["confidence"] /= c["candidates"]
    ranked = sorted((c for c in categories.values() if c["best"]),
                    key=lambda c: (-c["qualifying_share"], -c["confidence"]))
    return [c["best"] for c in ranked[:count]], categories


def write_json(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--count", type=int, default=8, help="examples to keep")
    ap.add_argument("--min-confidence", type=float, default=0.8,
                    help="the judge's least probability of the asked category")
    ap.add_argument("--grid", type=int, default=32, help="evaluation grid (as evaluate.py)")
    ap.add_argument("--classifier-shapes", type=int, default=40, help="fresh judge training shapes per category")
    ap.add_argument("--json", help="write every candidate's figures here")
    ap.add_argument("--from-json", help="rank the candidates of a previous --json instead of generating")
    ap.add_argument("--write", action="store_true", help="store the examples in MODEL_DIR/card.json")
    args = ap.parse_args()
    if args.from_json:
        previous = json.load(open(args.from_json))
        rows, judge_accuracy = previous["candidates"], previous["judge_accuracy_on_true_shapes"]
    else:
        rows, judge_accuracy = measure(args)
    for row in rows:
        row["qualifies"] = qualifies(row, args.min_confidence)
    chosen, categories = choose(rows, args.count)
    examples = [r["prompt"] for r in chosen]
    if args.json:
        write_json(args.json, {
            "model": os.path.basename(os.path.normpath(args.model_dir)),
            "judge_accuracy_on_true_shapes": judge_accuracy, "min_confidence": args.min_confidence,
            "examples": examples,
            "categories": {name: {k: v for k, v in c.items() if k != "best"} for name, c in categories.items()},
            "candidates": rows})
    print(f"judge accuracy on fresh true shapes {judge_accuracy:.3f}; "
          f"{sum(r['qualifies'] for r in rows)} of {len(rows)} candidates qualify")
    for r in chosen:
        c = categories[r["category"]]
        print(f"  {r['prompt']!r}: judge {r['confidence']:.3f}, {r['pieces']} piece(s); {r['category']}: "
              f"{c['qualifying']} of {c['candidates']} prompts qualify, mean confidence {c['confidence']:.3f}")
    if len(examples) < 2:
        sys.exit("fewer than two prompts qualify; the card's examples are left as they are")
    if args.write:
        path = os.path.join(args.model_dir, "card.json")
        card = json.load(open(path))
        card["examples"] = examples
        write_json(path, card)
        print(f"wrote {len(examples)} examples to {path}")


if __name__ == "__main__":
    main()
