#!/usr/bin/env bash
# Table 5 on a data/mini subset with a local model: PaceMaker, HippoRAG 2, GraphRAG and the simple baselines, judged blind.
# Needs the local and graphrag extras (pip install -e '.[local,graphrag]'). Every step resumes from the run folder's cache
# (results/table5/<name>/cache.sqlite) and the indexes' files, so a killed run is restarted with the same command.
#   bash results/table5/run.sh [chat spec] [pace console script]
set -euo pipefail
cd "$(dirname "$0")/../.."
CHAT=${1:-llamacpp:qwen2.5-0.5b}
PACE=${2:-.venv/bin/pace}
PY=$(dirname "$PACE")/python
DATA=results/table5/data-mini-01-q6-f40
# GraphRAG's entity extraction capped at 384 completion tokens: the 0.5B model repeats one record until the budget runs out
# (4 of its first 5 extraction replies hit the default 1,024), which made the index a matter of hours on 2 cores
GRAPHRAG=${GRAPHRAG:-extract_max_tokens=384}
NAME=mini-01-q6-f40-$(echo "${CHAT#*:}" | tr '/:' '--')
[ -f "$DATA/queries.jsonl" ] || "$PY" results/table5/make_subset.py --instance mini-01 --queries 6 --facts 40 --out "$DATA"
# 1. the methods without GraphRAG (HippoRAG 2 first, so its index is built first); 2. GraphRAG added to the same run folder
# (only its pairs are computed; the tables cover all)
"$PACE" run --data "$DATA" --all --chat "$CHAT" --out results/table5 --name "$NAME" --no-progress --graphrag-config "$GRAPHRAG" \
    --methods hipporag2,oracle,bm25,dense,hybrid,pacemaker
"$PACE" run --data "$DATA" --all --chat "$CHAT" --out results/table5 --name "$NAME" --no-progress --graphrag-config "$GRAPHRAG" \
    --methods hipporag2,oracle,bm25,dense,hybrid,pacemaker,graphrag
