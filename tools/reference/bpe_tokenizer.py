"""Reference byte-level BPE (GPT-2 style) in plain Python, written from the GPT-2 encoder's
description: regex pre-tokenization (GPT-2's pattern, llama.cpp's three Falcon expressions, or
Llama 3's and Qwen2's patterns), bytes mapped to printable characters, then repeated merging of
the lowest-ranked bigram, all its occurrences at once, left to right."""
import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

# tokenizer.ggml.pre = falcon: llama.cpp's three expressions, each splitting the pieces the
# previous one left (its matches and the text between them are pieces).
FALCON = [regex.compile(r"[\p{P}\$\+<=>\^~\|`]+"),
          regex.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"),
          regex.compile(r"[0-9][0-9][0-9]")]

# tokenizer.ggml.pre = llama-bpe (Llama 3) and qwen2: their tokenizer.json patterns, with the
# contractions' (?i:...) spelled as llama.cpp spells it ([sS] ...): Python's case folding would
# also take U+017F (long s) for s, which llama.cpp does not.
LLAMA3 = regex.compile(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|"
    r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = regex.compile(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def split_keeping_gaps(rx, piece):
    out, at = [], 0
    for m in rx.finditer(piece):
        if m.start() > at:
            out.append(piece[at:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        at = m.end()
    if at < len(piece):
        out.append(piece[at:])
    return out


def pieces(text, pre="gpt2"):
    if pre == "llama3":
        return LLAMA3.findall(text)
    if pre == "qwen2":
        return QWEN2.findall(text)
    if pre != "falcon":
        return PATTERN.findall(text)
    parts = [text] if text else []
    for rx in FALCON:
        parts = [q for p in parts for q in split_keeping_gaps(rx, p)]
    return parts


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_TO_CHAR = bytes_to_unicode()


class ByteLevelBPE:
    def __init__(self, tokens, merges, pre="gpt2", ignore_merges=False):
        self.pre = pre
        self.ignore_merges = ignore_merges  # a piece that is one token is taken whole
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges)}

    def bpe(self, word):
        word = list(word)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        return word

    def encode(self, text):
        ids = []
        for piece in pieces(text, self.pre):
            mapped = "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))
            if self.ignore_merges and mapped in self.ids:
                ids.append(self.ids[mapped])
                continue
            ids.extend(self.ids[s] for s in self.bpe(mapped))
        return ids


def train(text, n_merges):
    """A small BPE trainer: counts pre-token frequencies, merges the most frequent pair."""
    from collections import Counter
    words = Counter("".join(BYTE_TO_CHAR[b] for b in p.encode("utf-8"))
                    for p in PATTERN.findall(text))
    vocab = {tuple(w): c for w, c in words.items()}
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, c in vocab.items():
            for i in range(len(w) - 1):
                pairs[(w[i], w[i + 1])] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        new_vocab = {}
        for w, c in vocab.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_vocab[tuple(out)] = new_vocab.get(tuple(out), 0) + c
        vocab = new_vocab
    return merges
