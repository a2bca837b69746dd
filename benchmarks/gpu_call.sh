#!/usr/bin/env bash
# One call of a lent GPU for the work of both GPU issues (docs/performance.md, "On a GPU"), at most 9 minutes:
# benchmarks/gpu_check.sh (the wmt14 step, given STEP_S seconds; then the FSDP checks unless CHECK_FSDP=0), then
# benchmarks/gpu_experiments.sh with the seconds left before DEADLINE_S (default 540 from the start: give the call
# timeout_s 570). Arguments go to gpu_experiments.sh, as the runs of `python -m experiments.table3` (default: the
# base row, 1,000 steps, seeds 1-3, each about 100 s on an H200: two fit after the step). Each part runs where its
# inputs are: the step and FSDP with the corpus in WMT_LIKE (default .device/wmt-like), the translation with its
# model. Prepared here by `python -m benchmarks.gpu_pack` (one folder, carried) and run there by that pack's call.sh,
# which unpacks the code without git and runs this script in it (docs/performance.md, "The calls").
# The step's budget, STEP_S (default 330): its two default modes (STEP_MODES, issue 99: the one-batch step captured
# in CUDA graphs, then the 8-batch compiled control) each warm up every batch shape first. The compiled warm-up took
# 88-99 s on the H200 (2 graphs, 61 shapes); the captured one compiles as long and records each of its 52 shapes
# twice; then 35 measured steps each (30 timed, 3 watched for syncs, 2 profiled), and the process' start and the
# peak's measurement: about 280 s, so 330 leaves a margin, and the record, rewritten after each mode, keeps the
# first if the second runs out.
# What comes back (a call brings back at most 8 files, 2 folders down): the step's record wmt14-step.json, the
# translation's gpu-translate.json, the new Table 3 records (table3-records.tgz, new-records.txt), and logs.tgz:
# every log, and machine.txt (the GPU, the host CPU, the commit of the code with the files that differ from it: from
# git, or from the packed code's code.json where there is no git, and the pack's pack.json).
set -uo pipefail
out=${OUT:-/tmp/gpu-call}
mkdir -p "$out"
deadline=${DEADLINE_S:-540}
{
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
    lscpu | grep -E "^Model name|^CPU\(s\)"
    if git rev-parse -q --verify HEAD > /dev/null 2>&1; then git log -1 --format="commit %H" && git status --short
    else echo "no git here: code.json" && cat code.json; fi
    if [ -f .device/pack.json ]; then cat .device/pack.json; fi
    # CTranslate2 4.8's CUDA build loads cuBLAS 12 (libcublas.so.12) when it runs; the image's torch is CUDA 13's
    (shopt -s nullglob; site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
     echo "cuBLAS:" /usr/local/cuda*/lib*/libcublas.so.* "$site"/nvidia/*/lib/libcublas.so.* \
        "$(ldconfig -p | grep -o 'libcublas\.so\.[0-9]*' | sort -u | tr '\n' ' ')")
} > "$out/machine.txt" 2>&1
bash benchmarks/gpu_wheels.sh "$out/pip.log"
if [ -d "${WMT_LIKE:-.device/wmt-like}" ]; then
    OUT=$out STEP_S=${STEP_S:-330} bash benchmarks/gpu_check.sh
else
    echo "gpu_check: not run (no corpus in ${WMT_LIKE:-.device/wmt-like})"
fi
# Translation (issue 110, item 4): benchmarks/gpu_translate.py on the model in TRANSLATE_MODEL (default
# .device/translate-model, prepared as docs/performance.md says), for TRANSLATE_S seconds (default 150) or what is
# left before the deadline; its record, rewritten after each mode, is gpu-translate.json. TRANSLATE_ARGS: more of
# its flags (the CPU rehearsal's --limit).
model=${TRANSLATE_MODEL:-.device/translate-model}
left=$((deadline - SECONDS - 10))
budget=$((left < ${TRANSLATE_S:-150} ? left : ${TRANSLATE_S:-150}))
if [ -d "$model" ] && [ "$budget" -ge 60 ]; then
    PYTHONPATH=$PWD timeout "$budget" python3 -m benchmarks.gpu_translate "$model" --json "$out/gpu-translate.json" \
        ${TRANSLATE_ARGS:-} > "$out/translate.log" 2>&1
    echo "gpu_translate exit $? after at most $budget s"; grep -E "^(generate|ct2)" "$out/translate.log" | cut -c1-300
else
    echo "gpu_translate: not run (model folder $model; $budget s left)"
fi
left=$((deadline - SECONDS))
if [ "$left" -ge 60 ]; then
    OUT=$out BUDGET_S=$left bash benchmarks/gpu_experiments.sh "$@"
else
    echo "gpu_call: $left s left before ${deadline} s, too few for an experiment run"
fi
(cd "$out" && tar czf logs.tgz --remove-files ./machine.txt ./*.log)
echo "gpu_call: back in \$OUT: $(cd "$out" && find . -type f | sort | tr '\n' ' ')"
