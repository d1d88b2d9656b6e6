#!/usr/bin/env bash
# Shorter filter labels (issue 11, item 3): the paper-default PaceMaker with Qwen2.5-Coder-0.5B on the 24 queries of
# results/pacemaker_small/q05-paper-n24, its filters shown positions (1..n) or two-letter codes instead of doc ids. The cache
# starts as a copy of that run's cache, so the planner and view-generator calls are the same and only the filters' calls are new.
#   bash results/prompt_tokens/run.sh [path/to/pace] [position|code ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
PACE=${1:-.venv/bin/pace}
shift || true
OUT=results/prompt_tokens
[ -f $OUT/cache-q05.sqlite ] || cp results/pacemaker_small/cache-q05.sqlite $OUT/cache-q05.sqlite
for labels in ${@:-position code}; do
    "$PACE" run --retrieval-only --out $OUT --no-progress --name q05-$labels-n24 --limit 24 --methods hybrid,pacemaker \
        --chat llamacpp:qwen2.5-0.5b --config filter_labels=$labels --cache $OUT/cache-q05.sqlite
    .venv/bin/python scripts/compare_runs.py results/pacemaker_small/q05-paper-n24 $OUT/q05-$labels-n24 > $OUT/${labels}_vs_doc_id.md
done
