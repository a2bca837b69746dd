#!/usr/bin/env bash
# The experiment runs a lent GPU makes in one call (docs/multi30k.md, docs/table3.md): the pending runs of
# `python -m experiments.table3` (its arguments are this script's: by default the base row at 1,000 steps, seeds 1-3),
# as many as finish within BUDGET_S seconds (default 480, for a call of at most 9 minutes: give it timeout_s 600).
# The runner skips every run recorded in results/table3, as it does on any machine, and the records of the runs made
# here come back in $OUT/table3-records.tgz (only those; the page and its plots are made back here from the records:
# a call brings back at most 8 files, 2 folders down).
# Prepared here first, as for benchmarks/gpu_check.sh, by benchmarks/gpu_pack.py (every pack holds the wheels the
# runs need; the machine reaches no package index and no Hub; the Multi30k data is bundled).
# Not here: the multi30k-tiny preset's seeds (issue 101): by this estimate no call fits one. A seed is 8,000
# steps of two 4,096-token micro-batches of a 4+4-layer model (about 1,600 launches a step at benchmarks/gpu_model.py's
# 25 us a launch: 40-45 ms, so 5.5-6 minutes), 116 epochs each evaluated (greedy, 200 pairs) and checkpointed, and a
# final beam-5 evaluation; Table 3's base row took 62-101 s for 1,000 one-batch 3+3-layer steps on the H200 with its
# evaluations: about 11-21 minutes a seed, over one command's 10 (it needs its checkpoint carried between calls).
# Run there from the code a pack's call.sh unpacks; back here, add the new records and the page:
#   tar xzf FILES_AT/table3-records.tgz -C results/table3 --skip-old-files && python -m experiments.table3 --report
set -uo pipefail
out=${OUT:-/tmp/gpu-experiments}
budget=${BUDGET_S:-480}
mkdir -p "$out"
bash benchmarks/gpu_wheels.sh "$out/pip.log"
export PYTHONPATH=$PWD TOKENIZERS_PARALLELISM=false
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else
'no GPU: the runs train on the CPU')"
[ $# -gt 0 ] || set -- --rows base --steps 1000 --seeds 1 2 3
records=$(mktemp -d)
cp -r results/table3/. "$records/"                   # what is recorded is skipped
find "$records" -name table3.json | sort > "$out/.before"
# SIGTERM at the budget: the run in progress is lost (a run without its record is trained whole next time)
timeout "$budget" python3 -m experiments.table3 --results "$records" --page "$records.page/table3.md" \
    --runs "${RUNS:-/tmp/table3-runs}" "$@" > "$out/table3.log" 2>&1
echo "experiments.table3 exit $? after at most ${budget} s"
find "$records" -name table3.json | sort | comm -13 "$out/.before" - > "$out/new-records.txt"
# keep only the runs made here: a folder whose record was there before goes
while read -r path; do rm -r "$(dirname "$path")"; done < "$out/.before"
find "$records" -type d -empty -delete
rm "$out/.before"
sed -i "s|^$records/||" "$out/new-records.txt"
mkdir -p "$records"  # (none new: an empty archive)
tar czf "$out/table3-records.tgz" -C "$records" .
echo "new records: $(wc -l < "$out/new-records.txt")"; cat "$out/new-records.txt"
grep -E "validation PPL|exited with status|Error" "$out/table3.log" | cut -c1-200 | tail -12
