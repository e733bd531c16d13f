// Robust pyramidal dense Lucas-Kanade with candidate propagation, and the fused per-person pooling.
//
// The CUDA C twin of pairedge/runtime/flow/lk_reference.py (the numpy reference): every kernel below is one
// step of that module, computed per pixel, in float32 with the same operation order (compile with
// --fmad=false to keep the products and sums rounded as numpy rounds them); window sums in double, as the
// reference's. Images are row-major float planes; a flow
// field is two planes (u = x component, v = y component). Plain CUDA C, no headers: NVRTC compiles it at
// run time and nvcc compiles it in CI.

#define CLAMPI(a, lo, hi) ((a) < (lo) ? (lo) : ((a) > (hi) ? (hi) : (a)))

__device__ __forceinline__ float bilinear(const float* img, int w, int h, float x, float y) {
    x = fminf(fmaxf(x, 0.0f), (float)(w - 1));
    y = fminf(fmaxf(y, 0.0f), (float)(h - 1));
    float x0 = floorf(x), y0 = floorf(y);
    float ax = x - x0, ay = y - y0;
    int i0 = (int)x0, j0 = (int)y0;
    int i1 = min(i0 + 1, w - 1), j1 = min(j0 + 1, h - 1);
    float top = (1.0f - ax) * img[j0 * w + i0] + ax * img[j0 * w + i1];
    float bottom = (1.0f - ax) * img[j1 * w + i0] + ax * img[j1 * w + i1];
    return (1.0f - ay) * top + ay * bottom;
}

extern "C" {

// uint8 (n) -> float (n)
__global__ void u8_to_float(const unsigned char* src, float* dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = (float)src[i];
}

// Binomial [1 4 6 4 1]/16 along rows, at columns x = xo * step: src (h, w) -> dst (h, wo).
__global__ void smooth_h(const float* src, float* dst, int w, int h, int wo, int step) {
    int xo = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (xo >= wo || y >= h) return;
    int x = xo * step;
    const float* row = src + (size_t)y * w;
    float t = row[CLAMPI(x - 2, 0, w - 1)] + 4.0f * row[CLAMPI(x - 1, 0, w - 1)];
    t = t + 6.0f * row[x];
    t = t + 4.0f * row[CLAMPI(x + 1, 0, w - 1)];
    t = t + row[CLAMPI(x + 2, 0, w - 1)];
    dst[(size_t)y * wo + xo] = t * 0.0625f;
}

// Binomial along columns, at rows y = yo * step: src (h, w) -> dst (ho, w).
__global__ void smooth_v(const float* src, float* dst, int w, int h, int ho, int step) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, yo = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || yo >= ho) return;
    int y = yo * step;
    float t = src[(size_t)CLAMPI(y - 2, 0, h - 1) * w + x] + 4.0f * src[(size_t)CLAMPI(y - 1, 0, h - 1) * w + x];
    t = t + 6.0f * src[(size_t)y * w + x];
    t = t + 4.0f * src[(size_t)CLAMPI(y + 1, 0, h - 1) * w + x];
    t = t + src[(size_t)CLAMPI(y + 2, 0, h - 1) * w + x];
    dst[(size_t)yo * w + x] = t * 0.0625f;
}

// Central differences 0.5 (a[x+1] - a[x-1]), border replicated.
__global__ void gradient(const float* a, float* ix, float* iy, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    size_t i = (size_t)y * w + x;
    ix[i] = 0.5f * (a[(size_t)y * w + min(x + 1, w - 1)] - a[(size_t)y * w + max(x - 1, 0)]);
    iy[i] = 0.5f * (a[(size_t)min(y + 1, h - 1) * w + x] - a[(size_t)max(y - 1, 0) * w + x]);
}

// Coarser flow (hc, wc) -> (h, w): bilinear at (x + 0.5) / 2 - 0.5, times 2.
__global__ void upsample(const float* uc, const float* vc, int wc, int hc, float* u, float* v, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float sx = ((float)x + 0.5f) * 0.5f - 0.5f, sy = ((float)y + 0.5f) * 0.5f - 0.5f;
    size_t i = (size_t)y * w + x;
    u[i] = 2.0f * bilinear(uc, wc, hc, sx, sy);
    v[i] = 2.0f * bilinear(vc, wc, hc, sx, sy);
}

// Squared warped residual of the 5 propagation candidates (self, right, left, below, above at distance d):
// res5[k * n + i] = (I1(x + u_k, y + v_k) - I0(x, y))^2 with (u_k, v_k) the flow at the clamped neighbour.
__global__ void prop_residual(const float* i0, const float* i1, const float* u, const float* v,
                              int w, int h, int d, float* res5) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const int dy[5] = {0, 0, 0, d, -d};
    const int dx[5] = {0, d, -d, 0, 0};
    size_t n = (size_t)w * h, i = (size_t)y * w + x;
    for (int k = 0; k < 5; ++k) {
        size_t j = (size_t)CLAMPI(y + dy[k], 0, h - 1) * w + CLAMPI(x + dx[k], 0, w - 1);
        float r = bilinear(i1, w, h, (float)x + u[j], (float)y + v[j]) - i0[i];
        res5[k * n + i] = r * r;
    }
}

// Each pixel takes the candidate flow of the smallest window cost (first one on ties).
__global__ void prop_select(const float* cost5, const float* u, const float* v, float* uo, float* vo,
                            int w, int h, int d) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const int dy[5] = {0, 0, 0, d, -d};
    const int dx[5] = {0, d, -d, 0, 0};
    size_t n = (size_t)w * h, i = (size_t)y * w + x;
    int best = 0;
    float c = cost5[i];
    for (int k = 1; k < 5; ++k) {
        float ck = cost5[k * n + i];
        if (ck < c) { c = ck; best = k; }
    }
    size_t j = (size_t)CLAMPI(y + dy[best], 0, h - 1) * w + CLAMPI(x + dx[best], 0, w - 1);
    uo[i] = u[j];
    vo[i] = v[j];
}

// Window sums along rows over [x - r, x + r] truncated, for `planes` planes of (h, w): float in, double out.
// Window sums are accumulated in double in both passes and rounded to float once (as the reference's
// float64 box filter): the sums of float terms are then exact in practice, so both agree bit for bit.
__global__ void box_h(const float* src, double* dst, int w, int h, int r, int planes) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    size_t n = (size_t)w * h;
    int lo = max(x - r, 0), hi = min(x + r, w - 1);
    for (int p = 0; p < planes; ++p) {
        const float* row = src + p * n + (size_t)y * w;
        double s = 0.0;
        for (int k = lo; k <= hi; ++k) s += (double)row[k];
        dst[p * n + (size_t)y * w + x] = s;
    }
}

// Window sums along columns over [y - r, y + r] truncated: double in, float out.
__global__ void box_v(const double* src, float* dst, int w, int h, int r, int planes) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    size_t n = (size_t)w * h;
    int lo = max(y - r, 0), hi = min(y + r, h - 1);
    for (int p = 0; p < planes; ++p) {
        const double* col = src + p * n + x;
        double s = 0.0;
        for (int k = lo; k <= hi; ++k) s += col[(size_t)k * w];
        dst[p * n + (size_t)y * w + x] = (float)s;
    }
}

// Robust LK terms: r = I1(x + u) - I0, w = 1 / (1 + (r / sigma)^2); planes w Ix Ix, w Ix Iy, w Iy Iy, w Ix r, w Iy r.
__global__ void lk_terms(const float* i0, const float* i1, const float* ix, const float* iy,
                         const float* u, const float* v, int w, int h, float inv_sigma, float* t5) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    size_t n = (size_t)w * h, i = (size_t)y * w + x;
    float r = bilinear(i1, w, h, (float)x + u[i], (float)y + v[i]) - i0[i];
    float e = r * inv_sigma;
    float wt = 1.0f / (1.0f + e * e);
    float gx = wt * ix[i], gy = wt * iy[i];
    t5[i] = gx * ix[i];
    t5[n + i] = gx * iy[i];
    t5[2 * n + i] = gy * iy[i];
    t5[3 * n + i] = gx * r;
    t5[4 * n + i] = gy * r;
}

// Solve the regularised 2 x 2 system per pixel and update the flow in place (step clipped to max_step).
__global__ void lk_solve(const float* s5, float* u, float* v, int n, float reg, float max_step) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = s5[i] + reg, b = s5[n + i], c = s5[2 * n + i] + reg;
    float bx = s5[3 * n + i], by = s5[4 * n + i];
    float det = a * c - b * b;
    float du = -(c * bx - b * by) / det;
    float dv = -(a * by - b * bx) / det;
    u[i] = u[i] + fminf(fmaxf(du, -max_step), max_step);
    v[i] = v[i] + fminf(fmaxf(dv, -max_step), max_step);
}

// 3 x 3 median, border replicated (exact: a selection, no rounding).
__global__ void median3(const float* src, float* dst, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float a[9];
    int k = 0;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx)
            a[k++] = src[(size_t)CLAMPI(y + dy, 0, h - 1) * w + CLAMPI(x + dx, 0, w - 1)];
    for (int i = 0; i < 5; ++i) {  // partial selection sort: a[4] ends as the median
        int m = i;
        for (int j = i + 1; j < 9; ++j) if (a[j] < a[m]) m = j;
        float t = a[i]; a[i] = a[m]; a[m] = t;
    }
    dst[(size_t)y * w + x] = a[4];
}

// (u, v) planes -> interleaved (h, w, 2).
__global__ void interleave(const float* u, const float* v, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[2 * i] = u[i]; out[2 * i + 1] = v[i]; }
}

}  // extern "C"
