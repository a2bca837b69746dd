#!/usr/bin/env bash
# One call of a lent GPU for the work of both GPU issues (docs/performance.md, "On a GPU"): benchmarks/gpu_check.sh
# (the wmt14 step, given STEP_S seconds, default 330: its compiled warm-up has taken 99 s and more; then the FSDP
# checks), then benchmarks/gpu_experiments.sh with the seconds left before DEADLINE_S (default 570 from the start:
# give the call timeout_s 590). Arguments go to gpu_experiments.sh, as the runs of `python -m experiments.table3`
# (default: the base row, 1,000 steps, seeds 1-3). Prepared here as those two scripts say; run there from the
# repository root with .device carried.
set -uo pipefail
deadline=${DEADLINE_S:-570}
STEP_S=${STEP_S:-330} bash benchmarks/gpu_check.sh
left=$((deadline - SECONDS))
if [ "$left" -ge 60 ]; then
    BUDGET_S=$left bash benchmarks/gpu_experiments.sh "$@"
else
    echo "gpu_call: $left s left before ${deadline} s, too few for an experiment run"
fi
