/* The pair block of the ``pairedge`` feature spec (versions 1 and 2), compiled: one pass over the pairs of a
 * frame instead of dozens of numpy calls, and the O(pairs x people) neighbour counts in one tight loop; and the
 * per-box flow moments (rect_moments) the person block pools, summed directly; and the track-history motion
 * (track_motion). Python sides: pairkernel.py, flowpool.flow_moments, history.TrackHistory.motion.
 *
 * It computes exactly the formulas of pairedge/core/features/pairblock.py, neighbours.py and orientation.py
 * (frame_pair_values), in the same float64 operations, and writes the finished float32 rows of stage 1 and
 * stage 2 (clamped to [-10, 10], NaN -> 0, as edge.finish). pairkernel.py is its Python side (argument checks,
 * the numpy fallback, the exact fallback of the neighbour counts); tests/core/features/test_pairkernel.py holds
 * it to the numpy implementation.
 *
 * Neighbour counts are thresholded, so a rounding difference could flip one. Every comparison is therefore made
 * twice, against the threshold shrunk and grown by a bound on the rounding error: first in float32 (TOL32_ULPS
 * float32 ulps of the terms' magnitude), then, for a pair that pass cannot decide, in float64 (TOL_ULPS, which
 * covers numpy's own rounding too); a pair neither decides (someone within 1e-13 or so of a boundary: crafted
 * input) is flagged in ``ambiguous`` and its counts are recomputed by the Python reference, so the counts are
 * the reference's.
 *
 * No numpy headers: arrays arrive through the buffer protocol; the GIL is released while it computes.
 * Built with -ffp-contract=off (no fused multiply-add, so the products round as numpy's do).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Columns of the per-person table (pairkernel.PERSON_COLUMNS, the same order). */
enum { C_X, C_Y, C_W, C_H, C_RIGHT, C_BOTTOM, C_AREA, C_CX, C_CY, C_VX, C_VY, C_SPEED, C_PVX, C_PVY, C_HVX,
       C_HVY, C_FX, C_FY, C_FCONF, NCOL };
/* Entries of the per-frame parameter vector (pairkernel.PARAMS). */
enum { P_WIDTH, P_HEIGHT, P_MIN_SPEED, P_MIN_SPEED2, P_SCENE_COUNT, P_SCENE_MEDIAN, P_SCENE_MOVING, P_CROWD_VX,
       P_CROWD_VY, P_CROWD_NORM, P_ORIENTATION, NPARAM };

#define EPS 1e-6
#define DIV_EPS 1e-6 /* history.DIV_EPS */
#define CLAMP 10.0f
#define MAX_TIME 10.0
#define NEAR 1.5
#define INLINE 0.3
#define START 0.25
#define END 2.0
#define PI 3.14159265358979323846
/* float64 rounding-error bound of along / across / half, in ulps (2^-52) of their terms' magnitude: both
 * implementations are within ~10 ulps of the exact values; 256 leaves a wide margin. */
#define TOL_ULPS 256.0
/* the same for the float32 pass, in float32 ulps (2^-24 relative rounding): ~10 are needed */
#define TOL32_ULPS 64.0
#define NCOLUMNS_V1 25
#define NCOLUMNS_V2 31
#define ABI 3 /* pairedge.core.features.compiled.ABI: bump with every interface change */

/* numpy's maximum / minimum: NaN in either argument gives NaN (fmax / fmin would drop it). */
static inline double np_max(double a, double b) { return (a != a) ? a : (b != b) ? b : (a >= b ? a : b); }
static inline double np_min(double a, double b) { return (a != a) ? a : (b != b) ? b : (a <= b ? a : b); }

/* |(x, y)|: sqrt(x^2 + y^2), within an ulp of hypot (numpy's np.hypot) and several times cheaper; hypot
 * itself where the squares could overflow or underflow. Only for values: a comparison of a norm with a
 * threshold goes through norm_above, so no comparison differs from numpy's. */
static inline double norm(double x, double y) {
    const double s = sqrt(x * x + y * y);
    return (s > 1e-150 && s < 1e150) ? s : hypot(x, y);
}

/* hypot(x, y) > threshold, given s = norm(x, y): s decides unless it lies within a few ulps of the
 * threshold, where hypot does. */
static inline int norm_above(double s, double x, double y, double threshold) {
    if (fabs(s - threshold) <= 8 * DBL_EPSILON * threshold) return hypot(x, y) > threshold;
    return s > threshold;
}

/* pairblock._cos: cosine of u and v with norms nu, nv; 0 where either norm is not above min_norm. */
static inline double cosine(double ux, double uy, double vx, double vy, double nu, double nv, double min_norm) {
    return (norm_above(nu, ux, uy, min_norm) && norm_above(nv, vx, vy, min_norm))
               ? (ux * vx + uy * vy) / np_max(nu * nv, EPS)
               : 0.0;
}

/* edge.finish of one value: float32, clamped to [-10, 10], NaN -> 0. */
static inline float finish(double v) {
    float f = (float)v;
    if (f != f) return 0.0f;
    return f > CLAMP ? CLAMP : (f < -CLAMP ? -CLAMP : f);
}

/* How many people pass the near and inline tests, by the shrunk ("sure") and the grown ("maybe") bounds. */
typedef struct {
    int64_t near_sure, near_maybe, line_sure, line_maybe;
} Counts;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

/* Near / inline tests of everyone (xs, ys: n centres) against one pair (midpoint, conj(unit A->B) / mh as
 * (rr, ri), half its length), each with a sure and a maybe bound (test_bounds). Branch-free so the compiler
 * vectorises it; on x86-64 an AVX-512 or AVX2 clone is picked at load time when the CPU has it. One definition
 * for float64 (count_people) and float32 (count_people32, twice the lanes, int32 sums). */
#define DEFINE_COUNT_PEOPLE(NAME, REAL, SUM, ABS)                                                                 \
    CLONES static Counts NAME(const REAL *xs, const REAL *ys, Py_ssize_t n, REAL midx, REAL midy, REAL rr,         \
                              REAL ri, REAL half, const REAL *bounds) {                                           \
        const REAL near_in = bounds[0], near_out = bounds[1], line_in = bounds[2], line_out = bounds[3];          \
        const REAL start_in = half + bounds[4], start_out = half + bounds[5];                                     \
        const REAL end_in = half + bounds[6], end_out = half + bounds[7];                                         \
        SUM ns = 0, nm = 0, ls = 0, lm = 0;                                                                       \
        for (Py_ssize_t j = 0; j < n; ++j) {                                                                      \
            const REAL qx = xs[j] - midx, qy = ys[j] - midy;                                                      \
            const REAL along = qx * rr - qy * ri; /* Re(q * conj(unit) / mh) */                                   \
            const REAL across = qx * ri + qy * rr;                                                                \
            const REAL d2 = along * along + across * across;                                                      \
            const REAL a = ABS(along), c2 = across * across;                                                      \
            ns += d2 < near_in;                                                                                   \
            nm += d2 < near_out;                                                                                  \
            ls += (c2 < line_in) & (a > start_in) & (a < end_in);                                                 \
            lm += (c2 < line_out) & (a > start_out) & (a < end_out);                                              \
        }                                                                                                         \
        Counts out = {ns, nm, ls, lm};                                                                            \
        return out;                                                                                               \
    }
DEFINE_COUNT_PEOPLE(count_people, double, int64_t, fabs)
DEFINE_COUNT_PEOPLE(count_people32, float, int32_t, fabsf)
#undef DEFINE_COUNT_PEOPLE

/* The sure / maybe bounds of the tests for a rounding-error bound tol: (NEAR -+ 2 tol)^2 (the error of a norm is
 * <= sqrt(2) tol), (INLINE -+ tol)^2, START +- tol, END -+ tol. */
static void test_bounds(double tol, double *b) {
    const double near_lo = NEAR - 2 * tol, near_hi = NEAR + 2 * tol, line_lo = INLINE - tol, line_hi = INLINE + tol;
    b[0] = near_lo * near_lo;
    b[1] = near_hi * near_hi;
    b[2] = line_lo * line_lo;
    b[3] = line_hi * line_hi;
    b[4] = START + tol;
    b[5] = START - tol;
    b[6] = END - tol;
    b[7] = END + tol;
}

/* Whether `half` (A's and B's distance from the midpoint) is clear of NEAR by more than the bound: then whether
 * the reference counts A and B as near (and subtracts them again) is known. */
static inline int self_decided(double half, double tol) { return half < NEAR - 2 * tol || !(half < NEAR + 2 * tol); }

/* The neighbour counts of one pair (neighbours.neighbours_reference) into *near, *line; *ambiguous = 1 (counts
 * 0) when neither pass can decide them. */
static void neighbours(const double *xs, const double *ys, const float *xs32, const float *ys32, Py_ssize_t n,
                       double reach, const double *pa, const double *pb, double *near, double *line,
                       uint8_t *ambiguous) {
    const double dx = pb[C_CX] - pa[C_CX], dy = pb[C_CY] - pa[C_CY];
    const double mh = np_max((pa[C_H] + pb[C_H]) / 2, EPS);
    const double dist = norm(dx, dy);
    const double half = dist / mh / 2;
    const int apart = norm_above(dist, dx, dy, EPS);
    const double midx = pa[C_CX] + dx / 2, midy = pa[C_CY] + dy / 2;
    /* conj(unit A->B) / mh as (rr, ri): along = Re(q * rot), across = Im(q * rot) */
    const double ur = apart ? dx / dist : 1.0, ui = apart ? -dy / dist : 0.0;
    const double rr = ur / mh, ri = ui / mh;
    const double mag = (reach + fabs(midx) + fabs(midy)) * (fabs(rr) + fabs(ri)) + half + 1.0;
    double bounds[8];
    Counts c = {0, 0, 0, 0};
    int decided = 0;
    const double tol32 = TOL32_ULPS * 5.9604644775390625e-08 * mag; /* float32 first: 2^-24 per ulp */
    if (tol32 < 0.01 && self_decided(half, tol32)) {
        float b32[8];
        test_bounds(tol32, bounds);
        for (int i = 0; i < 8; ++i) b32[i] = (float)bounds[i];
        c = count_people32(xs32, ys32, n, (float)midx, (float)midy, (float)rr, (float)ri, (float)half, b32);
        decided = c.near_sure == c.near_maybe && c.line_sure == c.line_maybe;
    }
    const double tol = TOL_ULPS * 2.220446049250313e-16 * mag; /* then float64, where float32 could not */
    /* !(tol < 0.05): non-finite or huge positions, no bound is meaningful: the reference decides */
    if (!decided && tol < 0.05 && self_decided(half, tol)) {
        test_bounds(tol, bounds);
        c = count_people(xs, ys, n, midx, midy, rr, ri, half, bounds);
        decided = c.near_sure == c.near_maybe && c.line_sure == c.line_maybe;
    }
    /* A and B lie at `half` from the midpoint: the reference counts them, then subtracts them */
    *near = decided ? (double)c.near_sure - (double)(2 * (half < NEAR)) : 0.0;
    *line = decided && apart ? (double)c.line_sure : 0.0;
    *ambiguous = (uint8_t)!decided;
}

/* pairblock.pair_block (+ orientation.frame_pair_values when prm[P_ORIENTATION]) of one pair, as float64. */
static void pair_values(const double *pa, const double *pb, const double *prm, double *v) {
    const double ws = prm[P_WIDTH], hs = prm[P_HEIGHT], ms = prm[P_MIN_SPEED], ms2 = prm[P_MIN_SPEED2];
    const double mh = np_max((pa[C_H] + pb[C_H]) / 2, EPS);
    const double dx = pb[C_CX] - pa[C_CX], dy = pb[C_CY] - pa[C_CY];
    /* geometry */
    const double dist = norm(dx, dy);
    const double oy = np_max(0.0, np_min(pa[C_BOTTOM], pb[C_BOTTOM]) - np_max(pa[C_Y], pb[C_Y]));
    const double ox = np_max(0.0, np_min(pa[C_RIGHT], pb[C_RIGHT]) - np_max(pa[C_X], pb[C_X]));
    const double inter = ox * oy;
    const double uni = pa[C_AREA] + pb[C_AREA] - inter;
    const double low = np_min(pa[C_H], pb[C_H]), high = np_max(pa[C_H], pb[C_H]);
    v[0] = dist / mh;
    v[1] = fabs(dx) / mh;
    v[2] = fabs(pa[C_BOTTOM] - pb[C_BOTTOM]) / mh;
    v[3] = low / np_max(high, EPS);
    v[4] = oy / np_max(low, EPS);
    v[5] = inter / np_max(uni, EPS);
    v[6] = mh / hs;
    v[7] = (pa[C_BOTTOM] + pb[C_BOTTOM]) / 2 / hs;
    v[8] = (pa[C_W] + pb[C_W]) / 2 / ws;
    /* relative motion */
    const double relx = (pb[C_PVX] - pa[C_PVX]) / mh, rely = (pb[C_PVY] - pa[C_PVY]) / mh;
    const double rhx = (pb[C_HVX] - pa[C_HVX]) / mh, rhy = (pb[C_HVY] - pa[C_HVY]) / mh;
    const double dpx = dx / mh, dpy = dy / mh;
    const double dd = np_max(norm(dpx, dpy), EPS);
    const double ux = dpx / dd, uy = dpy / dd;
    const double n_unit = norm(ux, uy);
    const double rel2 = rhx * rhx + rhy * rhy;
    double t_star = rel2 > ms2 ? -(dpx * rhx + dpy * rhy) / np_max(rel2, EPS) : 0.0;
    t_star = np_min(np_max(t_star, -MAX_TIME), MAX_TIME);
    const double ahead = np_max(t_star, 0.0);
    const double missx = dpx + rhx * ahead, missy = dpy + rhy * ahead;
    const double na = norm(pa[C_VX], pa[C_VY]), nb = norm(pb[C_VX], pb[C_VY]);
    const double toward_a = cosine(pa[C_VX], pa[C_VY], ux, uy, na, n_unit, 0.0) * (double)(pa[C_SPEED] > ms);
    const double toward_b = cosine(pb[C_VX], pb[C_VY], -ux, -uy, nb, n_unit, 0.0) * (double)(pb[C_SPEED] > ms);
    const double twice_h = 2 * mh;
    const double mvx = (pa[C_PVX] + pb[C_PVX]) / twice_h, mvy = (pa[C_PVY] + pb[C_PVY]) / twice_h;
    const double n_mean = norm(mvx, mvy);
    v[9] = sqrt(relx * relx + rely * rely);
    v[10] = fabs(pa[C_SPEED] - pb[C_SPEED]);
    v[11] = cosine(pa[C_VX], pa[C_VY], pb[C_VX], pb[C_VY], na, nb, ms);
    v[12] = rhx * ux + rhy * uy;
    v[13] = sqrt(missx * missx + missy * missy);
    v[14] = t_star;
    v[15] = np_max(toward_a, toward_b);
    v[16] = np_min(toward_a, toward_b);
    v[17] = fabs(cosine(mvx, mvy, ux, uy, n_mean, n_unit, ms));
    v[18] = (pa[C_SPEED] + pb[C_SPEED]) / 2;
    /* scene context (v[23], v[24]: the neighbour counts, filled by the caller) */
    v[19] = prm[P_SCENE_COUNT];
    v[20] = prm[P_SCENE_MEDIAN];
    v[21] = prm[P_SCENE_MOVING];
    v[22] = cosine(mvx, mvy, prm[P_CROWD_VX], prm[P_CROWD_VY], n_mean, prm[P_CROWD_NORM], ms);
    if (prm[P_ORIENTATION] == 0.0) return;
    /* body orientation: displacement = centre x difference and box-bottom difference */
    const double obx = pb[C_BOTTOM] - pa[C_BOTTOM];
    const double odist = np_max(norm(dx, obx), EPS);
    const double oux = dx / odist, ouy = obx / odist;
    const double known = np_min(pa[C_FCONF], pb[C_FCONF]);
    const double a_to_b = pa[C_FX] * oux + pa[C_FY] * ouy;
    const double b_to_a = -(pb[C_FX] * oux + pb[C_FY] * ouy);
    const double cs = np_min(np_max(pa[C_FX] * pb[C_FX] + pa[C_FY] * pb[C_FY], -1.0), 1.0);
    if (known > 0) {
        v[25] = np_max(a_to_b, b_to_a);
        v[26] = np_min(a_to_b, b_to_a);
        v[27] = cs;
        v[28] = acos(cs) / PI;
        v[29] = (fabs(a_to_b) + fabs(b_to_a)) / 2;
    } else {
        v[25] = v[26] = v[27] = v[28] = v[29] = 0.0;
    }
    v[30] = known;
}

/* The buffers an entry point holds; release_all gives every one back, on every path. */
typedef struct {
    Py_buffer views[8];
    int held;
} Held;

/* Take obj's buffer (C-contiguous, writable if asked) into *buf, checking its item size and count; -1 with a
 * Python error (and nothing more held) when it does not fit. */
static int hold(Held *h, PyObject *obj, int writable, Py_ssize_t itemsize, Py_ssize_t count, const char *what,
                void *buf) {
    Py_buffer *view = &h->views[h->held];
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != itemsize || view->len != itemsize * count) {
        PyErr_Format(PyExc_ValueError, "pair kernel: %s has %zd bytes of %zd-byte items, expected %zd items", what,
                     view->len, view->itemsize, count);
        PyBuffer_Release(view);
        return -1;
    }
    ++h->held;
    memcpy(buf, &view->buf, sizeof(void *)); /* buf: the address of a pointer of the item type */
    return 0;
}

static void release_all(Held *h) {
    while (h->held > 0) PyBuffer_Release(&h->views[--h->held]);
}

PyDoc_STRVAR(pair_block_doc,
             "pair_block(people, ia, ib, params, person32, stage1, stage2, ambiguous) -> int\n\n"
             "people (N, NCOL) float64; ia, ib (M,) int64 rows; params (NPARAM,) float64; person32 (N, Fp) float32;\n"
             "stage1 (M, Fq) and stage2 (M, 2 Fp + Fq) float32, written; ambiguous (M,) uint8, written (1 = the\n"
             "neighbour counts of that pair need the reference). Returns the number of ambiguous pairs.");

static PyObject *pair_block(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_people, *o_ia, *o_ib, *o_params, *o_person32, *o_s1, *o_s2, *o_amb;
    Py_ssize_t n, m, fp, fq;
    if (!PyArg_ParseTuple(args, "OOOOOOOOnnnn", &o_people, &o_ia, &o_ib, &o_params, &o_person32, &o_s1, &o_s2,
                          &o_amb, &n, &m, &fp, &fq))
        return NULL;
    if (n < 0 || m < 0 || fp < 0 || (fq != NCOLUMNS_V1 && fq != NCOLUMNS_V2)) {
        PyErr_Format(PyExc_ValueError, "pair kernel: bad sizes n=%zd m=%zd fp=%zd fq=%zd", n, m, fp, fq);
        return NULL;
    }
    Held held = {.held = 0};
    PyObject *result = NULL;
    const double *people, *prm;
    const int64_t *ia, *ib;
    const float *person32;
    float *s1, *s2;
    uint8_t *amb;
    if (hold(&held, o_people, 0, 8, n * NCOL, "people", &people) < 0 || hold(&held, o_ia, 0, 8, m, "ia", &ia) < 0 ||
        hold(&held, o_ib, 0, 8, m, "ib", &ib) < 0 || hold(&held, o_params, 0, 8, NPARAM, "params", &prm) < 0 ||
        hold(&held, o_person32, 0, 4, n * fp, "person32", &person32) < 0 ||
        hold(&held, o_s1, 1, 4, m * fq, "stage1", &s1) < 0 ||
        hold(&held, o_s2, 1, 4, m * (2 * fp + fq), "stage2", &s2) < 0 ||
        hold(&held, o_amb, 1, 1, m, "ambiguous", &amb) < 0)
        goto done;
    {
        for (Py_ssize_t k = 0; k < m; ++k) {
            if (ia[k] < 0 || ia[k] >= n || ib[k] < 0 || ib[k] >= n) {
                PyErr_Format(PyExc_IndexError, "pair kernel: pair %zd has rows (%lld, %lld) outside 0..%zd", k,
                             (long long)ia[k], (long long)ib[k], n - 1);
                goto done;
            }
        }
        double *xs = (double *)PyMem_RawMalloc((size_t)(3 * n + 1) * sizeof(double));
        if (xs == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        double *ys = xs + n;
        float *xs32 = (float *)(ys + n), *ys32 = xs32 + n; /* the last n doubles hold 2 n floats */
        double reach = 0.0; /* max |x| + |y| of everyone's centre */
        for (Py_ssize_t j = 0; j < n; ++j) {
            xs[j] = people[j * NCOL + C_CX];
            ys[j] = people[j * NCOL + C_CY];
            xs32[j] = (float)xs[j];
            ys32[j] = (float)ys[j];
            const double r = fabs(xs[j]) + fabs(ys[j]);
            reach = r > reach ? r : reach; /* NaN never wins: its pairs are caught by tol's finiteness test */
        }
        Py_ssize_t ambiguous = 0;
        const Py_ssize_t f2 = 2 * fp + fq;
        Py_BEGIN_ALLOW_THREADS;
        double v[NCOLUMNS_V2];
        for (Py_ssize_t k = 0; k < m; ++k) {
            const double *pa = people + ia[k] * NCOL, *pb = people + ib[k] * NCOL;
            pair_values(pa, pb, prm, v);
            neighbours(xs, ys, xs32, ys32, n, reach, pa, pb, &v[23], &v[24], &amb[k]);
            ambiguous += amb[k];
            float *row1 = s1 + k * fq, *row2 = s2 + k * f2;
            for (Py_ssize_t c = 0; c < fq; ++c) row1[c] = finish(v[c]);
            memcpy(row2, person32 + ia[k] * fp, (size_t)fp * sizeof(float));
            memcpy(row2 + fp, person32 + ib[k] * fp, (size_t)fp * sizeof(float));
            memcpy(row2 + 2 * fp, row1, (size_t)fq * sizeof(float));
        }
        Py_END_ALLOW_THREADS;
        PyMem_RawFree(xs);
        result = PyLong_FromSsize_t(ambiguous);
    }
done:
    release_all(&held);
    return result;
}

PyDoc_STRVAR(rect_moments_doc,
             "rect_moments(flow, rects, out, h, w, n) -> None\n\n"
             "flow (h, w, 2) float32; rects (n, 4) int64 x0 y0 x1 y1, half-open, clipped (0 <= x0 <= x1 <= w, the\n"
             "same for y); out (n, 4) float64, written: the sums of fx, fy, fx^2, fy^2 over each rectangle,\n"
             "accumulated in float64 in row-major pixel order (flowpool.pooled_reference's sums).");

/* flowpool.flow_moments, directly: cost ~ the boxes' pixels, no per-box Python call, no integral image. */
static PyObject *rect_moments(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_flow, *o_rects, *o_out;
    Py_ssize_t h, w, n;
    if (!PyArg_ParseTuple(args, "OOOnnn", &o_flow, &o_rects, &o_out, &h, &w, &n)) return NULL;
    if (h < 1 || w < 1 || n < 0) {
        PyErr_Format(PyExc_ValueError, "rect moments: bad sizes h=%zd w=%zd n=%zd", h, w, n);
        return NULL;
    }
    Held held = {.held = 0};
    const float *flow;
    const int64_t *rects;
    double *out;
    if (hold(&held, o_flow, 0, 4, h * w * 2, "flow", &flow) < 0 || hold(&held, o_rects, 0, 8, n * 4, "rects", &rects) < 0 ||
        hold(&held, o_out, 1, 8, n * 4, "out", &out) < 0) {
        release_all(&held);
        return NULL;
    }
    PyObject *result = Py_None;
    for (Py_ssize_t i = 0; i < n; ++i) {
        const int64_t *r = rects + 4 * i;
        if (r[0] < 0 || r[0] > r[2] || r[2] > w || r[1] < 0 || r[1] > r[3] || r[3] > h) {
            PyErr_Format(PyExc_IndexError, "rect moments: rectangle %zd (%lld, %lld, %lld, %lld) is not clipped to "
                         "%zd x %zd", i, (long long)r[0], (long long)r[1], (long long)r[2], (long long)r[3], w, h);
            result = NULL;
            break;
        }
    }
    if (result != NULL) {
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < n; ++i) {
            const int64_t *r = rects + 4 * i;
            double sx = 0.0, sy = 0.0, sxx = 0.0, syy = 0.0;
            for (int64_t y = r[1]; y < r[3]; ++y) {
                const float *row = flow + (y * w + r[0]) * 2;
                for (int64_t x = 0; x < r[2] - r[0]; ++x) {
                    const double fx = row[2 * x], fy = row[2 * x + 1];
                    sx += fx;
                    sy += fy;
                    sxx += fx * fx;
                    syy += fy * fy;
                }
            }
            out[4 * i] = sx;
            out[4 * i + 1] = sy;
            out[4 * i + 2] = sxx;
            out[4 * i + 3] = syy;
        }
        Py_END_ALLOW_THREADS;
        Py_INCREF(result);
    }
    release_all(&held);
    return result;
}

PyDoc_STRVAR(track_motion_doc,
             "track_motion(pos, height, time, count, slots, out, k, cap, n) -> None\n\n"
             "The TrackHistory ring buffers (pos (cap, k, 2), height and time (cap, k) float64, count (cap,) int64),\n"
             "slots (n,) int64; out (n, 7) float64, written: velocity x y, step velocity x y, unsteadiness, scale\n"
             "rate, fill (history.TrackHistory.motion without panorama wrap).");

/* history.TrackHistory.motion of the given slots, one loop per track instead of ~30 numpy calls. */
static PyObject *track_motion(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_pos, *o_height, *o_time, *o_count, *o_slots, *o_out;
    Py_ssize_t k, cap, n;
    if (!PyArg_ParseTuple(args, "OOOOOOnnn", &o_pos, &o_height, &o_time, &o_count, &o_slots, &o_out, &k, &cap, &n))
        return NULL;
    if (k < 2 || k > 4096 || cap < 0 || n < 0) {
        PyErr_Format(PyExc_ValueError, "track motion: bad sizes k=%zd cap=%zd n=%zd", k, cap, n);
        return NULL;
    }
    Held held = {.held = 0};
    PyObject *result = NULL;
    double *steps = NULL;
    const double *pos, *hgt, *tim;
    const int64_t *count, *slots;
    double *out;
    if (hold(&held, o_pos, 0, 8, cap * k * 2, "pos", &pos) < 0 || hold(&held, o_height, 0, 8, cap * k, "height", &hgt) < 0 ||
        hold(&held, o_time, 0, 8, cap * k, "time", &tim) < 0 || hold(&held, o_count, 0, 8, cap, "count", &count) < 0 ||
        hold(&held, o_slots, 0, 8, n, "slots", &slots) < 0 || hold(&held, o_out, 1, 8, n * 7, "out", &out) < 0)
        goto done;
    {
        for (Py_ssize_t i = 0; i < n; ++i) {
            if (slots[i] < 0 || slots[i] >= cap || count[slots[i]] < 1 || count[slots[i]] > k) {
                PyErr_Format(PyExc_IndexError, "track motion: slot %lld of row %zd is not an observed track",
                             (long long)slots[i], i);
                goto done;
            }
        }
        steps = (double *)PyMem_RawMalloc((size_t)(2 * k) * sizeof(double));
        if (steps == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; ++i) {
            const int64_t s = slots[i], cnt = count[s], oldest = k - cnt, last = k - 1;
            const double *p = pos + s * k * 2, *h = hgt + s * k, *t = tim + s * k;
            double *o = out + i * 7;
            const double mean_h = np_max((h[oldest] + h[last]) / 2, DIV_EPS);
            const double span = t[last] - t[oldest];
            const int ok = cnt >= 2 && span > 0;
            const double span_d = np_max(span, DIV_EPS);
            o[0] = ok ? (p[2 * last] - p[2 * oldest]) / span_d / mean_h : 0.0;
            o[1] = ok ? (p[2 * last + 1] - p[2 * oldest + 1]) / span_d / mean_h : 0.0;
            const double ratio = h[last] / np_max(h[oldest], DIV_EPS);
            o[5] = ok ? log(np_max(ratio, DIV_EPS)) / span_d : 0.0;
            /* per-step velocities: step j from sample j to j + 1, valid when sample j is valid and time moved;
             * the valid ones kept in order in `steps` (their mean, then their spread around it) */
            double sx = 0.0, sy = 0.0, lx = 0.0, ly = 0.0;
            int64_t nv = 0;
            for (int64_t j = oldest; j < last; ++j) {
                const double dts = t[j + 1] - t[j];
                if (dts > 0) {
                    const double d = np_max(dts, DIV_EPS);
                    const double vx = (p[2 * j + 2] - p[2 * j]) / d / mean_h, vy = (p[2 * j + 3] - p[2 * j + 1]) / d / mean_h;
                    steps[2 * nv] = vx;
                    steps[2 * nv + 1] = vy;
                    sx += vx;
                    sy += vy;
                    ++nv;
                    if (j == last - 1) lx = vx, ly = vy;
                }
            }
            const double denom = (double)(nv > 1 ? nv : 1);
            const double mx = sx / denom, my = sy / denom;
            double dev = 0.0;
            for (int64_t j = 0; j < nv; ++j) {
                const double ex = steps[2 * j] - mx, ey = steps[2 * j + 1] - my;
                dev += ex * ex + ey * ey;
            }
            o[2] = lx;
            o[3] = ly;
            o[4] = nv >= 2 ? sqrt(dev / denom) : 0.0;
            o[6] = (double)(cnt - 1 > 0 ? cnt - 1 : 0) / (double)(k - 1);
        }
        result = Py_None;
        Py_INCREF(result);
    }
done:
    PyMem_RawFree(steps);
    release_all(&held);
    return result;
}

static PyMethodDef methods[] = {
    {"pair_block", pair_block, METH_VARARGS, pair_block_doc},
    {"rect_moments", rect_moments, METH_VARARGS, rect_moments_doc},
    {"track_motion", track_motion, METH_VARARGS, track_motion_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_pairkernel",
    "The pair block of the pairedge feature spec, compiled (see pairedge.core.features.pairkernel).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__pairkernel(void) {
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL) return NULL;
    if (PyModule_AddIntConstant(mod, "NCOL", NCOL) < 0 || PyModule_AddIntConstant(mod, "NPARAM", NPARAM) < 0 ||
        PyModule_AddIntConstant(mod, "ABI", ABI) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
