// Segment max for GATv2's per-destination softmax (see src/ops/segment_max.rs).
//
// out[n, h] = max over edges e with index[e] == n of src[e, h]; nodes without edges get 0.
// Compiled at run time by NVRTC (no nvcc needed to build the crate). CI compiles this file
// with nvcc -ptx to check it, on machines without a GPU.

// Float atomic max via integer atomics: for non-negative floats the IEEE bit patterns order like
// signed ints, for negative floats they order in reverse like unsigned ints.
__device__ __forceinline__ void atomic_max_f32(float *addr, float value) {
    if (value >= 0.0f) {
        atomicMax(reinterpret_cast<int *>(addr), __float_as_int(value));
    } else {
        atomicMin(reinterpret_cast<unsigned int *>(addr), __float_as_uint(value));
    }
}

extern "C" __global__ void segment_max_fill_f32(float *out, unsigned int len) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) {
        out[i] = -__int_as_float(0x7f800000); // -inf
    }
}

extern "C" __global__ void segment_max_scatter_f32(
    const float *src, const unsigned int *index, float *out,
    unsigned int num_edges, unsigned int width) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < num_edges * width) {
        unsigned int e = i / width;
        unsigned int h = i % width;
        atomic_max_f32(&out[index[e] * width + h], src[i]);
    }
}

// Empty segments stay -inf after the scatter; PyG (torch scatter 'max') reports 0 for them.
extern "C" __global__ void segment_max_finish_f32(float *out, unsigned int len) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len && out[i] == -__int_as_float(0x7f800000)) {
        out[i] = 0.0f;
    }
}
