"""Captions for procedural shapes, from a small grammar with synonyms and word-order variety.

A caption states the category and every attribute the shape was built with (shapes.py), in
one of several phrasings: adjectives before the noun, a relative clause, a "with N legs"
phrase, or a "3d model of" frame. Synonyms vary the words ("couch" for sofa, "low" for short).

Held out from training, for measuring generalisation:
  - attribute combinations: for every category, the pair (height, width) listed in
    HELD_OUT_COMBOS never appears in training shapes or captions;
  - phrasings: the templates in HELD_OUT_TEMPLATES are only used for evaluation captions
    (the words are all known; the word order is new).
"""

import json

NOUNS = {
    "chair": ["chair", "seat"], "stool": ["stool", "bar stool"], "table": ["table", "desk"],
    "bench": ["bench", "park bench"], "sofa": ["sofa", "couch"], "bed": ["bed"],
    "shelf": ["shelf", "bookshelf", "bookcase"], "mug": ["mug", "cup"], "bowl": ["bowl"],
    "vase": ["vase", "urn"], "bottle": ["bottle", "flask"], "lamp": ["lamp", "floor lamp"],
    "tree": ["tree"], "mushroom": ["mushroom", "toadstool"], "snowman": ["snowman"],
    "house": ["house", "cottage", "hut"], "tower": ["tower", "turret"], "car": ["car", "automobile"],
    "rocket": ["rocket", "spaceship"], "boat": ["boat", "sailboat"], "dumbbell": ["dumbbell", "barbell"],
    "ring": ["ring", "loop"], "arch": ["arch", "archway"], "bridge": ["bridge", "footbridge"],
}

ADJECTIVES = {
    "tall": ["tall", "high"], "short": ["short", "low", "squat"],
    "wide": ["wide", "broad"], "narrow": ["narrow", "thin", "slim"],
    "round": ["round", "circular", "rounded"], "square": ["square", "boxy", "angular"],
}

LEG_WORDS = {3: ["three", "3"], 4: ["four", "4"]}

# Phrasings. {adjs}: adjectives before the noun; {clause}: "a and b"; {legs}: " with N legs".
TRAIN_TEMPLATES = [
    "{det} {adjs} {noun}{legs}",
    "{adjs} {noun}{legs}",
    "{det} {noun}{legs} that is {clause}",
    "3d model of {det} {adjs} {noun}{legs}",
    "{det} {adjs} {noun}{legs}, simple shape",
]
HELD_OUT_TEMPLATES = [
    "{det} {noun}{legs}, {clause}",
    "render of {det} {adjs} {noun}{legs}",
]

# (height, width) never combined in training, per category.
HELD_OUT_COMBOS = {name: (("tall", "wide") if i % 2 == 0 else ("short", "narrow"))
                   for i, name in enumerate(NOUNS)}


def is_held_out(category, attrs):
    held = HELD_OUT_COMBOS[category]
    return attrs.get("height") == held[0] and attrs.get("width") == held[1]


def caption(category, attrs, rng, templates=None):
    """One caption for a shape; attrs as in shapes.random_attributes."""
    templates = templates or TRAIN_TEMPLATES
    noun = NOUNS[category][rng.integers(len(NOUNS[category]))]
    words = [ADJECTIVES[attrs[k]][rng.integers(len(ADJECTIVES[attrs[k]]))]
             for k in ("height", "width", "form") if k in attrs]
    order = rng.permutation(len(words))
    words = [words[i] for i in order]
    legs = ""
    if "legs" in attrs:
        word = LEG_WORDS[attrs["legs"]][rng.integers(2)]
        legs = f" with {word} legs"
    template = templates[rng.integers(len(templates))]
    if "{clause}" in template and not words:
        template = "{det} {adjs} {noun}{legs}"
    clause = " and ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " and " + words[-1]
    det = "an" if (words and words[0][0] in "aeiou") or (not words and noun[0] in "aeiou") else "a"
    if "{clause}" in template:
        det = "an" if noun[0] in "aeiou" else "a"
    text = template.format(det=det, adjs=" ".join(words), noun=noun, legs=legs, clause=clause)
    return " ".join(text.split())


def corpus(rng, count=20000):
    """Captions for the BPE vocabulary: every template (held-out ones included, since a
    tokenizer must cover what users type) over random attributes."""
    import shapes

    names = list(NOUNS)
    out = []
    for _ in range(count):
        name = names[rng.integers(len(names))]
        attrs = shapes.random_attributes(name, rng)
        out.append(caption(name, attrs, rng, TRAIN_TEMPLATES + HELD_OUT_TEMPLATES))
    return out


# Words of the caption grammar that name nothing (they only hold the phrasings together).
FILLER_WORDS = ["a", "an", "with", "legs", "that", "is", "and", "3d", "model", "of", "render", "simple", "shape"]

# The card's first examples; the full recipe replaces them with those measured to come out
# recognisable on the finished model (choose_examples.py, run by make_model.sh).
EXAMPLES = ["a tall chair", "a round table with four legs", "render of a short mug", "a wide sofa",
            "a narrow tower", "a round vase", "a tall tree", "a square house"]


def model_card():
    """What the model was trained on, for the app (MODEL/card.json): the categories with the words
    that name each, the attribute words, and example prompts. Every word a caption can contain is
    here, so a prompt word missing from the card is one the model never saw."""
    return {
        "description": "Built-in model: trained only on procedural shapes of these categories, "
                       "described with these words.",
        "categories": NOUNS,
        "attributes": {**ADJECTIVES, "three legs": LEG_WORDS[3], "four legs": LEG_WORDS[4]},
        "other_words": FILLER_WORDS,
        "examples": EXAMPLES,
    }


def write_model_card(path):
    with open(path, "w") as f:
        json.dump(model_card(), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--card":
        write_model_card(sys.argv[2])
        sys.exit(0)
    import numpy as np
    import shapes

    rng = np.random.default_rng(1)
    for name in list(NOUNS)[:8]:
        attrs = shapes.random_attributes(name, rng)
        print(f"{name:8s} {attrs}: {caption(name, attrs, rng)} | {caption(name, attrs, rng, HELD_OUT_TEMPLATES)}")
