// Fused per-person pooling of a flow field still on the GPU (the CPU reference is
// pairedge.features.flowpool.pooled_reference): per pixel rectangle the sums of fx, fy, fx^2, fy^2 in double,
// and the flow on the coarse background grid the ego-motion fit reads. Only N x 4 doubles and the grid
// (a few hundred vectors) leave the GPU.

extern "C" {

// One block per rectangle (rects: n x 4 int x0 y0 x1 y1, clipped, half-open). out: n x 4 double.
// blockDim.x must be a power of two <= 256.
__global__ void box_moments(const float* u, const float* v, int w, const int* rects, int n, double* out) {
    __shared__ double s[4][256];
    int b = blockIdx.x;
    if (b >= n) return;
    int x0 = rects[4 * b], y0 = rects[4 * b + 1], x1 = rects[4 * b + 2], y1 = rects[4 * b + 3];
    int rw = x1 - x0, count = rw * (y1 - y0);
    double sx = 0.0, sy = 0.0, sxx = 0.0, syy = 0.0;
    for (int k = threadIdx.x; k < count; k += blockDim.x) {
        int y = y0 + k / rw, x = x0 + k % rw;
        double fx = (double)u[(size_t)y * w + x], fy = (double)v[(size_t)y * w + x];
        sx += fx; sy += fy; sxx += fx * fx; syy += fy * fy;
    }
    int t = threadIdx.x;
    s[0][t] = sx; s[1][t] = sy; s[2][t] = sxx; s[3][t] = syy;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {
        if (t < half) {
            s[0][t] += s[0][t + half]; s[1][t] += s[1][t + half];
            s[2][t] += s[2][t + half]; s[3][t] += s[3][t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[4 * b] = s[0][0]; out[4 * b + 1] = s[1][0]; out[4 * b + 2] = s[2][0]; out[4 * b + 3] = s[3][0];
    }
}

// Flow at rows step/2 + gy * step and columns step/2 + gx * step: out (gh, gw, 2) float.
__global__ void grid_sample(const float* u, const float* v, int w, int gh, int gw, int step, float* out) {
    int gx = blockIdx.x * blockDim.x + threadIdx.x, gy = blockIdx.y * blockDim.y + threadIdx.y;
    if (gx >= gw || gy >= gh) return;
    size_t i = (size_t)(step / 2 + gy * step) * w + (step / 2 + gx * step);
    size_t o = (size_t)gy * gw + gx;
    out[2 * o] = u[i];
    out[2 * o + 1] = v[i];
}

}  // extern "C"
