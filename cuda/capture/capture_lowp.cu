// Captures Hopper's narrow-input tensor-core instructions for bitexact's
// models and replay tests: wgmma m64n8k32 with e4m3/e5m2 in all four
// pairings into f32 and into f16, and wgmma m64n8k8 with tf32 into f32
// (capture_mma_lowp.cuh). One run writes the nine BXMMA01 files
// (cuda/capture/README.md) into the folder given as argv[1].
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 capture_lowp.cu
#include <algorithm>
#include <cmath>
#include <ctime>

#include "capture_common.cuh"
#include "capture_mma.cuh"
#include "capture_mma_lowp.cuh"

int main(int argc, char** argv) {
    const std::string out_dir = start_capture(argc, argv);
    std::time_t start = std::time(nullptr);
    run_mma_lowp(out_dir, 1024);
    log_line("capture finished in %ld s", (long)(std::time(nullptr) - start));
    std::fclose(info_file);
    return 0;
}
