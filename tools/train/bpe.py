"""A CLIP-format byte-level BPE vocabulary, trained on the caption corpus, and its encoder.

The files are what a Hugging Face CLIP tokenizer folder holds, so the project's C++
tokenizer (inference/text/clip_tokenizer.h) reads them like real CLIP's:
  - vocab.json: token -> id. Ids 0..255 are the 256 byte-level characters (GPT-2's
    bytes_to_unicode order), 256..511 the same characters with "</w>" (end of word), then
    one token per merge, then "<|startoftext|>" and "<|endoftext|>";
  - merges.txt: "#version: 0.2" and then one "left right" pair per line, by rank.
Because every single byte is in the base alphabet, any text tokenises.

The encoder here mirrors the C++ one (and CLIP's): normalise (collapse whitespace, lower
case), split into pieces (contractions, letter runs, single digits, other symbol runs), map
each piece's bytes to characters, mark the last one with "</w>", then merge the adjacent
pair of lowest rank (leftmost on ties) until no pair has a rank.
"""

import collections
import json
import re
import unicodedata

START = "<|startoftext|>"
END = "<|endoftext|>"
CONTEXT = 77

_PIECES = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d|[^\W\d_]+|\d|(?:[^\s\w]|_)+", re.IGNORECASE)


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable characters."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


BYTE_CHARS = bytes_to_unicode()


def normalise(text):
    """NFC, whitespace runs -> one space, lower case character by character (as the Rust
    normaliser does, so a final capital sigma becomes an ordinary small sigma)."""
    text = " ".join(unicodedata.normalize("NFC", text).split())
    return "".join(c.lower() for c in text)


def words(text):
    """Byte-level symbol lists, one per pre-tokenised piece, the last symbol with "</w>"."""
    out = []
    for piece in _PIECES.findall(normalise(text)):
        symbols = [BYTE_CHARS[b] for b in piece.encode("utf-8")]
        symbols[-1] += "</w>"
        out.append(symbols)
    return out


def train(texts, max_merges=2000, min_count=2):
    """Learns merges from a corpus: the most frequent adjacent pair first (ties: the pair
    that sorts first, so training is deterministic). Returns (vocab dict, merges list)."""
    counts = collections.Counter(tuple(w) for t in texts for w in words(t))
    vocab_words = {w: list(w) for w in counts}
    merges = []
    for _ in range(max_merges):
        pairs = collections.Counter()
        for w, symbols in vocab_words.items():
            for a, b in zip(symbols, symbols[1:]):
                pairs[(a, b)] += counts[w]
        if not pairs:
            break
        best_count = max(pairs.values())
        if best_count < min_count:
            break
        best = min(p for p, c in pairs.items() if c == best_count)
        merges.append(best)
        for w, symbols in vocab_words.items():
            vocab_words[w] = _merge_all(symbols, best)
    base = list(BYTE_CHARS.values())
    tokens = base + [c + "</w>" for c in base] + [a + b for a, b in merges] + [START, END]
    vocab = {}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    return vocab, merges


def _merge_all(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def save(folder, vocab, merges):
    with open(f"{folder}/vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(f"{folder}/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")


class Tokenizer:
    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.ranks = {tuple(m): i for i, m in enumerate(merges)}
        self.start_id = vocab[START]
        self.end_id = vocab[END]
        self.cache = {}

    @classmethod
    def load(cls, folder):
        with open(f"{folder}/vocab.json", encoding="utf-8") as f:
            vocab = json.load(f)
        with open(f"{folder}/merges.txt", encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(line.split(" ")) for line in lines[1:] if line and not line.startswith("#")]
        return cls(vocab, merges)

    def _word_ids(self, symbols):
        key = tuple(symbols)
        if key in self.cache:
            return self.cache[key]
        symbols = list(symbols)
        while len(symbols) > 1:
            best, best_rank = -1, None
            for i in range(len(symbols) - 1):
                r = self.ranks.get((symbols[i], symbols[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best < 0:
                break
            symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
        ids = [self.vocab[s] for s in symbols]
        self.cache[key] = ids
        return ids

    def bpe_ids(self, text):
        return [i for w in words(text) for i in self._word_ids(w)]

    def encode(self, text):
        """(input_ids [77], attention_mask [77]) as CLIP pads them: start, up to 75 ids, end,
        then end-of-text padding with mask 0."""
        ids = [self.start_id] + self.bpe_ids(text)[:CONTEXT - 2] + [self.end_id]
        mask = [1] * len(ids) + [0] * (CONTEXT - len(ids))
        ids = ids + [self.end_id] * (CONTEXT - len(ids))
        return ids, mask


if __name__ == "__main__":
    import sys

    tok = Tokenizer.load(sys.argv[1])
    for text in sys.argv[2:]:
        print(" ".join(str(i) for i in tok.bpe_ids(text)))
