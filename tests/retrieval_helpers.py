"Fixtures shared by the retrieval tests: facts, and the testing API's embedders without a cache."
from collections import namedtuple
import numpy as np
from pace.embed import CachedEmbedder
from pace.testing import HashEmbedder, RandomEmbedder

Fact = namedtuple("Fact", "doc_id text meta", defaults=[None])


def hash_embedder(dim=64, model="hash"):
    "`pace.testing.HashEmbedder` with no cache (texts that share words are close)."
    return CachedEmbedder(HashEmbedder(model, dim), False)


def random_embedder(dim=48, model="random"):
    "`pace.testing.RandomEmbedder` with no cache (a random unit vector per text: no ties, for exact-graph tests)."
    return CachedEmbedder(RandomEmbedder(model, dim), False)


WORDS = ("dentist appointment swimming pool brother visit peanut allergy train window seat bus work manager "
         "review concert ticket flight passport gym yoga doctor clinic birthday party dinner restaurant "
         "meeting deadline report vacation hotel car repair insurance rent landlord sister mother").split()


def synthetic_facts(n, seed=0, prefix="d"):
    "n varied fact sentences with unique ids."
    rng = np.random.default_rng(seed)
    return [Fact(f"{prefix}{i}", f"Fact {i}: " + " ".join(rng.choice(WORDS, size=rng.integers(4, 12)))) for i in range(n)]
