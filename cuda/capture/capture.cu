// Captures raw results of NVIDIA GPU arithmetic (MUFU ex2/rcp, tensor-core
// mma/wgmma, fp32/bf16 ALU, conversions) for bitexact's models and replay
// tests. One run writes every file into the folder given as argv[1]; the
// layouts are documented in cuda/capture/README.md.
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 capture.cu
#include <cmath>
#include <ctime>

#include "capture_common.cuh"
#include "capture_mma.cuh"
#include "capture_ops.cuh"
#include "capture_sfu.cuh"

int main(int argc, char** argv) {
    const std::string out_dir = start_capture(argc, argv);
    std::time_t start = std::time(nullptr);
    run_mma(out_dir);
    run_ops(out_dir);
    run_sfu(out_dir);
    log_line("capture finished in %ld s", (long)(std::time(nullptr) - start));
    std::fclose(info_file);
    return 0;
}
