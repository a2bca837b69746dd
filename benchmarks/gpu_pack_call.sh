#!/usr/bin/env bash
# A pack's call.sh (benchmarks/gpu_pack.py copies it in): run on the lent machine as `bash .device/pack-NAME/call.sh`
# with the pack carried. It unpacks the pack's code into a fresh folder outside any git checkout (the records made
# there name the commit of its code.json), lays out that folder's .device as benchmarks/gpu_call.sh reads it (the
# wheels restored from xz, the corpus unpacked, the model linked, pack.json beside them), and runs the pack's
# benchmarks/gpu_call.sh there with this script's arguments and environment (OUT, DEADLINE_S, CHECK_FSDP, ...).
set -euo pipefail
pack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$(realpath -m "${OUT:-/tmp/gpu-call}")
export OUT
root=$(mktemp -d /tmp/gpu-call-code.XXXXXX)
tar xzf "$pack/code.tgz" -C "$root"
mkdir -p "$root/.device/wheels"
for wheel in "$pack"/wheels/*.whl.xz; do
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
        "$wheel" "$root/.device/wheels/$(basename "$wheel" .xz)"
done
if [ -f "$pack/wmt-like.tgz" ]; then tar xzf "$pack/wmt-like.tgz" -C "$root/.device"; fi
if [ -d "$pack/translate-model" ]; then ln -s "$pack/translate-model" "$root/.device/translate-model"; fi
cp "$pack/pack.json" "$root/.device/pack.json"
echo "gpu_pack_call: $pack unpacked in $root ($(du -sh "$root" | cut -f1))"
cd "$root"
exec bash benchmarks/gpu_call.sh "$@"
