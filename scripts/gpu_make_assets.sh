#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes pk's binary test assets on a machine with a CUDA GPU, torch, transformers and tokenizers:
#   1. tests/data/golden/<name>/ for the tiny random models (scripts/make_goldens.py),
#   2. models/pk-tiny, trained on the KJV Bible for MINUTES minutes (scripts/train_tiny_model.py),
#   3. tests/data/golden/pk-tiny.json, the goldens of that model.
# Needs the corpus at .dev/corpus.txt.gz (see models/pk-tiny/README.md). Packs the results and the
# logs into $OUT (default /tmp/pk-assets): assets.tar.gz, goldens.log, train.log, pktiny.log.
# Environment: MINUTES (training budget, default 4), GOLDEN_SECONDS (seed retries, default 100).
# Each step runs even if an earlier one failed; the exit status is that of the first failure.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/pk-assets}
MINUTES=${MINUTES:-4}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
rc=0
fail() { if [ "$rc" -eq 0 ]; then rc=$1; fi; }
python3 -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers",
transformers.__version__, "tokenizers", tokenizers.__version__, "cuda", torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'

python3 scripts/make_goldens.py --out tests/data/golden --seconds "${GOLDEN_SECONDS:-100}" 2>&1 |
    tee "$OUT/goldens.log" || fail 1
find tests/data/golden -type d \( -name '*.try*' -o -name '*.tmp' \) -prune -exec rm -rf {} + 2>/dev/null
tar czf "$OUT/goldens.tar.gz" tests/data/golden  # in case the rest runs out of time
python3 scripts/train_tiny_model.py --corpus .dev/corpus.txt.gz --out models/pk-tiny --minutes "$MINUTES" \
    2>&1 | tee "$OUT/train.log" || fail 2
if [ -f models/pk-tiny/model.safetensors ]; then
    python3 scripts/make_goldens.py --out tests/data/golden --pk-tiny models/pk-tiny 2>&1 |
        tee "$OUT/pktiny.log" || fail 3
else
    fail 3
fi
find tests/data/golden models/pk-tiny -type d \( -name '*.try*' -o -name '*.tmp' \) -prune -exec rm -rf {} + 2>/dev/null
tar czf "$OUT/assets.tar.gz" models/pk-tiny tests/data/golden && rm -f "$OUT/goldens.tar.gz"
ls -la "$OUT"; tar tzvf "$OUT/assets.tar.gz"
echo "gpu_make_assets: exit $rc"
exit $rc
