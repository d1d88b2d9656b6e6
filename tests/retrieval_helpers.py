"Small offline stand-ins for `pace.embed` embedders and `pace.data.Fact`, shared by the retrieval tests."
import hashlib, re
from collections import namedtuple
import numpy as np

Fact = namedtuple("Fact", "doc_id text meta", defaults=[None])


class HashEmbedder:
    "Deterministic bag-of-words hashing embedder: each word adds a signed unit to a hashed bucket."
    def __init__(self, dim=64, model_id=None):
        self.dim, self.model_id, self.calls, self.n_texts = dim, model_id or f"hash-{dim}", 0, 0

    def embed(self, texts, *, stage="embed", show_progress=False):
        self.calls += 1; self.n_texts += len(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()) or ["<empty>"]:
                h = int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little")
                out[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class RandomEmbedder(HashEmbedder):
    "A random unit vector per text, seeded by the text's hash (no ties, for graph-equality tests)."
    def embed(self, texts, *, stage="embed", show_progress=False):
        self.calls += 1; self.n_texts += len(texts)
        out = np.stack([np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
                        .standard_normal(self.dim) for t in texts]).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


WORDS = ("dentist appointment swimming pool brother visit peanut allergy train window seat bus work manager "
         "review concert ticket flight passport gym yoga doctor clinic birthday party dinner restaurant "
         "meeting deadline report vacation hotel car repair insurance rent landlord sister mother").split()


def synthetic_facts(n, seed=0, prefix="d"):
    "n varied fact sentences with unique ids."
    rng = np.random.default_rng(seed)
    return [Fact(f"{prefix}{i}", f"Fact {i}: " + " ".join(rng.choice(WORDS, size=rng.integers(4, 12)))) for i in range(n)]
