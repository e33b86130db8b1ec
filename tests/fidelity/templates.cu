// Compiled with no_extern_c=True: kernels are found by their mangled names.
template <typename T, int BLOCK>
__global__ void axpy(T* y, const T* x, T a, int n)
{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
template __global__ void axpy<float, 128>(float*, const float*, float, int);
template __global__ void axpy<double, 128>(double*, const double*, double, int);

__global__ void square(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= x[i];
}
