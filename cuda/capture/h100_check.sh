#!/usr/bin/env bash
# Runs the matrix-product and fp8/tf32 captures again on this GPU (an H100, say) and compares
# them with the committed H200 captures: the same seeded inputs, so the kept rows and columns
# must hold the same bits; the wgmma probes' raw files must have the SHA-256 that
# tests/data/README.md lists. On the device machine, from the repository root, $OUT set:
#   bash cuda/capture/h100_check.sh          # writes $OUT/summary.txt and the two capture logs
set -u
cd cuda/capture
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/summary.txt
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)" | tee -a $OUT/summary.txt
export PYTHONUNBUFFERED=1
MATMUL_SURVEY=0 timeout 200 python3 matmul_capture.py /tmp/mmout /tmp/mmwork > $OUT/matmul_log.txt 2>&1
echo "== cuBLAS" >> $OUT/summary.txt
python3 compare_captures.py /tmp/mmwork ../../tests/data/matmul >> $OUT/summary.txt 2>&1
timeout 200 python3 triton_matmul_capture.py /tmp/trout > $OUT/triton_log.txt 2>&1
mkdir -p /tmp/trwork && for f in /tmp/trout/capture_part*.tar.gz; do tar xzf $f -C /tmp/trwork; done
cp /tmp/trout/manifest.json /tmp/trwork/ 2>/dev/null
echo "== Triton" >> $OUT/summary.txt
python3 compare_captures.py /tmp/trwork ../../tests/data/matmul_triton triton >> $OUT/summary.txt 2>&1
cd ../.. && mkdir -p /tmp/lowp && OUT=/tmp/lowp timeout 150 bash cuda/capture/run_capture.sh capture_lowp > /dev/null 2>&1
echo "== wgmma fp8/tf32 (sha256 of the raw files; the H200's are in tests/data/README.md)" >> $OUT/summary.txt
(cd /tmp/lowp && sha256sum wgmma_*.bin) >> $OUT/summary.txt
grep -A12 "SHA-256 of the raw BXMMA01" tests/data/README.md | grep wgmma_ | awk '{print $1"  "$2}' > /tmp/h200.sha
(cd /tmp/lowp && sha256sum -c /tmp/h200.sha) >> $OUT/summary.txt 2>&1
tail -5 $OUT/matmul_log.txt; cat $OUT/summary.txt | tail -60
