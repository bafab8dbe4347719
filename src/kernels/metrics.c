/* metrics.c -- the per-(row, N, T) hot loop of met_head; see metrics.h and docs/metrics.md. */
#include "metrics.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

/* Speed notes: the build compiles with -fno-math-errno (CMakeLists.txt). sqrt never sees a
 * negative argument in the hot loops (clamped first), so errno handling only blocks their
 * vectorization. The pragma below lets the compiler fuse a*b+c into one FMA in this file (ISO
 * C mode, -std=c11, turns contraction off; the c / c^y kernel runs at half speed without it).
 * This is not -ffast-math: IEEE semantics, NaN and inf are unchanged, no reassociation; a fused
 * multiply-add only rounds once instead of twice. Every quantity that cancels (distances by the
 * Gram expansion) is clamped at 0 before sqrt, as before. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "metrics_int.h"


/* C [rows][ldc] += W [rows][ldw] (columns k0..k1) times the G rows order[k0..k1), over
 * columns 0..n-1: the c / c^y update of one stretch of N (section 4.4). Columns
 * [n, n16) are computed too (n16 = n rounded up to 16 where it fits in ldc = ldg; G is zeroed
 * there, the values are never read) so that the scalar tail is rare. A register-
 * blocked kernel instead of dgemm: the G rows are read in place (dgemm needed them gathered
 * into a [K][n] copy, then packed again), and the stretches are short (1, 1, 2, 4, ... for
 * the doubling grid) where dgemm's packing does not pay. Blocks of 6 rows x 16 columns keep
 * 12 vector accumulators; GCC's vector extension compiles to AVX-512, AVX2 or SSE alike. */
typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8i __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

/* unaligned vector load / store (macros: a v8d function argument or return value would
 * change the ABI where AVX-512 is not enabled, and GCC warns about it) */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8d))
#define STORE8(p, v) memcpy((p), &(v), sizeof(v8d))

#define CK_ROWS 6
#define CK_VECS 8
/* one block of R rows x 8 V columns at i (R <= CK_ROWS, V <= CK_VECS, R V <= 16: constants
 * after inlining). R V accumulators: a multiply-add's latency is ~4 cycles, so a block needs
 * 8 or more independent chains to keep the FMA units busy -- few rows (one or two T, or the
 * dist_expect sums of a grid with one T) take more columns per pass over k instead. Each
 * column is still summed over k in order: the blocking does not change a single rounding. */
/* 8 floats widened to doubles (exact): one vcvtps2pd where AVX-512 is there (GCC's generic
 * __builtin_convertvector split it into halves) */
#if defined(__AVX512F__)
#include <immintrin.h>
#define LOADF8(v, p) ((v) = (v8d)_mm512_cvtps_pd(_mm256_loadu_ps(p)))
#else
#define LOADF8(v, p)                                                                \
    do {                                                                            \
        v8f f_;                                                                     \
        memcpy(&f_, (p), sizeof f_);                                                \
        (v) = __builtin_convertvector(f_, v8d);                                     \
    } while (0)
#endif

static inline __attribute__((always_inline)) void c_block(double *C, size_t ldc, const double *W,
                                                          size_t ldw, const void *G, size_t ldg,
                                                          const uint32_t *order, size_t k0,
                                                          size_t k1, size_t i, const int R,
                                                          const int V, const int gf) {
    v8d acc[CK_ROWS][CK_VECS];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) LOAD8(acc[r][v], C + r * ldc + i + 8 * v);
    for (size_t k = k0; k < k1; k++) {
        size_t at = (size_t)order[k] * ldg + i;
        v8d gv[CK_VECS];
        for (int v = 0; v < V; v++) {
            if (gf) /* float G (the captured vectors): the same products as a double copy */
                LOADF8(gv[v], (const float *)G + at + 8 * v);
            else
                LOAD8(gv[v], (const double *)G + at + 8 * v);
        }
        for (int r = 0; r < R; r++) {
            double wv = W[r * ldw + k];
            for (int v = 0; v < V; v++) acc[r][v] += wv * gv[v];
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) STORE8(C + r * ldc + i + 8 * v, acc[r][v]);
}

/* kend (or NULL): row r of W is zero from column kend[r] on, so a block of rows stops at the
 * largest kend of its rows (exact: the skipped terms are 0 * G with G finite, which the caller
 * guarantees before passing kend). md (or NULL): also the running maximum of section 4.2's d1,
 * md_i = max over the stretch's p of |x_i - x_p|^2 = gd_i + gd_p - 2 G_pi, done on the 16
 * columns just read, while the G rows are in L1 (a separate pass read them from memory). */
static inline __attribute__((always_inline)) void
c_update_any(double *C, size_t ldc, size_t rows, const double *W, size_t ldw, const void *Gv,
             size_t ldg, const uint32_t *order, size_t k0, size_t k1, size_t n, size_t n16,
             const uint32_t *kend, double *md, const double *gd, const int gf) {
    const double *G = gf ? NULL : (const double *)Gv; /* md and the leftover columns: double G */
    const float *Gf = gf ? (const float *)Gv : NULL;
    /* row blocks outside: the first block streams each G row of the stretch from memory (the
     * prefetcher follows a few long streams, not 64 short ones), the others find it in L2 */
    for (size_t r0 = 0; r0 < rows; r0 += CK_ROWS) {
        double *Cr = C + r0 * ldc;
        const double *Wr = W + r0 * ldw;
        size_t R = rows - r0 < CK_ROWS ? rows - r0 : CK_ROWS;
        size_t kb = k1;
        if (kend) {
            kb = k0;
            for (size_t r = r0; r < r0 + R; r++) {
                size_t e = kend[r] < k1 ? kend[r] : k1;
                kb = e > kb ? e : kb;
            }
        }
        int do_md = md && r0 == 0;
        if (kb == k0 && !do_md) continue;
        /* R < 4: 64 (R <= 2) or 32 columns per block where they fit, then 16 */
        size_t wide = R <= 2 ? 64 : R == 3 ? 32 : 16, iw = n16 / wide * wide;
        for (size_t i = 0; i < n16; i += 16) {
            if (kb > k0 && i < iw && i % wide == 0) switch (R) {
            case 3: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 3, 4, gf); break;
            case 2: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 2, 8, gf); break;
            case 1: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 1, 8, gf); break;
            default: break;
            }
            if (kb > k0 && (i >= iw || wide == 16)) switch (R) {
            case 6: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 6, 2, gf); break;
            case 5: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 5, 2, gf); break;
            case 4: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 4, 2, gf); break;
            case 3: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 3, 2, gf); break;
            case 2: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 2, 2, gf); break;
            default: c_block(Cr, ldc, Wr, ldw, Gv, ldg, order, k0, kb, i, 1, 2, gf); break;
            }
            if (do_md) { /* on the 16 columns just read (L1); max as a bit select */
                v8d m0, m1, g0, g1;
                LOAD8(m0, md + i);
                LOAD8(m1, md + i + 8);
                LOAD8(g0, gd + i);
                LOAD8(g1, gd + i + 8);
                for (size_t k = k0; k < k1; k++) {
                    uint32_t p = order[k];
                    const double *Gp = G + (size_t)p * ldg + i;
                    double gpp = gd[p];
                    v8d x0, x1;
                    LOAD8(x0, Gp);
                    LOAD8(x1, Gp + 8);
                    v8d d0 = g0 + gpp - 2 * x0, d1 = g1 + gpp - 2 * x1;
                    v8i k0m = d0 > m0, k1m = d1 > m1; /* false for NaN: m stays */
                    m0 = (v8d)(((v8i)d0 & k0m) | ((v8i)m0 & ~k0m));
                    m1 = (v8d)(((v8i)d1 & k1m) | ((v8i)m1 & ~k1m));
                }
                STORE8(md + i, m0);
                STORE8(md + i + 8, m1);
            }
        }
    }
    /* leftover columns */
    for (size_t r = 0; r < rows; r++) {
        size_t kb = kend && kend[r] < k1 ? kend[r] : k1;
        for (size_t i = n16; i < n; i++) {
            double c = C[r * ldc + i];
            for (size_t k = k0; k < kb; k++) {
                size_t at = (size_t)order[k] * ldg + i;
                c += W[r * ldw + k] * (gf ? (double)Gf[at] : G[at]);
            }
            C[r * ldc + i] = c;
        }
    }
    if (md)
        for (size_t k = k0; k < k1; k++) {
            uint32_t p = order[k];
            const double *Gp = G + (size_t)p * ldg;
            double gpp = gd[p];
            for (size_t i = n16; i < n; i++) {
                double dd = gd[i] + gpp - 2 * Gp[i];
                md[i] = dd > md[i] ? dd : md[i];
            }
        }
}
/* G in double (the Gram matrix: c, c^y and d1) or in float (the token vectors as captured:
 * dist_expect's S and e, where reading floats halves the bytes that come from L2 per row) */
static void c_update(double *C, size_t ldc, size_t rows, const double *W, size_t ldw,
                     const double *G, size_t ldg, const uint32_t *order, size_t k0, size_t k1,
                     size_t n, size_t n16, const uint32_t *kend, double *md, const double *gd) {
    c_update_any(C, ldc, rows, W, ldw, G, ldg, order, k0, k1, n, n16, kend, md, gd, 0);
}
static void c_update_f(double *C, size_t ldc, size_t rows, const double *W, size_t ldw,
                       const float *G, size_t ldg, const uint32_t *order, size_t k0, size_t k1,
                       size_t n, size_t n16) {
    c_update_any(C, ldc, rows, W, ldw, G, ldg, order, k0, k1, n, n16, NULL, NULL, NULL, 1);
}

/* ---------------- sections 4 and 6 per row: the phases of row_per_n ---------------- */

/* What the O(n) pass of one (grid N, T) reads: per entry j, its weight a_j, |x_j|^2, c_j,
 * e_j, |y_j|^2, 1/|x_j|, |x_j| c^y_j and the selection masks; per row, |s|^2, |S|^2 and
 * dist_expect's factors alpha = 1 + beta, beta = N / (n - 1); for the fallbacks, X, S, the
 * selected set order[0..N) and a scratch vector for s. */
typedef struct {
    const double *a, *x_sq, *c, *e, *y_sq, *x_inv, *cy, *is_unsel, *sel_inf;
    double s_sq, S_sq, alpha, beta;
    const double *X, *S, *x_norm;
    const uint32_t *order;
    size_t dim, N;
    double *s_vec;
} unsel_in;


/* s = sum_{i in I_N} a_i x_i (norm = NULL) or s^y = sum a_i y_i (norm = x_norm), formed
 * explicitly into s [dim]. */
MET_NO_CONTRACT static void form_s(double *s, const unsel_in *in, const double *norm) {
    MET_NO_CONTRACT_BODY
    memset(s, 0, in->dim * sizeof *s);
    for (size_t q = 0; q < in->N; q++) {
        uint32_t i = in->order[q];
        double ai = in->a[i];
        const double *xi = in->X + (size_t)i * in->dim;
        for (size_t k = 0; k < in->dim; k++) s[k] += ai * (norm ? y_of(xi, k, norm[i]) : xi[k]);
    }
}


/* |alpha x - beta s|^2 for two vectors of dim entries, as an explicit difference */
MET_NO_CONTRACT static double sq_diff(const double *x, double alpha, const double *s, double beta,
                                      size_t dim) {
    MET_NO_CONTRACT_BODY
    double t = 0;
    for (size_t k = 0; k < dim; k++) {
        double d = alpha * x[k] - beta * s[k];
        t += d * d;
    }
    return t;
}

/* docs/metrics.md sections 4 and 6, the O(n) part of one grid N at one T: over unselected j,
 * the sum of |a_j x_j - s| (dist_true) and the minimum of g_j = D_j^2 - |s^y|^2 =
 * a_j^2 |y_j|^2 - 2 a_j (s^y . y_j) (section 6's exact rewrite: no |s^y|^2 to cancel against,
 * so the order of the g_j is right even for weights 1e-30 of the dominant one); over every j,
 * the dist_expect sum of |a_j x_j - beta (S - a_j x_j)| = |alpha a_j x_j - beta S|.
 * Entries: j = 0..n-1 when idx is NULL (dense), else the nidx listed entries idx [nidx], the
 * n - nidx others having a_j = 0 and finite vectors, so that each has the same terms
 * (|a_j x_j - s| = |s|, the dist_expect term beta |S|, g_j = 0), added once times their
 * count (zero_sel of them are selected). Entries whose expansion cancels (MET_CANCEL) are
 * left out of the lanes and done again directly after them. Eight independent lanes keep the
 * sums vectorizable without reassociation flags (the lane order is fixed, so results do not
 * depend on the CPU). Inlined twice: the dense copy has no index loads. */
static inline __attribute__((always_inline)) void
unselected_terms(double *t_true, double *t_exp, double *g_min_out, const unsel_in *in, size_t n,
                 const uint32_t *idx, size_t nidx, size_t zero_sel, const int ex_on) {
    const double *a = in->a, *x_sq = in->x_sq, *c = in->c, *e = in->e, *y_sq = in->y_sq,
                 *x_inv = in->x_inv, *cy = in->cy, *is_unsel = in->is_unsel,
                 *sel_inf = in->sel_inf;
    const double s_sq = in->s_sq, alpha = in->alpha, beta = in->beta;
    double at[LANES] = {0}, ae[LANES] = {0}, rm[LANES], gl[LANES];
    for (int q = 0; q < LANES; q++) rm[q] = INFINITY, gl[q] = INFINITY;
    double a2 = alpha * alpha, ab2 = 2 * alpha * beta, b2S2 = beta * beta * in->S_sq;
    size_t m = idx ? nidx : n, i = 0;
    /* gl: the minimum of each square's value minus MET_CANCEL times its magnitude; a
     * negative one sends the pass to the explicit differences (the selected entries' own
     * dist_true terms do not count: + sel_inf) */
#define MET_UNSEL_TERM(lane, j)                                                     \
    do {                                                                            \
        double aj = a[j], pj = aj * aj * x_sq[j];                                   \
        double dt = pj - 2 * aj * c[j] + s_sq;                                      \
        at[lane] += is_unsel[j] * sqrt(dt > 0 ? dt : 0);                            \
        double gt = dt - MET_CANCEL * (pj + s_sq) + sel_inf[j];                     \
        if (ex_on) { /* dist_expect (metrics.dist_expect = false: not even read) */ \
            double ex = a2 * pj - ab2 * aj * e[j] + b2S2;                           \
            ae[lane] += sqrt(ex > 0 ? ex : 0);                                      \
            double ge = ex - MET_CANCEL * (a2 * pj + b2S2);                         \
            gt = gt < ge ? gt : ge;                                                 \
        }                                                                           \
        gl[lane] = gt < gl[lane] ? gt : gl[lane];                                   \
        double g = aj * aj * y_sq[j] - 2 * aj * x_inv[j] * cy[j] + sel_inf[j];      \
        rm[lane] = g < rm[lane] ? g : rm[lane];                                     \
    } while (0)
    for (; i + LANES <= m; i += LANES)
        for (int q = 0; q < LANES; q++) {
            size_t j = idx ? idx[i + q] : i + q;
            MET_UNSEL_TERM(q, j);
        }
    for (; i < m; i++) {
        size_t j = idx ? idx[i] : i;
        MET_UNSEL_TERM(0, j);
    }
#undef MET_UNSEL_TERM
    double st = 0, se = 0, g_min = INFINITY, guard = INFINITY;
    for (int q = 0; q < LANES; q++) {
        st += at[q];
        se += ae[q];
        g_min = rm[q] < g_min ? rm[q] : g_min;
        guard = gl[q] < guard ? gl[q] : guard;
    }
    if (guard < 0) { /* some square cancelled: the sums again, those entries explicitly */
        form_s(in->s_vec, in, NULL);
        st = se = 0;
        for (size_t q = 0; q < m; q++) {
            size_t j = idx ? idx[q] : q;
            double aj = a[j], pj = aj * aj * x_sq[j];
            const double *xj = in->X + j * in->dim;
            if (ex_on) {
                double ex = a2 * pj - ab2 * aj * e[j] + b2S2;
                if (ex < MET_CANCEL * (a2 * pj + b2S2))
                    ex = sq_diff(xj, alpha * aj, in->S, beta, in->dim);
                se += sqrt(ex > 0 ? ex : 0);
            }
            if (!(is_unsel[j] > 0)) continue;
            double dt = pj - 2 * aj * c[j] + s_sq;
            if (dt < MET_CANCEL * (pj + s_sq)) dt = sq_diff(xj, aj, in->s_vec, 1.0, in->dim);
            st += is_unsel[j] * sqrt(dt > 0 ? dt : 0);
        }
    }
    if (idx) {
        size_t z = n - nidx, zu = z - zero_sel; /* zero-weight entries, of them unselected */
        st += (double)zu * sqrt(s_sq > 0 ? s_sq : 0);
        se += (double)z * sqrt(b2S2 > 0 ? b2S2 : 0);
        if (zu > 0 && 0 < g_min) g_min = 0;
    }
    *t_true = st, *t_exp = se, *g_min_out = g_min;
}

/* docs/metrics.md section 6's radius r = min_{j not in I_N} |s^y - a_j y_j| from g_min =
 * r^2 - |s^y|^2; where that sum cancels (an unselected a_j y_j within ~1e-3 of s^y), the
 * minimum again over explicit differences, whose value *r2_fb then holds (else -1). */
static double radius(double *r2_fb, double g_min, double sy_sq, const unsel_in *in, size_t n) {
    double r2 = g_min + sy_sq;
    *r2_fb = -1;
    if (!(r2 < MET_CANCEL * sy_sq)) return sqrt(r2 > 0 ? r2 : 0);
    form_s(in->s_vec, in, in->x_norm);
    double best = INFINITY;
    for (size_t j = 0; j < n; j++) {
        if (!(in->is_unsel[j] > 0)) continue;
        double d = sq_diff_y(in->X + j * in->dim, in->x_norm[j], in->a[j], in->s_vec, in->dim);
        best = d < best ? d : best;
    }
    *r2_fb = best;
    return sqrt(best);
}

/* Section 6.2 where the radius took its explicit fallback (r^2 = r2 below MET_CANCEL
 * |s^y|^2): g = D^2 - |s^y|^2 then carries a rounding of ~1e-16 a_i |s^y| against margins of
 * size r^2, so N_s counts D_i^2 < r2 with each D_i^2 = |s^y - a_i y_i|^2 an explicit
 * difference, as r2's own terms are (twins: equal bits, so the strict < keeps them out).
 * O(N d), only on such rows. */
static size_t direct_count(const unsel_in *in, double r2) {
    form_s(in->s_vec, in, in->x_norm);
    size_t Ns = 0;
    for (size_t q = 0; q < in->N; q++) {
        uint32_t i = in->order[q];
        double D2 = sq_diff_y(in->X + (size_t)i * in->dim, in->x_norm[i], in->a[i], in->s_vec,
                              in->dim);
        Ns += D2 < r2;
    }
    return Ns;
}

/* Which T are sparse: with finite vectors, a T with at most n/4 nonzero weights lists them
 * once (nz_idx_T, in index order); S, e and the O(n) pass then visit only them. Skipping
 * 0 * (finite) terms leaves S, e, c bit-identical. */
static void list_nonzero_weights(met_ws *w, size_t n, size_t K) {
    const size_t L = w->L, n_T = w->n_W;
    const double *nt = w->not_topK;
    for (size_t iT = 0; iT < n_T; iT++) {
        const double *a = w->a_T + iT * L;
        /* the same pass sums section 4.2's unselected mass outside the top K, U_K */
        double cl[LANES] = {0}, ul[LANES] = {0};
        size_t j = 0;
        for (; j + LANES <= n; j += LANES)
            for (int q = 0; q < LANES; q++) {
                cl[q] += a[j + q] != 0 ? 1.0 : 0.0;
                ul[q] += a[j + q] * nt[j + q];
            }
        for (; j < n; j++) {
            cl[0] += a[j] != 0 ? 1.0 : 0.0;
            ul[0] += a[j] * nt[j];
        }
        double c = 0, uk = 0;
        for (int q = 0; q < LANES; q++) c += cl[q], uk += ul[q];
        w->U_T[iT * w->U_ld + K] = uk;
        size_t nz = w->finite ? (size_t)c : 0;
        w->sparse_T[iT] = w->finite && 4 * nz <= n;
        if (!w->sparse_T[iT]) continue;
        uint32_t *idx = w->nz_idx_T + iT * L;
        size_t m = 0;
        for (size_t j = 0; j < n; j++) {
            idx[m] = (uint32_t)j;
            m += a[j] != 0;
        }
        w->nnz_T[iT] = (uint32_t)m;
    }
}

/* docs/metrics.md section 4.3, dist_expect's pieces for every T: S = sum_j a_j x_j (only
 * j < nv weigh), e_j = x_j . S, |S|^2. Dense runs of T use the c-update kernel (S = A X over
 * the rows of X, e = S X^T over the rows of XT [dim][L], both read as the captured floats
 * (X = (double) Xf exactly: the same products); both shapes are short-and-wide,
 * where dgemm's packing does not pay); sparse T the same sums in the same order over their
 * nonzero weights. n_T rows of weights: the grid's T, or those of every row of a block
 * (met_process_rows: its slots are back to back, so the rows of all of them are one matrix). */
static void expect_sums(met_ws *w, size_t n_T, size_t n, size_t nv, size_t n16) {
    const size_t L = w->L, dim = w->dim;
    for (size_t iT = 0; iT < n_T; iT++) {
        if (!w->sparse_T[iT]) continue;
        const double *a = w->a_T + iT * L;
        const uint32_t *idx = w->nz_idx_T + iT * L;
        size_t m = w->nnz_T[iT];
        double *S = w->S_T + iT * dim, *E = w->e_T + iT * L;
        memset(S, 0, dim * sizeof *S);
        for (size_t q = 0; q < m; q++) {
            const double *xj = w->X + (size_t)idx[q] * dim;
            double aj = a[idx[q]];
            for (size_t k = 0; k < dim; k++) S[k] += aj * xj[k];
        }
        for (size_t q = 0; q < m; q++) {
            const double *xj = w->X + (size_t)idx[q] * dim;
            double ej = 0;
            for (size_t k = 0; k < dim; k++) ej += S[k] * xj[k];
            E[idx[q]] = ej;
        }
    }
    for (size_t r0 = 0; r0 < n_T;) { /* dense runs of T */
        if (w->sparse_T[r0]) {
            r0++;
            continue;
        }
        size_t r1 = r0;
        while (r1 < n_T && !w->sparse_T[r1]) r1++;
        memset(w->S_T + r0 * dim, 0, (r1 - r0) * dim * sizeof *w->S_T);
        c_update_f(w->S_T + r0 * dim, dim, r1 - r0, w->a_T + r0 * L, L, w->Xf, dim, w->iota, 0,
                   nv, dim, dim / 16 * 16);
        for (size_t r = r0; r < r1; r++) memset(w->e_T + r * L, 0, n16 * sizeof *w->e_T);
        c_update_f(w->e_T + r0 * L, L, r1 - r0, w->S_T + r0 * dim, dim, w->XTf, L, w->iota, 0,
                   dim, n, n16 / 16 * 16);
        r0 = r1;
    }
    for (size_t iT = 0; iT < n_T; iT++) {
        double S2 = 0;
        const double *S = w->S_T + iT * dim;
        for (size_t k = 0; k < dim; k++) S2 += S[k] * S[k];
        w->S_sq_T[iT] = S2;
    }
}

/* The weights of the selection walk in sorted order (sections 4 and 6): row 2T of sel_w holds
 * a_{order[k]}, row 2T+1 a_{order[k]} / |x_{order[k]}| (the weights of s^y), interleaved so
 * that a 6-row block of c_update holds 3 neighbouring T, which have similar sparsity.
 * sel_w_end[r]: row r is 0 from there on (weights fall along the logit order, so at small T
 * most of the K columns are exact zeros). */
static void selection_weights(met_ws *w, size_t K) {
    const size_t L = w->L, n_T = w->n_W;
    const uint32_t *order = w->order;
    for (size_t iT = 0; iT < n_T; iT++) {
        const double *a = w->a_T + iT * L;
        double *wc = w->sel_w + 2 * iT * K, *wy = wc + K;
        uint32_t last = 0;
        for (size_t k = 0; k < K; k++) {
            uint32_t p = order[k];
            double apk = a[p];
            wc[k] = apk;
            wy[k] = apk * w->x_inv[p];
            last = apk != 0 ? (uint32_t)(k + 1) : last; /* NaN counts as nonzero */
        }
        w->sel_w_end[2 * iT] = w->sel_w_end[2 * iT + 1] = last;
        /* section 4's unselected mass, summed from the tail: U_K over the entries outside
         * the top K, then U_k = U_{k+1} + a_{order[k]} */
        double *U = w->U_T + iT * w->U_ld;
        /* U[K]: list_nonzero_weights */
        for (size_t k = K; k-- > 0;) U[k] = U[k + 1] + wc[k];
    }
}

/* I_N empty: c = c^y = 0, every entry unselected, A = Q = 0, and (when d1 is computed, on
 * the first normalizer) the running max of d1 at 0. */
static void start_walk(met_ws *w, size_t n, size_t n16, double *d1_sq_run) {
    const size_t L = w->L, n_T = w->n_W;
    for (size_t r = 0; r < 2 * n_T; r++) memset(w->c_T + r * L, 0, n16 * sizeof *w->c_T);
    for (size_t iT = 0; iT < n_T; iT++) w->A_T[iT] = 0, w->Q_T[iT] = 0, w->zero_sel_T[iT] = 0;
    if (d1_sq_run) {
        for (size_t i = 0; i < n16; i++) {
            w->rank[i] = UINT32_MAX;
            d1_sq_run[i] = 0;
        }
        w->x_sq_max = w->x_sq_pmax[n - 1]; /* max_{i < n} |x_i|^2, no O(n) chain per row */
    }
    for (size_t i = 0; i < n; i++) {
        w->is_unsel[i] = 1.0;
        w->sel_inf[i] = 0.0;
    }
}

/* I_N grows from order[0..k0) to order[0..N): c and |x| c^y of every T gain the G rows of the
 * stretch (one c_update for all T), the masks move, and (d1_sq_run non-NULL) docs/metrics.md
 * section 4.2's d1 = max_{i not in I_N, j in I_N} |x_i - x_j| and m = max_{j in I_N} |x_j| are
 * taken into d1_N[u], m_N[u]; *m is the running m. */
static void grow_selection(met_ws *w, size_t k0, size_t N, size_t n, size_t n16, size_t K,
                           double *d1_sq_run, double *m, size_t u) {
    const size_t L = w->L, n_T = w->n_W;
    const uint32_t *order = w->order;
    const uint32_t *end = w->finite ? w->sel_w_end : NULL; /* 0 * inf would be NaN */
    c_update(w->c_T, L, 2 * n_T, w->sel_w, K, w->G, L, order, k0, N, n, n16 / 16 * 16, end,
             d1_sq_run, w->x_sq);
    for (size_t q = k0; q < N; q++) {
        w->is_unsel[order[q]] = 0.0;
        w->sel_inf[order[q]] = INFINITY;
    }
    if (!d1_sq_run) return;
    for (size_t q = k0; q < N; q++) {
        uint32_t p = order[q];
        w->rank[p] = (uint32_t)q;
        if (w->x_norm[p] > *m) *m = w->x_norm[p];
    }
    double dl[LANES] = {0};
    const uint32_t *rank = w->rank;
    size_t k = N - 1, i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int q = 0; q < LANES; q++) {
            double v = rank[i + q] > k ? d1_sq_run[i + q] : 0.0;
            dl[q] = v > dl[q] ? v : dl[q];
        }
    for (; i < n; i++) {
        double v = rank[i] > k ? d1_sq_run[i] : 0.0;
        dl[0] = v > dl[0] ? v : dl[0];
    }
    double d1sq = 0;
    for (int q = 0; q < LANES; q++) d1sq = dl[q] > d1sq ? dl[q] : d1sq;
    if (d1sq < MET_CANCEL * 2 * w->x_sq_max) { /* every pair nearly equal: cancelled */
        d1sq = 0;
        for (size_t j = 0; j < n; j++) {
            if (rank[j] <= k) continue;
            for (size_t q = 0; q < N; q++) {
                double dd = sq_diff(w->X + j * w->dim, 1.0, w->X + (size_t)order[q] * w->dim,
                                    1.0, w->dim);
                d1sq = dd > d1sq ? dd : d1sq;
            }
        }
    }
    w->d1_N[u] = sqrt(d1sq);
    w->m_N[u] = *m;
}

/* docs/metrics.md sections 4 and 6: A = sum_{i in I_N} a_i and Q = sum_{i in I_N} a_i^2 of
 * one T, grown by the stretch order[k0..N). */
static void selected_mass(met_ws *w, size_t iT, size_t k0, size_t N) {
    const double *a = w->a_T + iT * w->L;
    double A = w->A_T[iT], Q = w->Q_T[iT];
    size_t zsel = w->zero_sel_T[iT];
    for (size_t q = k0; q < N; q++) {
        double ap = a[w->order[q]];
        A += ap;
        Q += ap * ap;
        zsel += ap == 0;
    }
    w->A_T[iT] = A, w->Q_T[iT] = Q, w->zero_sel_T[iT] = zsel;
}

/* The selected entries' c and c^y = c^y_j scaled by 1/|x_j| of one T gathered into
 * sel_gather rows 1 and 2 (row 0 holds 1/|x| and row 3 |y|^2 in the sorted order, filled once
 * per row: gather_rows; the weights in order are sel_w's row 2T); returns |s|^2 =
 * sum_{j in I_N} a_j c_j (section 4) and sets *sy_sq = |s^y|^2 = sum_{j in I_N} a_j c^y_j
 * (section 6). */
static double gather_selected(met_ws *w, size_t iT, size_t N, size_t K, double *sy_sq) {
    const double *sa = w->sel_w + 2 * iT * K, *c = w->c_T + 2 * iT * w->L, *cy = c + w->L;
    const double *xi = w->sel_gather;
    double *sc = w->sel_gather + K, *scy = sc + K, *sraw = sc + 3 * K;
    for (size_t q = 0; q < N; q++) {
        uint32_t j = w->order[q];
        sc[q] = c[j], scy[q] = xi[q] * cy[j];
        sraw[q] = cy[j]; /* separability's g from the unselected side's expression */
    }
    *sy_sq = lane_dot(sa, scy, N);
    return lane_dot(sa, sc, N);
}

/* the T-independent rows of sel_gather: 1/|x| and |y|^2 of order[0 .. K) */
static void gather_rows(met_ws *w, size_t K) {
    double *xi = w->sel_gather, *syy = xi + 3 * K;
    for (size_t q = 0; q < K; q++) {
        uint32_t j = w->order[q];
        xi[q] = w->x_inv[j], syy[q] = w->y_sq[j];
    }
}

/* docs/metrics.md section 6.1: xi [N] of the selected weights sa [N]. A and Q are their sum
 * and sum of squares as the walk accumulated them; B = A - a_i and Q_i = Q - a_i^2 cancel
 * where a_i holds most of A (the dominant key: its B of 1e-7 A came out 2e-9 off, of 1e-12 A
 * 1e-4 off), so for the one selected key above A / 2 they are the sums over the others
 * (positive terms, no cancellation); elsewhere A - a_i loses at most 2 ulp of A / B <= 2. */
void met_sep_xi(double *xi, const double *sa, size_t N, double A, double Q, double delta) {
    double d2h = 0.5 * delta * delta, Bs = 0, Qs = 0;
    size_t qs = N;
    for (size_t q = 0; q < N && qs == N; q++)
        if (sa[q] > 0.5 * A) qs = q;
    for (size_t q = 0; q < N && qs < N; q++)
        if (q != qs) Bs += sa[q], Qs += sa[q] * sa[q];
    for (size_t q = 0; q < N; q++) {
        double ai = sa[q], B = q == qs ? Bs : A - ai, Qi = q == qs ? Qs : Q - ai * ai;
        double xi2 = B * B - d2h * (B * B - Qi);
        xi[q] = sqrt(xi2 > 0 ? xi2 : 0);
    }
}

/* docs/metrics.md section 6 over the selected set of one T: N_s = #{i in I_N : D_i < r}
 * (returned), decided as g_i < g_min with g = D^2 - |s^y|^2 = a_i^2 |y_i|^2 - 2 a_i c^y_i
 * (the exact rewrite), *marginal = #{i : |g_i - g_min| <= MET_MARGINAL |s^y|^2}, and the
 * reconstructed bounds' sums, *xi_sum = sum_i xi_i (met_sep_xi) and *upper_sum =
 * sum_i exp(-(max(0, xi_i - r))^2 / 2). Lanes keep it vectorizable; the exponents (<= 0) go
 * to exp_nonpos. sel_gather's row 1 (|s|^2's gather, read by then) takes xi. */
static size_t separability(double *xi_sum, double *upper_sum, size_t *marginal, const double *sa,
                           double *sel_gather, size_t K, size_t N, double A, double Q,
                           double sy_sq, double g_min, double r, double delta) {
    const double *sxi = sel_gather, *syy = sel_gather + 3 * K;
    double *sarg = sel_gather + 4 * K, *xiv = sel_gather + K;
    double nsl[LANES] = {0}, nml[LANES] = {0}, xil[LANES] = {0};
    double tie = MET_MARGINAL * sy_sq;
    met_sep_xi(xiv, sa, N, A, Q, delta);
#define MET_SEP_TERM(lane, q)                                                       \
    do {                                                                            \
        double ai = sa[q];                                                          \
        double g = ai * ai * syy[q] - 2 * ai * sxi[q] * sarg[q];                    \
        nsl[lane] += g < g_min ? 1.0 : 0.0;                                         \
        nml[lane] += fabs(g - g_min) <= tie ? 1.0 : 0.0;                            \
        double xi = xiv[q];                                                         \
        xil[lane] += xi;                                                            \
        double ex = xi - r;                                                         \
        sarg[q] = ex > 0 ? -0.5 * ex * ex : 0.0;                                    \
    } while (0)
    size_t q = 0;
    for (; q + LANES <= N; q += LANES)
        for (int l = 0; l < LANES; l++) MET_SEP_TERM(l, q + l);
    for (; q < N; q++) MET_SEP_TERM(0, q);
#undef MET_SEP_TERM
    exp_nonpos(sarg, sarg, N);
    double up = lane_sum(sarg, N), xisum = 0, nsum = 0, msum = 0;
    for (int l = 0; l < LANES; l++) xisum += xil[l], nsum += nsl[l], msum += nml[l];
    *xi_sum = xisum, *upper_sum = up, *marginal = (size_t)msum;
    return (size_t)nsum;
}

/* |sum_{j not in I_N} a_j x_j - s|^2 with both parts formed explicitly (the aggregate
 * dist_true where the expansion cancels): S - 2 s would subtract two nearly equal vectors
 * again, and S's own rounding (~1e-16 |S|) then dominates a difference of that size. */
MET_NO_CONTRACT static double unsel_minus_s_sq(const unsel_in *in, size_t n) {
    MET_NO_CONTRACT_BODY
    double *s = in->s_vec, t = 0;
    form_s(s, in, NULL);
    for (size_t k = 0; k < in->dim; k++) {
        double o = 0;
        for (size_t j = 0; j < n; j++)
            if (in->is_unsel[j] > 0 && in->a[j] != 0) o += in->a[j] * in->X[j * in->dim + k];
        double dk = o - s[k];
        t += dk * dk;
    }
    return t;
}

/* ---- section 6.2: D_i < r where weights underflow (the log domain) ----
 * A weight below DBL_MIN (0 once e^(z_j - z_max) < 4.9e-324, i.e. any logit gap above
 * ~745 T) has lost its digits, and g = D^2 - |s^y|^2 = a (a |y|^2 - 2 p) (p = s^y . y) with
 * it: every such token gave g = 0 and lost the strict < to every other. Its true weight is
 * e^lam with lam = z_j - z_max - ln Z = f (l_j - l_max) + ln a_top (a_top = 1 / Z, the
 * largest logit's weight, >= 1/n: exact to a rounding); then g = -sign(p) e^(lam + ln 2|p|)
 * (the a^2 |y|^2 term is below 1e-308 |y|^2 next to 2 |p| a; p = 0 gives e^(2 lam) |y|^2).
 * g is held as a sign and the logarithm of its magnitude where a weight is tiny, and as the
 * double itself otherwise, so that N_s follows the definition at every T. */
typedef struct {
    int s;    /* -1, 0, +1: the sign of g */
    double m; /* ln |g| (when log-held) */
    double g; /* g itself (when exact) */
    int lg;   /* 1: log-held */
} g_val;

static g_val g_exact(double g) { return (g_val){(g > 0) - (g < 0), 0, g, 0}; }
/* g = e^lam v, v = a |y|^2 - 2 p (a = e^lam in double, 0 where it underflowed: then
 * v = -2 p, the a |y|^2 term being below 1e-308 next to it); v = 0 with p = 0: e^(2 lam) |y|^2 */
static g_val g_log(double lam, double v, double p, double ysq) {
    if (v != 0) return (g_val){v > 0 ? 1 : -1, lam + log(fabs(v)), 0, 1};
    if (p == 0 && ysq > 0 && lam > -INFINITY) return (g_val){1, 2 * lam + log(ysq), 0, 1};
    return (g_val){0, -INFINITY, 0, 1};
}
/* g (or its factors) of this size or the weight below MET_G_SAFE_W lose digits to underflow */
#define MET_G_SAFE 0x1p-960
#define MET_G_SAFE_W 0x1p-900
/* A < B */
static int g_less(g_val A, g_val B) {
    if (!A.lg && !B.lg) return A.g < B.g;
    if (A.s != B.s) return A.s < B.s;
    if (A.s == 0) return 0;
    double mA = A.lg ? A.m : log(fabs(A.g)), mB = B.lg ? B.m : log(fabs(B.g));
    return A.s > 0 ? mA < mB : mA > mB;
}

/* The count when s^y itself is made of weights below DBL_MIN (every selected key of
 * nonzero vector is tiny, e.g. a sink of zero vector): s^y = e^lref s~ with
 * s~ = sum_{I_N} e^(lam_i - lref) y_i (lref the largest such lam), formed explicitly, and
 * g_j = e^(lam_j + lref) v_j, v_j = e^(lam_j - lref) |y_j|^2 - 2 s~ . y_j: held as the sign
 * of v_j and lam_j + lref + ln |v_j| (lam = -inf: a masked key, g = 0). O((N + n) d), rare. */
MET_NO_CONTRACT static size_t tiny_sy_count(const met_ws *w, const unsel_in *in, size_t n,
                                            size_t nv, double f, double lmax, double lna) {
    MET_NO_CONTRACT_BODY
    const float *srow = w->scores + (nv - 1) * w->ld;
    const size_t dim = in->dim;
    double lref = -INFINITY, *st = in->s_vec;
#define MET_LAM(j) ((j) < nv ? ((double)srow[j] - lmax) * f + lna : -INFINITY)
    for (size_t q = 0; q < in->N; q++) {
        uint32_t i = in->order[q];
        double lam = MET_LAM(i);
        if (in->y_sq[i] > 0 && lam > lref) lref = lam;
    }
    memset(st, 0, dim * sizeof *st);
    const int s0 = lref == -INFINITY; /* s^y = 0 exactly: g_j = e^(2 lam_j) |y_j|^2 */
    for (size_t q = 0; q < in->N; q++) {
        uint32_t i = in->order[q];
        if (!(in->y_sq[i] > 0)) continue;
        double e = exp(MET_LAM(i) - lref);
        const double *xi = in->X + (size_t)i * dim;
        for (size_t k = 0; k < dim; k++) st[k] += e * y_of(xi, k, in->x_norm[i]);
    }
    g_val best = g_exact(INFINITY);
    int first = 1;
    for (int pass = 0; pass < 2; pass++) {
        size_t Ns = 0;
        for (size_t j = 0; j < n; j++) {
            int sel = !(in->is_unsel[j] > 0);
            if (sel != pass) continue;
            double lam = MET_LAM(j);
            g_val v = {0, -INFINITY, 0, 1};
            if (s0 && lam > -INFINITY && in->y_sq[j] > 0) {
                v = (g_val){1, 2 * lam + log(in->y_sq[j]), 0, 1};
            } else if (lam > -INFINITY && in->y_sq[j] > 0) {
                const double *xj = in->X + j * dim;
                double p = 0;
                for (size_t k = 0; k < dim; k++) p += st[k] * y_of(xj, k, in->x_norm[j]);
                double vj = exp(lam - lref) * in->y_sq[j] - 2 * p;
                if (vj != 0) v = (g_val){vj > 0 ? 1 : -1, lam + lref + log(fabs(vj)), 0, 1};
            }
            if (pass == 0 && (first || g_less(v, best))) best = v, first = 0;
            if (pass == 1) Ns += g_less(v, best);
        }
        if (pass == 1) return Ns;
    }
#undef MET_LAM
    return 0;
}

/* N_s of one (row, grid N, T) for softmax / ssmax (f the logit factor, nv the visible keys)
 * when some selected weight is below DBL_MIN. Unselected j: the minimum of g over them, with
 * the log form for the tiny weights; of those only the ones that can beat the tiny entry of
 * largest lam with p > 0 take a logarithm (lam_j + ln P < Lam + ln p_Lam, P the largest such
 * p, cannot). Selected i: g_i against that minimum. sa, scy, syy: the selected weights, their
 * p_i and |y_i|^2 in order (separability's inputs). */
static size_t tiny_weight_count(const met_ws *w, const unsel_in *in, size_t n, size_t nv,
                                double f, const double *sa, const double *scy,
                                const double *syy) {
    const float *srow = w->scores + (nv - 1) * w->ld;
    const double lmax = (double)srow[w->order[0]], lna = log(in->a[w->order[0]]);
    const double *a = in->a;
    double big_y = 0; /* the largest selected weight with y != 0 */
    for (size_t q = 0; q < in->N; q++)
        if (syy[q] > 0 && sa[q] > big_y) big_y = sa[q];
    if (!(big_y >= MET_G_SAFE_W)) return tiny_sy_count(w, in, n, nv, f, lmax, lna);
    g_val best = g_exact(INFINITY);
    double Lam = -INFINITY, vLam = 0, V = 0;
    int any_neg = 0, any_log = 0;
    for (size_t j = 0; j < n; j++) { /* the safe entries; the others' largest lam, v < 0 */
        if (!(in->is_unsel[j] > 0)) continue;
        double aj = a[j], p = in->x_inv[j] * in->cy[j], vj = aj * in->y_sq[j] - 2 * p;
        double g = aj * vj;
        if (j < nv && !(fabs(g) >= MET_G_SAFE) && !(g == 0 && vj == 0)) {
            any_log = 1;
            if (vj < 0) {
                double lam = ((double)srow[j] - lmax) * f + lna;
                any_neg = 1;
                if (lam > Lam) Lam = lam, vLam = -vj;
                V = -vj > V ? -vj : V;
            }
            continue;
        }
        g = aj * aj * in->y_sq[j] - 2 * aj * in->x_inv[j] * in->cy[j]; /* as the fast pass */
        if (g < best.g) best = g_exact(g);
    }
    if (any_log) {
        g_val tb = g_exact(INFINITY);
        int first = 1;
        double theta = any_neg ? Lam + log(vLam) - log(V) : -INFINITY;
        for (size_t j = 0; j < nv; j++) {
            if (!(in->is_unsel[j] > 0)) continue;
            double aj = a[j], p = in->x_inv[j] * in->cy[j], vj = aj * in->y_sq[j] - 2 * p;
            double g = aj * vj;
            if (fabs(g) >= MET_G_SAFE || (g == 0 && vj == 0)) continue;
            if (any_neg && !(vj < 0)) continue; /* a negative g exists: v >= 0 cannot be least */
            double lam = ((double)srow[j] - lmax) * f + lna;
            if (any_neg && lam < theta) continue;
            g_val v = g_log(lam, vj, p, in->y_sq[j]);
            if (first || g_less(v, tb)) tb = v, first = 0;
        }
        if (!first && g_less(tb, best)) best = tb;
    }
    size_t Ns = 0;
    for (size_t q = 0; q < in->N; q++) {
        uint32_t i = w->order[q];
        double ai = sa[q], vi = ai * syy[q] - 2 * scy[q], g = ai * vi;
        g_val v;
        if (i < nv && !(fabs(g) >= MET_G_SAFE) && !(g == 0 && vi == 0))
            v = g_log(((double)srow[i] - lmax) * f + lna, vi, scy[q], syy[q]);
        else
            v = g_exact(ai * ai * in->y_sq[i] - 2 * ai * in->x_inv[i] * in->cy[i]);
        Ns += g_less(v, best);
    }
    return Ns;
}

/* Section 4 in the aggregate reading (metrics.distance = "aggregate"): with S = sum_j a_j x_j
 * and s the selected part, the unselected sum minus s is S - 2 s, so
 *   dist_true   = |S - 2 s|, |S - 2s|^2 = |S|^2 - 4 S.s + 4 |s|^2, S.s = sum_{j in I_N} a_j e_j
 *                 (explicitly where that cancels, MET_CANCEL),
 *   dist_bound  = U d1 + |U - A| m (U the unselected mass: |sum_u a_i (x_i - s/A) + (U - A) s/A|),
 *   dist_expect = |E over uniform I_N of (S - 2 s)| = (|n - 2N| / n) |S| (P(j in I_N) = N/n).
 * sa holds the selected weights in order (sel_w's row of the T). */
static void aggregate_distance(double *val, const unsel_in *in, size_t n, const double *sa,
                               double U, double A, double d1, double m) {
    double Ss = 0, S_sq = in->S_sq, s_sq = in->s_sq;
    for (size_t q = 0; q < in->N; q++) /* a zero weight's e_j may be unset (sparse T) */
        Ss += sa[q] != 0 ? sa[q] * in->e[in->order[q]] : 0.0;
    double v2 = S_sq - 4 * Ss + 4 * s_sq;
    if (v2 < MET_CANCEL * (S_sq + 4 * s_sq)) /* S - 2 s would cancel too: the two parts */
        v2 = unsel_minus_s_sq(in, n);
    val[MET_DIST_TRUE] = sqrt(v2 > 0 ? v2 : 0);
    val[MET_DIST_BOUND] = U * d1 + fabs(U - A) * m;
    double k = (double)n - 2.0 * (double)in->N;
    val[MET_DIST_EXPECT] = fabs(k) / (double)n * sqrt(S_sq > 0 ? S_sq : 0);
}

/* Sections 4 and 6 of one row at one normalizer, every T and every grid N at once. The
 * weights of all T are in a_T [n_T][L]. As N walks up through the sorted order, c_T
 * accumulates c_j and |x_j| c^y_j of every T (grow_selection: one kernel call per stretch
 * between consecutive grid N, so each G row is read once per row instead of once per T); each
 * (grid N, T) then costs O(n) (unselected_terms) plus O(N) (separability). */
/* the 16-column end of a row of n entries (n itself where 16 columns past n leave the rows) */
static size_t row_n16(const met_ws *w, size_t n) {
    size_t n16 = (n + 15) / 16 * 16;
    return n16 > w->L ? n : n16; /* c_update then finishes the last columns one by one */
}

/* Before dist_expect's sums of a row: which T are sparse, and U_K (list_nonzero_weights). */
static void expect_prep(met_ws *w, size_t n, size_t K) {
    for (size_t j = 0; j < n; j++) w->not_topK[j] = 1.0;
    for (size_t k = 0; k < K; k++) w->not_topK[w->order[k]] = 0.0;
    list_nonzero_weights(w, n, K);
}

/* sums_done: S, e and |S|^2 of the row are in place already (met_process_rows) */
static void row_per_n(met_ws *w, size_t n, size_t nv, size_t K, double delta, size_t iZ,
                      int sums_done) {
    const met_axes *ax = w->ax;
    const size_t L = w->L, n_T = w->n_W; /* the walked T (metrics.per_N_T), by slot */
    const met_normalizer zn = ax->norm[iZ];
    size_t n16 = row_n16(w, n);
    const int ex_on = !(ax->skip & MET_SKIP_DIST_EXPECT);

    if (!sums_done) {
        expect_prep(w, n, K);
        if (w->do_expect) expect_sums(w, n_T, n, nv, n16);
    }
    selection_weights(w, K);
    gather_rows(w, K);
    /* d1, m: T- and normalizer-free for the logit order, taken by the row's first walk */
    double *d1_sq_run = !w->d1_valid ? w->d1_sq_run : NULL;
    w->d1_valid = 1;
    start_walk(w, n, n16, d1_sq_run);
    double m = 0;
    size_t k0 = 0;
    for (size_t u = 0; u < w->nU && w->uN[u] <= K; u++) {
        size_t N = w->uN[u];
        grow_selection(w, k0, N, n, n16, K, d1_sq_run, &m, u);
        double beta = (double)N / (double)(n - 1);
        for (size_t iT = 0; iT < n_T; iT++) {
            selected_mass(w, iT, k0, N);
            double A = w->A_T[iT], Q = w->Q_T[iT];
            double sy_sq, s_sq = gather_selected(w, iT, N, K, &sy_sq);
            const double *c = w->c_T + 2 * iT * L;
            unsel_in in = {.a = w->a_T + iT * L, .x_sq = w->x_sq, .c = c, .e = w->e_T + iT * L,
                           .y_sq = w->y_sq, .x_inv = w->x_inv, .cy = c + L,
                           .is_unsel = w->is_unsel, .sel_inf = w->sel_inf, .s_sq = s_sq,
                           .S_sq = w->S_sq_T[iT], .alpha = 1.0 + beta, .beta = beta, .X = w->X,
                           .x_norm = w->x_norm, .S = w->S_T + iT * w->dim, .order = w->order, .dim = w->dim, .N = N,
                           .s_vec = w->s_vec};
            double t_true, t_exp, g_min;
            if (w->sparse_T[iT] && ex_on)
                unselected_terms(&t_true, &t_exp, &g_min, &in, n, w->nz_idx_T + iT * L,
                                 w->nnz_T[iT], w->zero_sel_T[iT], 1);
            else if (ex_on)
                unselected_terms(&t_true, &t_exp, &g_min, &in, n, NULL, n, 0, 1);
            else if (w->sparse_T[iT])
                unselected_terms(&t_true, &t_exp, &g_min, &in, n, w->nz_idx_T + iT * L,
                                 w->nnz_T[iT], w->zero_sel_T[iT], 0);
            else
                unselected_terms(&t_true, &t_exp, &g_min, &in, n, NULL, n, 0, 0);
            double r2_fb, r = radius(&r2_fb, g_min, sy_sq, &in, n);
            double xisum, up, U = w->U_T[iT * w->U_ld + N];
            const double *sa = w->sel_w + 2 * iT * K;
            size_t Nm, Ns = separability(&xisum, &up, &Nm, sa, w->sel_gather, K, N, A, Q, sy_sq,
                                         g_min, r, delta);
            if (r2_fb >= 0) Ns = direct_count(&in, r2_fb); /* r^2 too small for g (6.2) */
            size_t qv = N; /* the last visible selected key has the least visible weight */
            while (qv > 0 && w->order[qv - 1] >= nv) qv--;
            /* g_i ~ 2 a_i (s^y . y_i) underflows (6.2): decide in the log domain */
            if ((zn == MET_SOFTMAX || zn == MET_SSMAX) && qv > 0 && sa[qv - 1] * sqrt(sy_sq) < 0x1p-950) {
                double f = 1.0 / ax->T[w->wT[iT]]; /* the logit factor, as row_weights forms it */
                if (zn == MET_SSMAX) f *= ssmax_factor(ax->ssmax_scale, n);
                Ns = tiny_weight_count(w, &in, n, nv, f, sa, w->sel_gather + 2 * K,
                                       w->sel_gather + 3 * K);
            }
            double val[NVAL];
            /* section 4 */
            if (ax->aggregate) {
                aggregate_distance(val, &in, n, sa, U, A, w->d1_N[u], w->m_N[u]);
            } else {
                val[MET_DIST_TRUE] = t_true;
                val[MET_DIST_BOUND] = U * w->d1_N[u] + ((double)(n - N) * A - U) * w->m_N[u];
                val[MET_DIST_EXPECT] = (double)(n - N) / (double)n * t_exp;
            }
            if (!ex_on) val[MET_DIST_EXPECT] = NAN;
            /* section 6 */
            val[MET_SEP_RATIO] = (double)Ns / (double)N;
            double lower = r > 0 ? 1.0 - xisum / ((double)N * r) : 0.0;
            val[MET_SEP_LOWER] = lower > 0 ? lower : 0.0;
            val[MET_SEP_UPPER] = up / (double)N;
            val[MET_SEP_MARGINAL] = (double)Nm / (double)N;
            /* section 9: scatter to every grid index holding this N */
            for (size_t g = w->uStart[u]; g < w->uStart[u + 1]; g++) {
                size_t iN = w->uIdx[g];
                for (int v = 0; v < NVAL; v++)
                    w->acc[met_at_per_n(ax, v, iN, w->wT[iT], iZ)] += val[v];
            }
        }
        k0 = N;
    }
}

/* The T-independent start of row t (n >= 2 entries): its logits, the top-K order, the row
 * counts and the grad_fd directions. Returns K. */
static size_t row_start(met_ws *w, size_t t, size_t n) {
    const met_axes *ax = w->ax;
    const size_t L = w->L;
    size_t nv = t + 1;
    const float *srow = w->scores + t * w->ld;
    for (size_t j = 0; j < nv; j++) w->l[j] = (double)srow[j];
    /* the next row's scores come from memory (a head's L x L floats outgrow the caches)
     * and are read as a row after the whole of this one's work: ask for them now */
    if (t + 1 < w->L)
        for (size_t j = 0; j < nv + 1; j += 16) __builtin_prefetch(srow + w->ld + j, 0, 1);

    /* T-independent: the top-K order (section 3) */
    size_t K = w->Kmax < n - 1 ? w->Kmax : n - 1;
    size_t Kv = K < nv ? K : nv;
    met_topk_order(w->order, w->scratch, w->l, nv, Kv);
    for (size_t k = Kv; k < K; k++) w->order[k] = (uint32_t)(nv + (k - Kv));
    /* d1 and m per grid N: in row_per_n, fused with the c update (same G rows) */
    for (size_t iN = 0; iN < ax->n_N; iN++)
        if ((size_t)ax->N[iN] < n) w->cntN[iN] += 1;
    w->cntT += 1;

    for (size_t iE = 0; iE < ax->n_eps; iE++) {
        double *uu = w->u + iE * L, lo = INFINITY, hi = -INFINITY;
        met_direction_ctr(uu, nv,
                          met_direction_key(ax->seed, ax->window, ax->layer, ax->head,
                                            (int64_t)t, (int64_t)iE),
                          w->dir_ctr);
        /* min and max in 8 lanes (a single chain of dependent min/max was latency-bound);
         * exact in any order (only the sign of a zero extremum could differ, and u has no
         * exact zeros in practice) */
        double lol[LANES], hil[LANES];
        for (int q = 0; q < LANES; q++) lol[q] = INFINITY, hil[q] = -INFINITY;
        size_t j = 0;
        for (; j + LANES <= nv; j += LANES)
            for (int q = 0; q < LANES; q++) {
                lol[q] = uu[j + q] < lol[q] ? uu[j + q] : lol[q];
                hil[q] = uu[j + q] > hil[q] ? uu[j + q] : hil[q];
            }
        for (; j < nv; j++) {
            lol[0] = uu[j] < lol[0] ? uu[j] : lol[0];
            hil[0] = uu[j] > hil[0] ? uu[j] : hil[0];
        }
        for (int q = 0; q < LANES; q++) {
            lo = lol[q] < lo ? lol[q] : lo;
            hi = hil[q] > hi ? hil[q] : hi;
        }
        w->u_range[2 * iE] = lo, w->u_range[2 * iE + 1] = hi;
    }

    return K;
}

/* sa_softmax's entropy (section 10.1) in the log domain: ln |a_j| = ln |z_j| + z_j - max z -
 * ln Z, so p_j = |a_j| / sum |a| is the softmax of y_j = ln |z_j| + (z_j - max z) and its
 * entropy comes from the identity of section 8. Where max l = 0 at small T every weight
 * underflows to 0 in double while the definition still has a distribution (the logits just
 * below 0 weigh most); the log domain keeps it. A zero logit (weight exactly 0) gets
 * y = -1e308 (weight 0, and 0 * y = 0 in the identity); all logits 0: entropy 0. */
static double sa_entropy(met_ws *w, size_t nv, double f) {
    double lmax = -INFINITY;
    int any = 0;
    for (size_t j = 0; j < nv; j++) lmax = w->l[j] > lmax ? w->l[j] : lmax;
    for (size_t j = 0; j < nv; j++) {
        double lj = w->l[j];
        any |= lj != 0;
        w->y_scr[j] = lj != 0 ? log(fabs(lj * f)) + (lj - lmax) * f : -1e308;
    }
    if (!any) return 0.0;
    double lnZ = met_softmax_scaled(w->ap, w->z, w->y_scr, 1.0, nv);
    double H = lnZ - lane_dot(w->ap, w->z, nv);
    return H > 0 ? H : 0;
}

/* softmax1's entropy (section 10.1): |a| / sum |a| is softmax(z) itself, so the softmax
 * identity of section 8 applies (ln p_j = z_j - max z - ln Z), on the shifted logits in z
 * (scratch; the weights' own z is not kept) */
static double softmax1_entropy(met_ws *w, size_t nv, double f) {
    double lnZ = met_softmax_scaled(w->ap, w->z, w->l, f, nv);
    double H = lnZ - lane_dot(w->ap, w->z, nv);
    return H > 0 ? H : 0;
}

/* Row t's weights a_T of every T at normalizer iZ, and the metrics that need only them:
 * entropy (section 8), grad_exact and grad_fd (section 7). */
static void row_weights(met_ws *w, size_t t, size_t n, size_t iZ) {
    const met_axes *ax = w->ax;
    const size_t L = w->L;
    size_t nv = t + 1;
    double lnn = log((double)n);
    {
        met_normalizer zn = ax->norm[iZ];
        for (size_t iT = 0; iT < ax->n_T; iT++) {
            double T = ax->T[iT];
            double *a = w->a_T + w->slotT[iT] * L;
            if (zn > MET_SSMAX) { /* section 10.1 */
                double a0 = met_weights_ext(a, w->z, w->l, nv, n, T, zn, ax);
                double He = zn == MET_SOFTMAX1 ? softmax1_entropy(w, nv, 1.0 / T)
                            : zn == MET_SA_SOFTMAX ? sa_entropy(w, nv, 1.0 / T) : met_entropy_abs(a, nv);
                double *acc = w->acc;
                acc[met_at_per_t(ax, MET_ENTROPY, iT, iZ)] += He;
                acc[met_at_per_t(ax, MET_ENTROPY_NORM, iT, iZ)] += He / lnn;
                if (met_has_grad_exact(zn) && w->do_grad_exact)
                    acc[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] +=
                        met_grad_exact_ext(a, w->l, nv, n, T, zn, ax, a0, w->z, w->ap);
                for (size_t iE = 0; iE < ax->n_eps; iE++)
                    acc[met_at_grad_fd(ax, iT, iE, iZ)] +=
                        met_change_norm_ext(a, w->order[0], w->l, w->u + iE * L, ax->eps[iE], nv,
                                            n, T, zn, ax, w->ap, w->z, w->y_scr) /
                        ax->eps[iE];
                continue;
            }
            /* logit factor of the normalizer (section 10) */
            double f = 1.0 / T;
            if (zn == MET_SSMAX) f *= ssmax_factor(ax->ssmax_scale, n);
            /* section 8: entropy; softmax/ssmax use ln a_j = z_j - zmax - lnZ */
            double H = 0;
            if (zn == MET_SPARSEMAX) {
                met_weights_with_z(a, w->z, NULL, w->l, nv, n, T, zn, ax->ssmax_scale);
                for (size_t j = 0; j < nv; j++)
                    if (a[j] > 0) H -= a[j] * log(a[j]);
            } else {
                double lnZ = met_softmax_scaled(a, w->z, w->l, f, nv);
                for (size_t j = nv; j < n; j++) a[j] = 0.0;
                H = lnZ - lane_dot(a, w->z, nv);
                if (H < 0) H = 0;
            }
            double *acc = w->acc;
            acc[met_at_per_t(ax, MET_ENTROPY, iT, iZ)] += H;
            acc[met_at_per_t(ax, MET_ENTROPY_NORM, iT, iZ)] += H / lnn;
            /* section 7 */
            if (zn == MET_SOFTMAX && w->do_grad_exact)
                acc[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] +=
                    met_jacobian_norm(a, nv, w->ap) / T;
            size_t p = w->order[0]; /* the dominant entry: the largest logit's weight */
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                double eps = ax->eps[iE];
                const double *uu = w->u + iE * L;
                double dn;
                if (zn == MET_SPARSEMAX) {
                    /* z is free again (entropy is done); ap is both the perturbed logits and
                     * the output: each z[j] is taken from it before the normalizer writes */
                    for (size_t j = 0; j < nv; j++) w->ap[j] = w->l[j] + eps * uu[j];
                    met_weights_with_z(w->ap, w->z, NULL, w->ap, nv, n, T, zn, ax->ssmax_scale);
                    dn = lane_normdiff(w->ap, 1.0, a, nv);
                } else {
                    dn = met_softmax_change_norm(a, p, w->l, uu, w->u_range[2 * iE],
                                             w->u_range[2 * iE + 1], f, eps, nv, w->ap, w->z);
                }
                acc[met_at_grad_fd(ax, iT, iE, iZ)] += dn / eps;
            }
        }
    }
}

/* sa_softmax's walk (docs/metrics.md section 3): its top-N order is by weight, which for
 * negative logits differs from the logit order and depends on T. When every T's order agrees
 * with the logit order over the first K keys (always when K <= the number of logits >= 0),
 * the shared walk serves; otherwise each T walks alone with its own order (its d1 and m
 * too), as a one-T, one-normalizer job accumulated in sa_acc and added into acc. */
static void sa_row_per_n(met_ws *w, size_t t, size_t n, size_t K, double delta, size_t iZ) {
    const met_axes *ax = w->ax;
    const size_t L = w->L, nv = t + 1;
    int differs = 0;
    for (size_t iT = 0; iT < ax->n_T && !differs; iT++) {
        if (ax->per_n_T && !ax->per_n_T[iT]) continue; /* not walked (metrics.per_N_T) */
        met_sa_order(w->sa_order, w->sa_idx, w->sa_tmp, w->scratch, w->z, w->l, nv, K, ax->T[iT]);
        differs = memcmp(w->sa_order, w->order, K * sizeof *w->order) != 0;
    }
    if (!differs) {
        row_per_n(w, n, nv, K, delta, iZ, 0);
        return;
    }
    met_axes ax1 = *ax;
    ax1.n_T = 1, ax1.norm = ax->norm + iZ, ax1.n_norm = 1, ax1.sample_rows = 0;
    uint32_t *order = w->order;
    double *a_T = w->a_T, *acc = w->acc, *d1_N = w->d1_N, *m_N = w->m_N;
    int d1_valid = w->d1_valid;
    size_t nacc = met_out_count(&ax1), n_W = w->n_W;
    uint32_t *wT = w->wT, slot0 = 0;
    ax1.per_n_T = NULL;
    for (size_t iT = 0; iT < ax->n_T; iT++) {
        if (ax->per_n_T && !ax->per_n_T[iT]) continue; /* not walked (metrics.per_N_T) */
        met_sa_order(w->sa_order, w->sa_idx, w->sa_tmp, w->scratch, w->z, w->l, nv, K, ax->T[iT]);
        ax1.T = ax->T + iT;
        /* a one-T job: its weights are T's slot (metrics_int.h, per_N_T) */
        w->n_W = 1, w->wT = &slot0;
        w->ax = &ax1, w->order = w->sa_order, w->a_T = a_T + w->slotT[iT] * L, w->acc = w->sa_acc;
        w->d1_N = w->d1_N_alt, w->m_N = w->m_N_alt, w->d1_valid = 0;
        memset(w->sa_acc, 0, nacc * sizeof *w->sa_acc);
        row_per_n(w, n, nv, K, delta, 0, 0);
        for (int v = 0; v < NVAL; v++)
            for (size_t iN = 0; iN < ax->n_N; iN++)
                acc[met_at_per_n(ax, v, iN, iT, iZ)] += w->sa_acc[met_at_per_n(&ax1, v, iN, 0, 0)];
        w->ax = ax, w->order = order, w->a_T = a_T, w->acc = acc;
        w->d1_N = d1_N, w->m_N = m_N, w->d1_valid = d1_valid;
        w->n_W = n_W, w->wT = wT;
    }
}

/* One row t: n entries (n = nv = t+1 for visible rows, n = Lc for full_row). */
void met_process_row(met_ws *w, size_t t, size_t n, double delta) {
    if (n < 2) return; /* no metric is defined on a one-key row (section 9) */
    size_t K = row_start(w, t, n);
    w->d1_valid = 0;
    for (size_t iZ = 0; iZ < w->ax->n_norm; iZ++) {
        row_weights(w, t, n, iZ);
        if (w->n_W && w->ax->norm[iZ] == MET_SA_SOFTMAX) /* (n_W = 0: no T walked, per_N_T) */
            sa_row_per_n(w, t, n, K, delta, iZ);
        else if (w->n_W)
            row_per_n(w, n, t + 1, K, delta, iZ, 0);
        met_random_row(w, t, n, iZ);
    }
}

/* Point the per-row arrays at slot b of a block (metrics_int.h, rows_per_block). */
static void select_slot(met_ws *w, size_t b) {
    const size_t L = w->L, n_T = w->ax->n_T;
    w->order = w->order0 + b * L;
    w->a_T = w->a_T0 + b * n_T * L;
    w->S_T = w->S_T0 + b * n_T * w->dim;
    w->e_T = w->e_T0 + b * n_T * L;
    w->S_sq_T = w->S_sq_T0 + b * n_T;
    w->sparse_T = w->sparse_T0 + b * n_T;
    w->nz_idx_T = w->nz_idx_T0 + b * n_T * L;
    w->nnz_T = w->nnz_T0 + b * n_T;
    w->U_T = w->U_T0 + b * n_T * w->U_ld;
}

/* The visible rows t0 .. t0 + nrows - 1 as one block (one normalizer, finite vectors): each
 * row's start and weights in its slot, then dist_expect's S and e of all of them in one
 * expect_sums call (the weights of row b are 0 past its own t + 1, and 0 * x adds nothing
 * to a finite sum: every S and e has the same bits as row by row), then each row's walk, in
 * row order. */
void met_process_rows(met_ws *w, size_t t0, size_t nrows) {
    size_t K[8], nmax = 0, b0 = 0;
    const size_t L = w->L, n_T = w->ax->n_T;
    if (nrows > w->rows_per_block || nrows > 8) nrows = w->rows_per_block < 8 ? w->rows_per_block : 8;
    if (t0 == 0) b0 = 1; /* row 0 has one key: no metric (section 9) */
    for (size_t b = b0; b < nrows; b++) {
        size_t t = t0 + b, n = t + 1;
        select_slot(w, b);
        K[b] = row_start(w, t, n);
        row_weights(w, t, n, 0);
        expect_prep(w, n, K[b]);
        nmax = n;
    }
    if (nmax == 0) return;
    /* the block's rows read columns up to the last row's: zero each row's weights there */
    for (size_t b = b0; b < nrows; b++)
        for (size_t iT = 0; iT < n_T; iT++) {
            double *a = w->a_T0 + (b * n_T + iT) * L;
            for (size_t j = t0 + b + 1; j < nmax; j++) a[j] = 0.0;
        }
    select_slot(w, b0);
    expect_sums(w, (nrows - b0) * n_T, nmax, nmax, row_n16(w, nmax));
    for (size_t b = b0; b < nrows; b++) {
        size_t t = t0 + b;
        select_slot(w, b);
        w->d1_valid = 0;
        row_per_n(w, t + 1, t + 1, K[b], w->delta_run[t], 0, 1);
        met_random_row(w, t, t + 1, 0);
    }
    select_slot(w, 0);
}

/* The variable a value of mean variable v goes to: v itself, or with se its standard
 * error's (section 9.1; CR_NVARS: the mean has none, as rows_used and dist_random_se). */
static cr_var scatter_dst(cr_var v, int se) { return se ? cr_var_se(v) : v; }

/* One cut's values o into block b at (il, ih): the means (se = 0), or a sampled block's
 * standard errors (se = 1), which have their means' shapes and sit at met_at_se. */
static void scatter_cut(double *b, const cr_layout *y, const met_axes *ax, const double *o,
                        size_t il, size_t ih, int se) {
    o += se ? met_mean_count(ax) : 0;
    for (int v = 0; v < MET_NPERN + MET_NRAND; v++) {
        int rnd = v >= MET_NPERN; /* the random block: its own place in o, its own cr_vars */
        cr_var dst = scatter_dst((cr_var)(rnd ? CR_DIST_RANDOM + v - MET_NPERN : CR_DIST_TRUE + v), se);
        if (dst == CR_NVARS) continue;
        for (size_t n = 0; n < ax->n_N; n++)
            for (size_t t = 0; t < ax->n_T; t++)
                for (size_t z = 0; z < ax->n_norm; z++)
                    b[cr_at_per_n(y, dst, n, t, z, il, ih)] =
                        o[rnd ? met_at_random(ax, v - MET_NPERN, n, t, z) : met_at_per_n(ax, v, n, t, z)];
    }
    for (int v = 0; v < MET_NPERT; v++) {
        cr_var dst = scatter_dst((cr_var)(CR_ENTROPY + v), se);
        if (dst == CR_NVARS) continue;
        for (size_t t = 0; t < ax->n_T; t++)
            for (size_t z = 0; z < ax->n_norm; z++)
                b[cr_at_per_t(y, dst, t, z, il, ih)] = o[met_at_per_t(ax, v, t, z)];
    }
    /* grad_fd_se has grad_fd's shape: grad_fd's index moved to the SE variable's offset */
    size_t fd = y->offset[scatter_dst(CR_GRAD_FD, se)] - y->offset[CR_GRAD_FD];
    for (size_t t = 0; t < ax->n_T; t++)
        for (size_t e = 0; e < ax->n_eps; e++)
            for (size_t z = 0; z < ax->n_norm; z++)
                b[fd + cr_at_grad_fd(y, t, e, z, il, ih)] = o[met_at_grad_fd(ax, t, e, z)];
}

/* metrics.h: the head's means into the cell blocks, every cut (and their standard errors
 * where both the block and the job are sampled). */
void met_scatter_head(double *const *blocks, const cr_layout *y, const met_axes *ax,
                      const double *head_out, size_t ncuts, size_t il, size_t ih) {
    size_t per_cut = met_out_count(ax);
    for (size_t c = 0; c < ncuts; c++) {
        scatter_cut(blocks[c], y, ax, head_out + c * per_cut, il, ih, 0);
        if (y->sampled && ax->sample_rows) scatter_cut(blocks[c], y, ax, head_out + c * per_cut, il, ih, 1);
    }
}
