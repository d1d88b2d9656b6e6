#!/usr/bin/env bash
# The runs behind nbs/experiments/03_pacemaker_small.ipynb: retrieval-only `pace run`s on data/mini with the local
# llama.cpp models (CPU). Times measured on 2 CPU cores: 42 min for the first run (shared with other jobs), 38 min for
# the second, about 20 min for the ablations and 17 min for the 1.5B run. The calls are cached per model (cache-*.sqlite, not committed), so a rerun after an interruption
# continues, and the runs share the planner and view-generator calls they have in common.
#   bash results/pacemaker_small/run.sh [path/to/pace]
set -euo pipefail
cd "$(dirname "$0")/../.."
PACE=${1:-.venv/bin/pace}
OUT=results/pacemaker_small
run() { "$PACE" run --retrieval-only --out "$OUT" --no-progress "$@"; }
run --name q05-paper-n24 --limit 24 --methods hybrid,pacemaker --chat llamacpp:qwen2.5-0.5b --cache $OUT/cache-q05.sqlite
run --name q05-small-all --all --methods hybrid,pacemaker-small --chat llamacpp:qwen2.5-0.5b --cache $OUT/cache-q05.sqlite
run --name q05-ablations-n12 --limit 12 --methods hybrid,pacemaker-small,pacemaker-small-no_weighting,pacemaker-small-no_anchors,pacemaker-small-no_poolcap \
    --chat llamacpp:qwen2.5-0.5b --cache $OUT/cache-q05.sqlite
run --name q15-small-n12 --limit 12 --methods hybrid,pacemaker-small --chat llamacpp:qwen2.5-1.5b --cache $OUT/cache-q15.sqlite
run --name q15-paper-n12 --limit 12 --methods hybrid,pacemaker --chat llamacpp:qwen2.5-1.5b --cache $OUT/cache-q15.sqlite
