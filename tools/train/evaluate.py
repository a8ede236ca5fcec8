"""Measures an exported model folder against the built-in model's quality targets.

    /usr/bin/python3 tools/train/evaluate.py MODEL_DIR [--engine build/app/cli/cubeforge-cli]
        [--grid 32] [--recon-per-category 3] [--captions-per-setting 2] [--classifier-shapes 40]
        [--json out.json] [--seed 99]

Everything is measured on shapes and captions the model never trained on:
  - tokenizer reconstruction: held-out shapes (the held-out attribute combination of every
    category) encoded to codes and decoded. Volumetric IoU over 20,000 uniform points of the
    query cube (the usual definition, target >= 0.85), and the harsher IoU over the training
    mix of labelled queries (half within about 0.02 of the surface); also the volumetric IoU of
    fresh shapes in the training attribute combinations (never trained on either), which tells
    generalising to a new combination apart from reconstructing a new shape at all; and, for
    both, how many one-piece shapes the tokenizer gives back in one piece (on the engine's
    resolution-6 grid): a generation can only be whole if the tokenizer can draw it whole;
  - category accuracy: captions in held-out phrasings (and the held-out attribute
    combinations) -> greedy tokens with guidance -> occupancy on a grid -> the category the
    classifier in classifier.py gives it. The classifier is trained on fresh procedural
    shapes only; its accuracy on further fresh true shapes is reported alongside (target for
    the model >= 90%);
  - attribute agreement: captions with one height or width word; the generated shape's
    aspect ratio (height over the larger horizontal side) against the median of the
    classifier's fresh shapes of that category: tall/narrow above it, short/wide below
    (target >= 80%);
  - non-empty watertight meshes (target >= 98%): with --engine, every caption also goes
    through `cubeforge-cli generate --resolution R --json` (R = 7 by default), which reports
    whether the final mesh is closed (every edge shared by two consistently wound faces); the
    engine's tokens are compared with the training code's, and its time per object is kept.
    Without --engine, a grid proxy: some cells occupied and none on the grid's boundary.
  - pieces (target: >= 95% of generations in one piece, every category being one piece): with
    --engine, the solid pieces of the engine's resolution-7 surface as extracted, before any
    cleanup (so floaters count; the wall of a hollow sealed inside a piece does not), and
    separately those of the mesh it delivers; always, the connected pieces (face connectivity,
    pieces.py) of the occupancy on the evaluation grid, a coarser proxy. Counted per category.
A block-diffusion folder (diffusion.py) is decoded by the training code with block diffusion
(generate.diffusion_tokens: --threshold T or --factor F, every position recomputed) and by the
engine with the same rule and no cache. --engine-decoding "ARGS" passes other decoding options
to the engine instead (for example "--decoding jacobi" or "--decoding diffusion
--diffusion-cache dual --threshold 0.9"), and --judge-engine judges the engine's tokens rather
than the training code's, for decodings that only the engine has (the dual cache).
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import captions  # noqa: E402
import classifier  # noqa: E402
import generate  # noqa: E402
import pieces  # noqa: E402
import shapes  # noqa: E402

SETTINGS = ({}, {"height": "tall"}, {"height": "short"}, {"width": "wide"}, {"width": "narrow"})


def iou(a, b):
    return float((a & b).sum() / max((a | b).sum(), 1))


@torch.no_grad()
def decode(shape, tokens, points):
    idx = torch.as_tensor(tokens).reshape(1, -1)
    return (shape.decode_indices(idx, torch.from_numpy(points).unsqueeze(0))[0] > 0).numpy()


# The grid a reconstruction's pieces are counted on: the engine's resolution-6 grid, fine enough
# for a leg to stay a leg, four times cheaper to decode than resolution 7.
RECONSTRUCTION_PIECES_RESOLUTION = 6


def decode_in_chunks(shape, tokens, points, chunk=40000):
    return np.concatenate([decode(shape, tokens, points[i:i + chunk]) for i in range(0, len(points), chunk)])


def tokenizer_test_shapes(rng, per_category, held_out_combinations=True):
    """The shapes the tokenizer is measured on, per category: (name, sample, 20,000 uniform points,
    whether each is inside). With held_out_combinations, every shape has its category's held-out
    attribute combination; otherwise fresh shapes are drawn from the training combinations."""
    for name in shapes.CATEGORIES:
        for _ in range(per_category):
            attrs = shapes.random_attributes(name, rng)
            if held_out_combinations:
                attrs["height"], attrs["width"] = captions.HELD_OUT_COMBOS[name]
            else:
                while captions.is_held_out(name, attrs):
                    attrs = shapes.random_attributes(name, rng)
            field = shapes.occupancy_field(name, attrs, rng)
            s = shapes.sample_shape(field, rng, surface_points=2048, query_points=4096)
            uniform = rng.uniform(-shapes.QUERY_BOUND, shapes.QUERY_BOUND, size=(20000, 3)).astype(np.float32)
            yield name, s, uniform, field(uniform / s["scale"] + s["center"]) < 0


@torch.no_grad()
def reconstruction(shape, rng, per_category, judge, points, held_out_combinations=True):
    """Shapes never trained on through the tokenizer: IoUs, whether the classifier still
    recognises the decoded shape (the ceiling the tokenizer sets on category accuracy of
    generations), and whether a one-piece shape comes back in one piece (a generation can only
    be whole if the tokenizer can draw it whole). The shapes are tokenizer_test_shapes'."""
    volume, mixed, recognised, whole = {}, {}, [], {}
    axis = pieces.engine_grid_axis(RECONSTRUCTION_PIECES_RESOLUTION)
    grid = pieces.grid_points(axis).astype(np.float32)
    for name, s, uniform, truth in tokenizer_test_shapes(rng, per_category, held_out_combinations):
        z = shape.encode(torch.from_numpy(s["surface"])[None], torch.from_numpy(s["normals"])[None])
        codes = shape.vq.nearest(z)[0]
        volume.setdefault(name, []).append(iou(decode(shape, codes, uniform), truth))
        mixed.setdefault(name, []).append(iou(decode(shape, codes, s["queries"]), s["occupancy"] > 0.5))
        if judge is not None:
            recognised.append(judge.predict([decode(shape, codes, points)])[0] == name)
        if name not in shapes.SEVERAL_PIECES:
            occ = decode_in_chunks(shape, codes, grid).reshape(len(axis), len(axis), len(axis))
            whole.setdefault(name, []).append(pieces.count_pieces(occ) == 1)
    return volume, mixed, float(np.mean(recognised)) if recognised else None, whole


def run_engine(cli, model, text, resolution, folder, decoding=()):
    out = os.path.join(folder, "mesh.ply")
    proc = subprocess.run([cli, "generate", "--model", model, "--prompt", text, "--resolution", str(resolution),
                           "--out", out, "--json", "--threads", "2", *decoding], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"ok": False, "error": (proc.stderr or proc.stdout).strip()}
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    mesh = report["mesh"]
    return {"ok": True, "tokens": report["tokens"], "closed": bool(mesh["closed"]),
            "faces": mesh["faces"], "total_ms": report["timings"]["total_ms"],
            # As the model drew them: the solid pieces of the surface as extracted, before the
            # cleanup's floater removal could hide a part that came apart (a sealed hollow's wall
            # is not a piece); and of the mesh delivered.
            "pieces": int(mesh["pieces_as_extracted"]),
            "pieces_delivered": int(mesh["pieces"]),
            "model_evaluations": report["decoding"]["model_evaluations"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--engine", help="cubeforge-cli: also generate every caption with the engine")
    ap.add_argument("--resolution", type=int, default=7, help="the engine's grid resolution")
    ap.add_argument("--grid", type=int, default=32, help="evaluation grid (even)")
    ap.add_argument("--recon-per-category", type=int, default=3,
                    help="held-out shapes per category for the tokenizer's figures (0: leave them out; they draw "
                         "from the captions' generator, so the captions then differ from a run with them)")
    ap.add_argument("--captions-per-setting", type=int, default=2)
    ap.add_argument("--classifier-shapes", type=int, default=40, help="fresh training shapes per category")
    ap.add_argument("--json", help="write the figures and every caption's verdicts here too")
    ap.add_argument("--guidance", type=float,
                    help="classifier-free guidance scale, both decoders (default: the model's, as the engine reads "
                         "it: gpt_model.guidance_scale, else 3)")
    ap.add_argument("--threshold", type=float, default=0.9, help="block diffusion: the confidence threshold")
    ap.add_argument("--factor", type=float, help="block diffusion: the factor rule instead")
    ap.add_argument("--engine-decoding", default=None,
                    help="decoding options for the engine's generate (default: the training code's decoding)")
    ap.add_argument("--judge-engine", action="store_true",
                    help="judge the engine's tokens instead of the training code's (needs --engine)")
    ap.add_argument("--seed", type=int, default=99,
                    help="draws the held-out shapes and captions; another seed is a second sample of them")
    args = ap.parse_args()
    if args.judge_engine and not args.engine:
        sys.exit("--judge-engine needs --engine")
    torch.set_num_threads(1)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    tokenizer, clip, gpt, shape = generate.load_folder(args.model)
    diffusion = generate.block_diffusion(gpt) is not None
    rule = ["--factor", str(args.factor)] if args.factor else ["--threshold", str(args.threshold)]
    if args.engine_decoding is not None:
        engine_decoding = shlex.split(args.engine_decoding)
    else:
        engine_decoding = ["--decoding", "diffusion", "--diffusion-cache", "none", *rule] if diffusion else []
    # Left to the model, the engine settles the scale itself, and the tokens compared check that it reads
    # the folder's as the training code does.
    guidance = args.guidance if args.guidance is not None else generate.model_guidance(gpt)
    if args.guidance is not None:
        engine_decoding += ["--guidance", str(args.guidance)]

    def training_tokens(text):
        if diffusion:
            return generate.diffusion_tokens(tokenizer, clip, gpt, shape, text, guidance=guidance,
                                             threshold=args.threshold, factor=args.factor)
        return generate.greedy_tokens(tokenizer, clip, gpt, shape, text, guidance=guidance)

    n = args.grid
    points = classifier.grid_points(n)
    judge = classifier.Classifier(n=n, per_category=args.classifier_shapes, log=log)

    rng = np.random.default_rng(args.seed)
    tokenizer_figures, volume, whole, fresh_whole = {}, {}, {}, {}
    if args.recon_per_category > 0:
        volume, mixed, recognised, whole = reconstruction(shape, rng, args.recon_per_category, judge, points)
        log(f"reconstruction: volumetric IoU {np.mean(sum(volume.values(), [])):.3f}")
        # Its own generator, so the captions below stay the same with or without this figure.
        fresh_volume, _, _, fresh_whole = reconstruction(shape, np.random.default_rng(args.seed - 1),
                                                         args.recon_per_category, None, points,
                                                         held_out_combinations=False)
        log(f"reconstruction of fresh shapes in training combinations: volumetric IoU "
            f"{np.mean(sum(fresh_volume.values(), [])):.3f}")
        tokenizer_figures = {
            "tokenizer_volumetric_iou_held_out": float(np.mean(sum(volume.values(), []))),
            "tokenizer_near_surface_mix_iou_held_out": float(np.mean(sum(mixed.values(), []))),
            "tokenizer_volumetric_iou_fresh_training_combinations": float(np.mean(sum(fresh_volume.values(), []))),
            "category_accuracy_of_tokenizer_reconstructions": recognised,
            "tokenizer_one_piece_held_out": float(np.mean(sum(whole.values(), []))),
            "tokenizer_one_piece_fresh_training_combinations": float(np.mean(sum(fresh_whole.values(), []))),
            "tokenizer_one_piece_counted_on": f"the engine's resolution-{RECONSTRUCTION_PIECES_RESOLUTION} grid",
        }

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in shapes.CATEGORIES:
            combo = dict(zip(("height", "width"), captions.HELD_OUT_COMBOS[name]))
            for attrs in SETTINGS + (combo,):
                for _ in range(args.captions_per_setting):
                    text = captions.caption(name, attrs, rng, captions.HELD_OUT_TEMPLATES)
                    tokens = training_tokens(text)
                    if args.engine:
                        engine = run_engine(args.engine, args.model, text, args.resolution, folder, engine_decoding)
                    judged = tokens
                    if args.judge_engine:
                        if not engine["ok"]:
                            sys.exit(f"engine: {text!r}: {engine['error']}")
                        judged = engine["tokens"]
                    occ = decode(shape, judged, points)
                    cube = occ.reshape(n, n, n)
                    boundary = np.concatenate([cube[[0, -1]].ravel(), cube[:, [0, -1]].ravel(),
                                               cube[:, :, [0, -1]].ravel()])
                    row = {"caption": text, "category": name, "attributes": attrs,
                           "predicted": judge.predict([occ])[0],
                           "grid_closed": bool(0 < occ.sum() < occ.size and not boundary.any()),
                           "grid_pieces": pieces.count_pieces(cube)}
                    ratio = classifier.aspect(occ, n)
                    row["aspect"] = None if np.isnan(ratio) else round(float(ratio), 3)
                    if len(attrs) == 1:
                        word = next(iter(attrs.values()))
                        median = judge.median_aspect[name]
                        row["attribute_agrees"] = bool(not np.isnan(ratio) and
                                                       (ratio > median) == (word in ("tall", "narrow")))
                    if args.engine:
                        row["engine"] = engine
                        row["engine_tokens_equal"] = engine["ok"] and engine["tokens"] == tokens
                    rows.append(row)
            log(f"{name}: {sum(r['predicted'] == name for r in rows if r['category'] == name)} of "
                f"{sum(r['category'] == name for r in rows)} recognised")

    agreement = [r["attribute_agrees"] for r in rows if "attribute_agrees" in r]
    figures = {
        "guidance": guidance,
        **tokenizer_figures,
        "category_accuracy": float(np.mean([r["predicted"] == r["category"] for r in rows])),
        "category_accuracy_held_out_combinations": float(np.mean(
            [r["predicted"] == r["category"] for r in rows if len(r["attributes"]) == 2])),
        "attribute_agreement": float(np.mean(agreement)),
        "grid_non_empty_closed": float(np.mean([r["grid_closed"] for r in rows])),
        "captions": len(rows),
        "classifier_accuracy_on_true_shapes": judge.accuracy_on_true_shapes,
    }
    def pieces_of(row):
        return row["engine"].get("pieces", 0) if args.engine else row["grid_pieces"]

    one_piece_rows = [r for r in rows if r["category"] not in shapes.SEVERAL_PIECES]
    figures["one_piece_fraction"] = float(np.mean([pieces_of(r) == 1 for r in one_piece_rows]))
    figures["one_piece_counted_on"] = (f"engine meshes, resolution {args.resolution}" if args.engine
                                       else f"occupancy on the {n}^3 evaluation grid")
    figures["grid_one_piece_fraction"] = float(np.mean([r["grid_pieces"] == 1 for r in one_piece_rows]))
    if args.engine:
        figures["delivered_one_piece_fraction"] = float(np.mean(
            [r["engine"].get("pieces_delivered", 0) == 1 for r in one_piece_rows]))
    if args.engine:
        engine_rows = [r["engine"] for r in rows]
        ok = [e for e in engine_rows if e["ok"]]
        times = sorted(e["total_ms"] for e in ok)
        figures.update({
            "engine_non_empty_watertight": float(np.mean([e["ok"] and e["closed"] and e["faces"] > 0
                                                          for e in engine_rows])),
            "engine_tokens_equal_training_code": float(np.mean([r["engine_tokens_equal"] for r in rows])),
            f"engine_ms_per_object_r{args.resolution}_median": times[len(times) // 2] if times else None,
            f"engine_ms_per_object_r{args.resolution}_p90": times[(9 * len(times)) // 10] if times else None,
            f"engine_ms_per_object_r{args.resolution}_max": times[-1] if times else None,
            "engine_fraction_under_1s": float(np.mean([t < 1000.0 for t in times])) if times else None,
            "engine_model_evaluations_mean": float(np.mean([e["model_evaluations"] for e in ok])) if ok else None,
            "engine_decoding": " ".join(engine_decoding) or "sequential",
            "judged": "engine tokens" if args.judge_engine else "training code tokens",
        })
    per_category = {name: {"volumetric_iou": round(float(np.mean(volume[name])), 3) if name in volume else None,
                           "accuracy": float(np.mean([r["predicted"] == name for r in rows if r["category"] == name])),
                           "pieces": [pieces_of(r) for r in rows if r["category"] == name],
                           "tokenizer_whole": int(sum(whole.get(name, []) + fresh_whole.get(name, []))),
                           "tokenizer_shapes": len(whole.get(name, []) + fresh_whole.get(name, []))}
                    for name in shapes.CATEGORIES}
    for k, v in figures.items():
        print(f"{k:42s} {v:.3f}" if isinstance(v, float) else f"{k:42s} {v}")
    print("per category (volumetric IoU, accuracy): " +
          ", ".join(f"{k} {'-' if v['volumetric_iou'] is None else format(v['volumetric_iou'], '.2f')} {v['accuracy']:.2f}"
                    for k, v in per_category.items()))
    print("tokenizer reconstructions in one piece, held out and fresh (of shapes): " +
          ", ".join(f"{k} {v['tokenizer_whole']}/{v['tokenizer_shapes']}" for k, v in per_category.items()
                    if v["tokenizer_shapes"]))
    print(f"pieces per generation ({figures['one_piece_counted_on']}): " +
          ", ".join(f"{k} {' '.join(map(str, v['pieces']))}" for k, v in per_category.items()))
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump({"figures": figures, "per_category": per_category, "rows": rows}, f, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
