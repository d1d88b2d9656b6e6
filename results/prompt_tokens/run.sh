#!/usr/bin/env bash
# Fewer prompt tokens (issue 11, item 3): the paper-default PaceMaker with Qwen2.5-Coder-0.5B on the 24 queries of
# results/pacemaker_small/q05-paper-n24, with one change each: the filters shown positions (1..n) or two-letter codes
# instead of doc ids, the post-hop filter shown the first 40 of the pool (BFS order), or codes and the cut together.
# The cache starts as a copy of that run's cache, so the calls a variant shares with it (planner, views, and the pre-hop
# filter when its labels are unchanged) are reused and only the others are new.
#   bash results/prompt_tokens/run.sh [path/to/pace] [position|code|pool40|code-pool40 ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
PACE=${1:-.venv/bin/pace}
shift || true
OUT=results/prompt_tokens
[ -f $OUT/cache-q05.sqlite ] || cp results/pacemaker_small/cache-q05.sqlite $OUT/cache-q05.sqlite
for variant in ${@:-position code pool40 code-pool40}; do
    case $variant in
        position|code) cfg=filter_labels=$variant ;;
        pool40) cfg=max_pool_candidates=40 ;;
        code-pool40) cfg=filter_labels=code,max_pool_candidates=40 ;;
        *) echo "unknown variant $variant" >&2; exit 2 ;;
    esac
    "$PACE" run --retrieval-only --out $OUT --no-progress --name q05-$variant-n24 --limit 24 --methods hybrid,pacemaker \
        --chat llamacpp:qwen2.5-0.5b --config $cfg --cache $OUT/cache-q05.sqlite
    .venv/bin/python scripts/compare_runs.py results/pacemaker_small/q05-paper-n24 $OUT/q05-$variant-n24 > $OUT/${variant}_vs_doc_id.md
done
