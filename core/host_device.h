// DTR_HOST_DEVICE marks a function nvcc compiles for both host and device
// (the CUDA kernels of cuda/*.cu share it with the CPU's); plain inline for
// every other compiler.
#pragma once

#if defined(__CUDACC__)
#define DTR_HOST_DEVICE __host__ __device__
#else
#define DTR_HOST_DEVICE
#endif
