"Tests for pace.metrics with hand-computed values."
import pytest
from pace.metrics import retrieval_metrics, mean_metrics, evaluate_rankings, evidence_coverage


def test_basic():
    m = retrieval_metrics(["x", "g1", "y", "z", "w", "g2", "v"], ["g1", "g2"])
    assert m == {"recall@5": 0.5, "hit@5": 1.0, "gold@5": 0.0, "recall@10": 1.0, "hit@10": 1.0, "gold@10": 1.0, "mrr@10": 0.5}


def test_empty_retrieval():
    m = retrieval_metrics([], ["g"])
    assert all(v == 0.0 for v in m.values()) and len(m) == 7


def test_duplicates_take_no_slot():
    m = retrieval_metrics(["a", "a", "b", "b", "c", "c", "d", "g"], ["g"])
    assert m["hit@5"] == 1.0 and m["mrr@10"] == pytest.approx(1 / 5)
    m = retrieval_metrics(["g", "g"], ["g", "g"])
    assert m["recall@5"] == 1.0 and m["gold@5"] == 1.0


def test_k_larger_than_list_and_mrr_cut():
    m = retrieval_metrics(["a", "g"], ["g", "h"], ks=(1, 100))
    assert (m["recall@1"], m["recall@100"], m["hit@100"], m["gold@100"], m["mrr@100"]) == (0.0, 0.5, 1.0, 0.0, 0.5)
    assert retrieval_metrics([f"x{i}" for i in range(11)] + ["g"], ["g"])["mrr@10"] == 0.0      # gold at 12 > max k
    assert retrieval_metrics([f"x{i}" for i in range(9)] + ["g"], ["g"])["mrr@10"] == pytest.approx(0.1)


def test_ties_are_positions():
    # the metric only sees the order given; tied scores were broken upstream, so gold at rank 5 vs 6 differs
    assert retrieval_metrics(list("abcd") + ["g"], ["g"])["hit@5"] == 1.0
    assert retrieval_metrics(list("abcde") + ["g"], ["g"])["hit@5"] == 0.0


def test_aggregate_and_coverage():
    rows, agg = evaluate_rankings([["g"], ["x", "g"], [], ["h", "g"]], [["g"], ["g", "h"], ["g"], ["g", "h"]])
    assert agg["n"] == 4
    assert agg["recall@10"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert agg["gold@10"] == pytest.approx(2 / 4) and agg["hit@10"] == pytest.approx(3 / 4)
    assert agg["mrr@10"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    cov = evidence_coverage(rows, k=10)
    assert (cov["none"], cov["partial"], cov["full"]) == pytest.approx((0.25, 0.25, 0.5))


def test_errors():
    with pytest.raises(ValueError): retrieval_metrics(["a"], [])
    with pytest.raises(TypeError): retrieval_metrics("abc", ["a"])
    with pytest.raises(ValueError): retrieval_metrics(["a"], ["a"], ks=())
    with pytest.raises(ValueError): evaluate_rankings([["a"]], [])
    with pytest.raises(ValueError): mean_metrics([])
    with pytest.raises(ValueError): mean_metrics([{"a": 1.0}, {"b": 1.0}])
    with pytest.raises(ValueError): evidence_coverage([])


def test_funnel_on_a_hand_built_trace():
    from pace.metrics import funnel, stage_coverage
    ev = dict(fused=["x", "g1", "y", "g2"], prehop=["g1", "y"], pool=["g1", "y", "g3", "z"], final=["g3", "g1"], answer=["g3"])
    f = funnel(ev, ["g1", "g2", "g3"])
    assert [f[s]["found"] for s in ev] == [2, 1, 2, 2, 1] and [f[s]["n"] for s in ev] == [4, 2, 4, 2, 1]
    assert f["pool"]["recall"] == pytest.approx(2 / 3) and f["answer"]["n_gold"] == 3
    assert [stage_coverage(f[s]) for s in ("fused", "answer")] == ["partial", "partial"]
    assert stage_coverage(funnel(dict(answer=["g1"]), ["g1"])["answer"]) == "full"
    assert stage_coverage(funnel(dict(answer=[]), ["g1"])["answer"]) == "none"


def test_bootstrap_interval_on_a_known_case():
    from pace.metrics import bootstrap_ci
    lo, hi = bootstrap_ci([1] * 50 + [0] * 50)           # normal approximation: 0.5 +- 1.96 * 0.05
    assert lo == pytest.approx(0.402, abs=0.012) and hi == pytest.approx(0.598, abs=0.012)
    assert bootstrap_ci([1] * 50 + [0] * 50) == (lo, hi)   # fixed seed: deterministic
    lo, hi = bootstrap_ci([1] * 80 + [0] * 20)
    assert lo == pytest.approx(0.8 - 1.96 * 0.04, abs=0.012) and hi == pytest.approx(0.8 + 1.96 * 0.04, abs=0.012)
    assert bootstrap_ci([0.0, 0.0, 0.0]) == (0.0, 0.0)
    assert all(v != v for v in bootstrap_ci([1.0])) and all(v != v for v in bootstrap_ci([]))
