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

__global__ void kernel_probe(int* out) { *out = 42; }

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR [--probe]\n", argv[0]);
        return 1;
    }
    std::string out_dir = argv[1];
    if (argc > 2 && std::string(argv[2]) == "--probe") {  // does this binary run on this driver?
        int* d;
        int h = 0;
        PROBE_CHECK(cudaMalloc(&d, 4));
        kernel_probe<<<1, 1>>>(d);
        PROBE_CHECK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
        return h == 42 ? 0 : 4;
    }
    info_file = std::fopen((out_dir + "/info.txt").c_str(), "a");
    cudaDeviceProp prop;
    PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    log_line("device: %s sm_%d%d, %d SMs, driver API %d, runtime %d", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, driver, runtime);
    std::time_t start = std::time(nullptr);
    run_mma(out_dir);
    run_ops(out_dir);
    run_sfu(out_dir);
    log_line("capture finished in %ld s", (long)(std::time(nullptr) - start));
    std::fclose(info_file);
    return 0;
}
