#!/usr/bin/env bash
# The checks only a GPU can make, in one call of a lent machine (docs/performance.md, "On a GPU"): the wmt14
# preset's step after every batch shape is warm (warm-up seconds, tokens/s, MFU, host syncs, kernel launches and
# GPU-busy milliseconds a step, beside the step benchmarks/gpu_model.py predicts; benchmarks/wmt14_step.py), and the
# FSDP 2 config training the preset, checkpointing, averaging, resuming, and saving a model that loads from its own
# code files. At most 9 minutes (each part has its timeout; STEP_S, default 330, bounds the step's; STEP_MODES names
# its modes, by default issue 99's: the step's 25,000 tokens in one batch, compiled and captured in CUDA graphs, then
# the 8-batch compiled control; CHECK_FSDP=0 leaves out the FSDP part, when the record of a call at the same FSDP
# code has it): give the call timeout_s 560, or run it from gpu_call.sh.
# The model's input for the host's time a step besides its launches: HOST_TIME_MODE, a mode of
# results/benchmarks/host-time.json (item 4 B; default "eager, 1 micro-batch"), or HOST_OTHER_MS, a figure stated.
# `python -m benchmarks.wmt14_step --data ... --profile 3` prints where an eager step's time goes, when a record
# asks why.
# Prepared here first (the machine reaches no package index and no Hub): `python -m benchmarks.gpu_pack step`, the
# corpus and the wheels the machine's Python lacks; run there by the pack's call.sh (through gpu_call.sh), from the
# code it unpacks; logs and the record go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
bash benchmarks/gpu_wheels.sh "$out/pip.log"
export PYTHONPATH=$PWD TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers, accelerate; print(torch.__version__, transformers.__version__,
accelerate.__version__, torch.cuda.get_device_name())"
data=${WMT_LIKE:-.device/wmt-like}  # the prepared corpus
if [ -n "${HOST_OTHER_MS:-}" ]; then model=(--host_other_ms "$HOST_OTHER_MS"); else
    model=(--host_time_mode "${HOST_TIME_MODE:-eager, 1 micro-batch}"); fi
# shellcheck disable=SC2086  # STEP_MODES: several words
# TORCH_LOGS: inductor says why it leaves a graph without CUDA graphs (cudagraphs mode), and dynamo which guard
# failed when it compiles a graph again (the H200's call at 6585233 compiled 3 in its first 3 steps, and said no more)
PYTHONUNBUFFERED=1 TORCH_LOGS=cudagraphs,recompiles timeout "${STEP_S:-330}" \
    python3 -m benchmarks.wmt14_step --data $data --modes ${STEP_MODES:-cudagraphs compiled} "${model[@]}" \
    --json "$out/wmt14-step.json" > "$out/step.log" 2>&1
echo "wmt14_step exit $?; c10 sync warnings (other threads): $(grep -c 'synchronizing CUDA' "$out/step.log")"
grep -A4 '^| step' "$out/step.log"; grep ' syncs:' "$out/step.log"; grep -E "Error|error:" "$out/step.log" | tail -3
grep -m3 "skipping cudagraphs" "$out/step.log"; grep -m6 "__recompiles\]  *- " "$out/step.log"
if [ "${CHECK_FSDP:-1}" = 0 ]; then echo "FSDP: not checked (CHECK_FSDP=0)"; exit 0; fi
files=(--dataset files --tokenizer $data/tokenizer --train_files $data/train.en $data/train.de
       --validation_files $data/valid.en $data/valid.de --final_splits validation)
fsdp() {
    timeout 75 accelerate launch --config_file training/configs/accelerate/fsdp.yaml --num_processes 1 \
        -m training.train --config wmt14 "${files[@]}" --output_dir /tmp/fsdp --save_steps 5 \
        --eval_strategy no --average_last 2 --num_beams 1 --logging_steps 5 "$@"
}
fsdp --max_steps 10 > "$out/fsdp.log" 2>&1
echo "fsdp 10 steps exit $?: $(ls /tmp/fsdp | tr '\n' ' ')"; ls /tmp/fsdp/checkpoint-10
fsdp --max_steps 12 > "$out/fsdp-resume.log" 2>&1
echo "fsdp resumed to 12 exit $?: $(grep -m1 -io 'resum[a-z]* [^,]*checkpoint-[0-9]*' "$out/fsdp-resume.log")"
grep -h "'loss'\|averag\|error" "$out/fsdp.log" "$out/fsdp-resume.log" | cut -c1-200 | tail -8
python3 -c "  # the model's own code files, as from the Hub
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
m = AutoModelForSeq2SeqLM.from_pretrained('/tmp/fsdp', trust_remote_code=True).cuda()
t = AutoTokenizer.from_pretrained('/tmp/fsdp')
print('loaded', type(m).__name__, sum(p.numel() for p in m.parameters()), 'parameters')
print(t.batch_decode(m.generate(**t(['A man rides a bike.'], return_tensors='pt').to('cuda'), max_new_tokens=8)))"
