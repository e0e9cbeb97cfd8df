// Message-passing kernels for GCN and GATv2 (see src/ops/spmm.rs, gat_scores.rs, csr_softmax.rs).
//
// Edges come sorted by destination (or by source, for gradients): node i's edges are positions
// ptr[i]..ptr[i+1], `other` holds the far endpoint and `edge` the original edge id. Sums over a
// node's edges are then done by one thread in edge order: no atomics, deterministic, and the same
// order as the CPU kernels. Compiled at run time by NVRTC; CI compiles it with nvcc to check it.

__device__ __forceinline__ float leaky(float z, float slope) { return z > 0.0f ? z : z * slope; }
__device__ __forceinline__ float leaky_grad(float z, float slope) { return z > 0.0f ? 1.0f : slope; }

// out[i, h, c] = sum over the edges k of node i of w[edge[k], h] * x[other[k], h, c].
// One thread per output value; neighbouring threads read neighbouring channels of one row.
extern "C" __global__ void spmm_f32(
    const unsigned int *ptr, const unsigned int *other, const unsigned int *edge,
    const float *x, const float *w, float *out,
    unsigned int n, unsigned int heads, unsigned int channels) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int width = heads * channels;
    if (t >= n * width) return;
    unsigned int i = t / width;
    unsigned int q = t % width;
    unsigned int h = q / channels;
    float acc = 0.0f;
    for (unsigned int k = ptr[i]; k < ptr[i + 1]; ++k) {
        acc += x[(unsigned long long)other[k] * width + q] * w[(unsigned long long)edge[k] * heads + h];
    }
    out[t] = acc;
}

// out[e, h] = sum_c a[to[e], h, c] * b[from[e], h, c]: the gradient of spmm's edge weights.
extern "C" __global__ void edge_dot_f32(
    const unsigned int *to, const unsigned int *from, const float *a, const float *b, float *out,
    unsigned int num_edges, unsigned int heads, unsigned int channels) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_edges * heads) return;
    unsigned int e = t / heads;
    unsigned int h = t % heads;
    unsigned long long width = (unsigned long long)heads * channels;
    const float *ar = a + to[e] * width + h * channels;
    const float *br = b + from[e] * width + h * channels;
    float acc = 0.0f;
    for (unsigned int c = 0; c < channels; ++c) acc += ar[c] * br[c];
    out[t] = acc;
}

// GATv2 scores: out[e, h] = sum_c att[h, c] * leaky(xr[dst[e], h, c] + xl[src[e], h, c]).
extern "C" __global__ void gat_scores_f32(
    const unsigned int *src, const unsigned int *dst, const float *xl, const float *xr,
    const float *att, float *out,
    unsigned int num_edges, unsigned int heads, unsigned int channels, float slope) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= num_edges * heads) return;
    unsigned int e = t / heads;
    unsigned int h = t % heads;
    unsigned long long width = (unsigned long long)heads * channels;
    const float *l = xl + src[e] * width + h * channels;
    const float *r = xr + dst[e] * width + h * channels;
    const float *a = att + h * channels;
    float acc = 0.0f;
    for (unsigned int c = 0; c < channels; ++c) acc += leaky(r[c] + l[c], slope) * a[c];
    out[t] = acc;
}

// Gradient of the scores with respect to xl (node_is_src = 1, edges sorted by source) or xr
// (node_is_src = 0, sorted by destination): one thread per (node, head, channel).
extern "C" __global__ void gat_scores_grad_x_f32(
    const unsigned int *ptr, const unsigned int *other, const unsigned int *edge,
    const float *g, const float *xl, const float *xr, const float *att, float *out,
    unsigned int n, unsigned int heads, unsigned int channels, float slope,
    unsigned int node_is_src) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int width = heads * channels;
    if (t >= n * width) return;
    unsigned int node = t / width;
    unsigned int q = t % width;
    unsigned int h = q / channels;
    float a = att[q];
    float acc = 0.0f;
    for (unsigned int k = ptr[node]; k < ptr[node + 1]; ++k) {
        unsigned long long j = node_is_src ? node : other[k];
        unsigned long long i = node_is_src ? other[k] : node;
        float z = xr[i * width + q] + xl[j * width + q];
        acc += g[(unsigned long long)edge[k] * heads + h] * a * leaky_grad(z, slope);
    }
    out[t] = acc;
}

// Gradient of the scores with respect to att: one thread per (head·channel, chunk of edges),
// each adding its chunk's sum with one atomic, so H·C slots see E / chunk atomics each.
extern "C" __global__ void gat_scores_grad_att_f32(
    const unsigned int *src, const unsigned int *dst, const float *g, const float *xl,
    const float *xr, float *out,
    unsigned int num_edges, unsigned int heads, unsigned int channels, float slope,
    unsigned int chunk) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int width = heads * channels;
    unsigned int chunks = (num_edges + chunk - 1) / chunk;
    if (t >= width * chunks) return;
    unsigned int q = t % width;
    unsigned int h = q / channels;
    unsigned int first = (t / width) * chunk;
    unsigned int last = (first + chunk < num_edges ? first + chunk : num_edges);
    float acc = 0.0f;
    for (unsigned int e = first; e < last; ++e) {
        float z = xr[(unsigned long long)dst[e] * width + q] + xl[(unsigned long long)src[e] * width + q];
        acc += g[(unsigned long long)e * heads + h] * leaky(z, slope);
    }
    atomicAdd(&out[q], acc);
}

// PyG's softmax over each destination's edges, one thread per (node, head): max, exp-sum, divide.
extern "C" __global__ void softmax_f32(
    const unsigned int *ptr, const unsigned int *edge, const float *s, float *out,
    unsigned int n, unsigned int heads) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * heads) return;
    unsigned int i = t / heads;
    unsigned int h = t % heads;
    unsigned int begin = ptr[i], end = ptr[i + 1];
    if (begin == end) return;
    float m = s[(unsigned long long)edge[begin] * heads + h];
    for (unsigned int k = begin + 1; k < end; ++k) {
        float v = s[(unsigned long long)edge[k] * heads + h];
        if (v > m || v != v) m = v; // NaN wins, as in torch
    }
    float sum = 0.0f;
    for (unsigned int k = begin; k < end; ++k) {
        unsigned long long at = (unsigned long long)edge[k] * heads + h;
        float x = expf(s[at] - m);
        out[at] = x;
        sum += x;
    }
    float denom = sum + 1e-16f;
    for (unsigned int k = begin; k < end; ++k) {
        unsigned long long at = (unsigned long long)edge[k] * heads + h;
        out[at] = out[at] / denom;
    }
}

// Its gradient: ds[e] = alpha[e] * (g[e] - sum over the node's edges of alpha * g).
extern "C" __global__ void softmax_grad_f32(
    const unsigned int *ptr, const unsigned int *edge, const float *alpha, const float *g,
    float *out, unsigned int n, unsigned int heads) {
    unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * heads) return;
    unsigned int i = t / heads;
    unsigned int h = t % heads;
    float dot = 0.0f;
    for (unsigned int k = ptr[i]; k < ptr[i + 1]; ++k) {
        unsigned long long at = (unsigned long long)edge[k] * heads + h;
        dot += alpha[at] * g[at];
    }
    for (unsigned int k = ptr[i]; k < ptr[i + 1]; ++k) {
        unsigned long long at = (unsigned long long)edge[k] * heads + h;
        out[at] = alpha[at] * (g[at] - dot);
    }
}
