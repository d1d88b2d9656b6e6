#!/usr/bin/env bash
# Seconds per PaceMaker query before and after a token cut, on idle cores: the paper-default PaceMaker with Qwen2.5-Coder-0.5B
# on 6 queries of data/mini, once as it is and once with a variant's settings, each run with a fresh cache so that
# every call is made (and timed) now. Run it with nothing else on the machine.
#   bash results/prompt_tokens/time.sh [path/to/pace] [variant settings, default max_pool_candidates=40] [variant name, default pool40]
set -euo pipefail
cd "$(dirname "$0")/../.."
PACE=${1:-.venv/bin/pace}
CFG=${2:-max_pool_candidates=40}
VAR=${3:-pool40}
OUT=results/prompt_tokens
for spec in "doc_id:" "$VAR:$CFG"; do
    name=${spec%%:*}; cfg=${spec#*:}
    rm -f /tmp/pace-time-$name.sqlite*
    "$PACE" run --retrieval-only --out $OUT --no-progress --name time-$name-n6 --limit 6 --methods pacemaker \
        --chat llamacpp:qwen2.5-0.5b ${cfg:+--config $cfg} --cache /tmp/pace-time-$name.sqlite
done
.venv/bin/python scripts/compare_runs.py $OUT/time-doc_id-n6 $OUT/time-$VAR-n6 > $OUT/time_${VAR}_vs_doc_id.md
cat $OUT/time_${VAR}_vs_doc_id.md
