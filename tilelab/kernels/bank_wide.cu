// Microbenchmark of wide shared-memory accesses: one warp, each lane at its own word
// offset (offs[lane]; -1: the lane takes no part), `iters` times the same 8- or 16-byte
// load (lds64, lds128) or 16-byte store (sts128). Nsight Compute's wavefronts per
// instruction of each launch are the GPU's own count of the pattern's passes through the
// banks, which tilelab/catalog/banks.py predicts. On a GPU the access is inline PTX, so the
// compiler can neither merge nor drop it; elsewhere (the CPU emulator) a plain access.
#if defined(__CUDA_ARCH__)
#define PTX 1
#else
#define PTX 0
#endif
#define WORDS 2048

__global__ void lds128(const int* __restrict__ offs, float* __restrict__ out, int iters)
{
    __shared__ __align__(16) float s[WORDS];
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x)
        s[i] = (float)i;
    __syncthreads();
    const int off = offs[threadIdx.x];
    float acc = 0.0f;
    if (off >= 0) {
        for (int it = 0; it < iters; ++it) {
            float4 v;
#if PTX
            unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(&s[off]));
            asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                         : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
#else
            v = *reinterpret_cast<const float4*>(&s[off]);
#endif
            acc += v.x + v.y + v.z + v.w;
        }
    }
    out[threadIdx.x] = acc;
}

__global__ void lds64(const int* __restrict__ offs, float* __restrict__ out, int iters)
{
    __shared__ __align__(16) float s[WORDS];
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x)
        s[i] = (float)i;
    __syncthreads();
    const int off = offs[threadIdx.x];
    float acc = 0.0f;
    if (off >= 0) {
        for (int it = 0; it < iters; ++it) {
            float2 v;
#if PTX
            unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(&s[off]));
            asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a));
#else
            v = *reinterpret_cast<const float2*>(&s[off]);
#endif
            acc += v.x + v.y;
        }
    }
    out[threadIdx.x] = acc;
}

__global__ void sts128(const int* __restrict__ offs, float* __restrict__ out, int iters)
{
    __shared__ __align__(16) float s[WORDS];
    const int off = offs[threadIdx.x];
    const float x = (float)threadIdx.x;
    if (off >= 0) {
        for (int it = 0; it < iters; ++it) {
#if PTX
            unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(&s[off]));
            asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};"
                         :: "r"(a), "f"(x), "f"(x), "f"(x), "f"(x) : "memory");
#else
            *reinterpret_cast<float4*>(&s[off]) = make_float4(x, x, x, x);
#endif
        }
    }
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}
