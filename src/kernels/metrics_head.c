/* metrics_head.c -- top-N order, directions, workspace, row preparation and the head job. */
#include "metrics.h"

#include <cblas.h>
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

/* ---------------- top-N order (section 3) ---------------- */

static inline int ranks_before(const double *l, uint32_t i, uint32_t j) {
    double li = l[i], lj = l[j];
    if (isnan(li)) li = -INFINITY;
    if (isnan(lj)) lj = -INFINITY;
    return li > lj || (li == lj && i < j);
}

/* Partial quicksort: leaves idx[0..K) sorted and holding the K first elements of the
 * (logit desc, index asc) total order. Keys are all distinct, so Lomuto cannot degenerate
 * on ties. */
static void partial_sort(uint32_t *idx, size_t lo, size_t hi, size_t K, const double *l) {
    while (hi - lo > 16) {
        size_t m = lo + (hi - lo) / 2, r = hi - 1;
        /* median of three into position r */
        if (ranks_before(l, idx[m], idx[lo])) { uint32_t t = idx[m]; idx[m] = idx[lo]; idx[lo] = t; }
        if (ranks_before(l, idx[r], idx[lo])) { uint32_t t = idx[r]; idx[r] = idx[lo]; idx[lo] = t; }
        if (ranks_before(l, idx[m], idx[r])) { uint32_t t = idx[m]; idx[m] = idx[r]; idx[r] = t; }
        uint32_t piv = idx[r];
        size_t s = lo;
        for (size_t i = lo; i < r; i++)
            if (ranks_before(l, idx[i], piv)) {
                uint32_t t = idx[i]; idx[i] = idx[s]; idx[s] = t;
                s++;
            }
        idx[r] = idx[s];
        idx[s] = piv;
        /* [lo, s) before pivot, s pivot, (s, hi) after */
        if (s + 1 < K) {
            partial_sort(idx, lo, s, K, l);
            lo = s + 1;
        } else {
            hi = s;
        }
    }
    for (size_t i = lo + 1; i < hi; i++) {
        uint32_t x = idx[i];
        size_t j = i;
        while (j > lo && ranks_before(l, x, idx[j - 1])) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
}

/* Small K (a grid whose largest N is a few): one pass keeping the K best so far, sorted;
 * an entry is compared with the K-th best first, so most cost one comparison. The order is
 * a strict total order, so this is the same list the partial sort gives. */
#define TOPK_INSERT_MAX 8
static void topk_insert(uint32_t *order, const double *l, size_t n, size_t K) {
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        uint32_t x = (uint32_t)j;
        if (m == K && !ranks_before(l, x, order[K - 1])) continue;
        size_t p = m < K ? m++ : K - 1;
        while (p > 0 && ranks_before(l, x, order[p - 1])) {
            order[p] = order[p - 1];
            p--;
        }
        order[p] = x;
    }
}

/* K = 1: the first index of the largest logit (NaN ranking as -inf), in two vectorizable
 * passes: the maximum in 8 lanes (exact in any order), then its first occurrence. */
static uint32_t top1(const double *l, size_t n) {
    double ml[8];
    for (int q = 0; q < 8; q++) ml[q] = -INFINITY;
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int q = 0; q < 8; q++) {
            double v = l[j + q];
            ml[q] = v > ml[q] ? v : ml[q]; /* NaN is never >: it stays -inf */
        }
    for (; j < n; j++) ml[0] = l[j] > ml[0] ? l[j] : ml[0];
    double m = -INFINITY;
    for (int q = 0; q < 8; q++) m = ml[q] > m ? ml[q] : m;
    for (j = 0; j < n; j++) {
        double v = isnan(l[j]) ? -INFINITY : l[j];
        if (v == m) break;
    }
    return (uint32_t)j;
}

void met_topk_order(uint32_t *order, uint32_t *scratch, const double *l, size_t n, size_t K) {
    if (K > n) K = n;
    if (K == 0) return;
    if (K == 1) {
        order[0] = top1(l, n);
        return;
    }
    if (K <= TOPK_INSERT_MAX) {
        topk_insert(order, l, n, K);
        return;
    }
    for (size_t j = 0; j < n; j++) scratch[j] = (uint32_t)j;
    partial_sort(scratch, 0, n, K, l);
    memcpy(order, scratch, K * sizeof *order);
}

void met_sa_order(uint32_t *order, uint32_t *idx, uint32_t *tmp, uint32_t *scratch, double *key,
                  const double *l, size_t nv, size_t K, double T) {
    /* docs/metrics.md section 3: z e^z is positive and increasing for z > 0, 0 at z = 0, and
     * negative for z < 0 with its minimum at z = -1, so by weight the positive logits come
     * first in logit order, then the zeros (index order), then the negative ones by their
     * weight -|z| e^z descending, i.e. ln|z| + z ascending (the partition function is common
     * to all, and the key has no underflow). NaN ranks last. */
    size_t Kv = K < nv ? K : nv, np = 0, nz = 0, m = 0;
    for (size_t j = 0; j < nv; j++) np += l[j] > 0, nz += l[j] == 0;
    for (size_t j = 0; j < nv; j++) key[j] = l[j];
    size_t Kp = Kv < np + nz ? Kv : np + nz;
    met_topk_order(order, scratch, key, nv, Kp); /* positives by logit, then the zeros */
    for (size_t j = 0; j < nv && Kp < Kv; j++)
        if (!(l[j] >= 0)) {
            double z = l[j] / T;
            key[m] = -(log(-z) + z); /* NaN for a NaN logit: last */
            idx[m++] = (uint32_t)j;
        }
    if (Kp < Kv) {
        met_topk_order(tmp, scratch, key, m, Kv - Kp);
        for (size_t k = Kp; k < Kv; k++) order[k] = idx[tmp[k - Kp]];
    }
    for (size_t k = Kv; k < K; k++) order[k] = (uint32_t)(nv + (k - Kv));
}

static size_t axes_unique_n(const met_axes *ax, uint32_t *uN, uint32_t *uOf) {
    /* sorted unique N values; uOf[iN] = index of N[iN] in uN */
    size_t nU = 0;
    for (size_t i = 0; i < ax->n_N; i++) {
        uint32_t v = (uint32_t)ax->N[i];
        size_t p = 0;
        while (p < nU && uN[p] < v) p++;
        if (p < nU && uN[p] == v) continue;
        memmove(uN + p + 1, uN + p, (nU - p) * sizeof *uN);
        uN[p] = v;
        nU++;
    }
    for (size_t i = 0; i < ax->n_N; i++) {
        size_t p = 0;
        while (uN[p] != (uint32_t)ax->N[i]) p++;
        uOf[i] = (uint32_t)p;
    }
    return nU;
}

size_t met_mean_count(const met_axes *ax) {
    return ((MET_NPERN + MET_NRAND) * ax->n_N + MET_NPERT + ax->n_eps) * ax->n_T * ax->n_norm;
}

size_t met_out_count(const met_axes *ax) { return met_mean_count(ax) * (ax->sample_rows ? 2 : 1); }

static size_t carve(met_ws *w, char *base, size_t L, size_t dim, const met_axes *ax) {
    size_t nout = met_out_count(ax), at = 0;
    size_t n_N = ax->n_N ? ax->n_N : 1, n_T = ax->n_T;
#define TAKE(ptr, count, type)                                  \
    do {                                                        \
        if (base) (ptr) = (type *)(void *)(base + at);          \
        at += (((count) * sizeof(type)) + 63) / 64 * 64;        \
    } while (0)
    size_t Kmax = 1;
    for (size_t i = 0; i < ax->n_N; i++)
        if ((size_t)ax->N[i] > Kmax) Kmax = (size_t)ax->N[i];
    if (Kmax > L) Kmax = L;
    w->U_ld = Kmax + 1;
    TAKE(w->X, L * dim, double);
    TAKE(w->XTf, dim * L, float);
    TAKE(w->G, L * L, double);
    TAKE(w->x_sq, L, double);
    TAKE(w->x_norm, L, double);
    TAKE(w->x_sq_pmax, L, double);
    TAKE(w->dir_ctr, L + 2, uint64_t);
    TAKE(w->x_inv, L, double);
    TAKE(w->y_sq, L, double);
    TAKE(w->delta_run, L, double);
    TAKE(w->l, L, double);
    TAKE(w->z, L, double);
    TAKE(w->ap, L, double);
    TAKE(w->u, (ax->n_eps ? ax->n_eps : 1) * L, double);
    TAKE(w->u_range, 2 * (ax->n_eps ? ax->n_eps : 1), double);
    size_t B = met_rows_per_block(ax);
    w->rows_per_block = B;
    TAKE(w->a_T, B * n_T * L, double);
    TAKE(w->order, B * L, uint32_t);
    TAKE(w->scratch, L, uint32_t);
    TAKE(w->S_T, B * n_T * dim, double);
    TAKE(w->e_T, B * n_T * L, double);
    TAKE(w->S_sq_T, B * n_T, double);
    TAKE(w->sparse_T, B * n_T, uint32_t);
    TAKE(w->nz_idx_T, B * n_T * L, uint32_t);
    TAKE(w->nnz_T, B * n_T, uint32_t);
    TAKE(w->sel_w, 2 * n_T * Kmax, double);
    TAKE(w->sel_w_end, 2 * n_T, uint32_t);
    TAKE(w->c_T, 2 * n_T * L, double);
    TAKE(w->A_T, n_T, double);
    TAKE(w->Q_T, n_T, double);
    TAKE(w->zero_sel_T, n_T, size_t);
    TAKE(w->is_unsel, L, double);
    TAKE(w->sel_inf, L, double);
    TAKE(w->rank, L, uint32_t);
    TAKE(w->d1_sq_run, L, double);
    TAKE(w->d1_N, n_N, double);
    TAKE(w->not_topK, L, double);
    TAKE(w->U_T, B * n_T * (Kmax + 1), double);
    TAKE(w->s_vec, dim, double);
    TAKE(w->m_N, n_N, double);
    TAKE(w->sel_gather, 5 * Kmax, double);
    TAKE(w->acc, nout, double);
    TAKE(w->cntN, n_N, double);
    TAKE(w->uN, n_N, uint32_t);
    TAKE(w->uOf, n_N, uint32_t);
    TAKE(w->iota, L > dim ? L : dim, uint32_t);
    TAKE(w->uStart, n_N + 1, uint32_t);
    TAKE(w->uIdx, n_N, uint32_t);
    TAKE(w->wT, n_T, uint32_t);
    TAKE(w->slotT, n_T, uint32_t);
    TAKE(w->y_scr, L, double);
    TAKE(w->sa_order, L, uint32_t);
    TAKE(w->sa_idx, L, uint32_t);
    TAKE(w->sa_tmp, L, uint32_t);
    TAKE(w->sa_acc, ((MET_NPERN + MET_NRAND) * n_N + MET_NPERT + (ax->n_eps ? ax->n_eps : 1)), double);
    TAKE(w->d1_N_alt, n_N, double);
    TAKE(w->m_N_alt, n_N, double);
    size_t Kr = ax->random_subsets;
    TAKE(w->rnd_e, Kr ? n_T * L : 0, double);
    TAKE(w->rnd_S_sq, Kr ? n_T : 0, double);
    TAKE(w->rnd_d, Kr ? met_random_scratch_doubles(L, n_T, Kr) : 0, double);
    TAKE(w->rnd_out, Kr ? 3 * n_T : 0, double);
    TAKE(w->rnd_i, Kr ? 2 * L : 0, uint32_t);
    if (ax->sample_rows) { /* section 9.1: the cut's rows, one row's values, their squares */
        size_t nmean = met_mean_count(ax);
        TAKE(w->samp_rows, L, uint32_t);
        TAKE(w->row_acc, nmean, double);
        TAKE(w->acc_sq, nmean, double);
    }
#undef TAKE
    w->order0 = w->order, w->sparse_T0 = w->sparse_T, w->nz_idx_T0 = w->nz_idx_T;
    w->nnz_T0 = w->nnz_T, w->a_T0 = w->a_T, w->S_T0 = w->S_T, w->e_T0 = w->e_T;
    w->S_sq_T0 = w->S_sq_T, w->U_T0 = w->U_T;
    return at;
}

size_t met_workspace_bytes(size_t L_max, size_t dim, const met_axes *ax) {
    met_ws w;
    return carve(&w, NULL, L_max, dim, ax) + 64;
}


void met_finish_cut(double *out, met_ws *w) {
    const met_axes *ax = w->ax;
    for (size_t iN = 0; iN < ax->n_N; iN++)
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
                double cnt = w->cntN[iN];
                if (ax->per_n_T && !ax->per_n_T[iT]) { /* not computed at this T */
                    for (int v = 0; v < MET_NPERN; v++) out[met_at_per_n(ax, v, iN, iT, iZ)] = NAN;
                    continue;
                }
                for (int v = 0; v < NVAL; v++) {
                    size_t at = met_at_per_n(ax, v, iN, iT, iZ);
                    out[at] = cnt > 0 ? w->acc[at] / cnt : NAN;
                }
                out[met_at_per_n(ax, MET_ROWS_USED, iN, iT, iZ)] = cnt;
            }
    for (size_t iT = 0; iT < ax->n_T; iT++)
        for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
            double cnt = w->cntT;
            for (int v = 0; v < MET_NPERT; v++) {
                size_t at = met_at_per_t(ax, v, iT, iZ);
                out[at] = cnt > 0 ? w->acc[at] / cnt : NAN;
            }
            double T = ax->T[iT], gb = 1.0 / (4.0 * T);
            out[met_at_per_t(ax, MET_GRAD_BOUND, iT, iZ)] =
                cnt > 0 ? (gb < sqrt(2.0) ? gb : sqrt(2.0)) : NAN;
            if (!met_has_grad_exact(ax->norm[iZ]) || !w->do_grad_exact)
                out[met_at_per_t(ax, MET_GRAD_EXACT, iT, iZ)] = NAN;
            for (size_t iE = 0; iE < ax->n_eps; iE++) {
                size_t at = met_at_grad_fd(ax, iT, iE, iZ);
                out[at] = cnt > 0 ? w->acc[at] / cnt : NAN;
            }
        }
    /* section 4.6: the standard error of a mean of independent row estimates */
    for (size_t iN = 0; iN < ax->n_N; iN++)
        for (size_t iT = 0; iT < ax->n_T; iT++)
            for (size_t iZ = 0; iZ < ax->n_norm; iZ++) {
                double cnt = w->cntN[iN];
                int on = ax->random_subsets && (!ax->per_n_T || ax->per_n_T[iT]) && cnt > 0;
                for (int v = 0; v < MET_NRAND; v++) {
                    size_t at = met_at_random(ax, v, iN, iT, iZ);
                    double x = w->acc[at];
                    out[at] = !on ? NAN : v == MET_DIST_RANDOM_SE ? sqrt(x) / cnt : x / cnt;
                }
            }
}

/* Section 4.6: dist_random of row t at normalizer iZ for every walked T and grid N < n. The
 * subsets are keyed by (seed, window, layer, head, t, N): the same draw for every T and
 * normalizer, whatever the grid, rank or schedule. */
void met_random_row(met_ws *w, size_t t, size_t n, size_t iZ) {
    const met_axes *ax = w->ax;
    if (!ax->random_subsets || w->n_W == 0) return;
    const size_t L = w->L, n_W = w->n_W;
    met_random_prep(w->rnd_e, w->rnd_S_sq, w->a_T, L, n_W, w->G, L, n);
    for (size_t u = 0; u < w->nU && w->uN[u] < n; u++) {
        size_t N = w->uN[u];
        uint64_t key = met_direction_key(ax->seed ^ 0x72616e646f6d4e53ull, ax->window, ax->layer,
                                         ax->head, (int64_t)t, (int64_t)N);
        met_dist_random(w->rnd_out, w->rnd_d, w->rnd_i, w->a_T, L, n_W, w->G, L, w->x_sq,
                        w->rnd_e, w->rnd_S_sq, n, N, ax->aggregate, ax->random_subsets, key);
        for (size_t g = w->uStart[u]; g < w->uStart[u + 1]; g++)
            for (size_t s = 0; s < n_W; s++)
                for (int v = 0; v < MET_NRAND; v++)
                    w->acc[met_at_random(ax, v, w->uIdx[g], w->wT[s], iZ)] += w->rnd_out[3 * s + v];
    }
}

void met_reset_acc(met_ws *w) {
    memset(w->acc, 0, w->nout * sizeof *w->acc);
    memset(w->cntN, 0, (w->ax->n_N ? w->ax->n_N : 1) * sizeof *w->cntN);
    w->cntT = 0;
}

/* met_head's refusals of a job it cannot run (metrics.h): one line naming the value */
static int check_job(size_t ld_scores, size_t L, size_t dim, const size_t *cuts, size_t ncuts,
                     const met_axes *ax, as_err *err) {
    if (L == 0 || dim == 0 || ld_scores < L)
        return as_fail(err, "metrics: bad head shape L=%zu dim=%zu ld=%zu", L, dim, ld_scores);
    if (L > UINT32_MAX - 1) return as_fail(err, "metrics: L=%zu too large", L);
    if (ax->n_N == 0 || ax->n_T == 0 || ax->n_norm == 0)
        return as_fail(err, "metrics: empty N, T or normalizer axis");
    if (ax->skip & ~(unsigned)(MET_SKIP_GRAD_EXACT | MET_SKIP_DIST_EXPECT))
        return as_fail(err, "metrics: unknown skip bits 0x%x", ax->skip);
    if (ax->random_subsets == 1)
        return as_fail(err, "metrics: random_subsets=1: a standard error needs at least 2 (0: off)");
    for (size_t i = 0; i < ax->n_N; i++)
        if (ax->N[i] < 1) return as_fail(err, "metrics: N[%zu]=%d must be >= 1", i, (int)ax->N[i]);
    for (size_t i = 0; i < ax->n_T; i++)
        if (!(ax->T[i] > 0) || !isfinite(ax->T[i]))
            return as_fail(err, "metrics: T[%zu]=%g must be finite and > 0", i, ax->T[i]);
    for (size_t i = 0; i < ax->n_eps; i++)
        if (!(ax->eps[i] > 0))
            return as_fail(err, "metrics: eps[%zu]=%g must be > 0", i, ax->eps[i]);
    for (size_t i = 0; i < ax->n_norm; i++)
        if ((int)ax->norm[i] < 0 || (int)ax->norm[i] >= MET_N_NORMALIZERS)
            return as_fail(err, "metrics: normalizer[%zu]=%d unknown", i, (int)ax->norm[i]);
    if (ax->entmax_alpha != 0 && !(ax->entmax_alpha > 1 && ax->entmax_alpha <= 2))
        return as_fail(err, "metrics: entmax_alpha=%g must be in (1, 2] (0: 1.5)", ax->entmax_alpha);
    if (ax->sigmoid_bias_set && !isfinite(ax->sigmoid_bias))
        return as_fail(err, "metrics: sigmoid_bias=%g must be finite", ax->sigmoid_bias);
    for (size_t c = 0; c < ncuts; c++)
        if (cuts[c] < 1 || cuts[c] > L || (c && cuts[c] < cuts[c - 1]))
            return as_fail(err, "metrics: cut %zu = %zu must be ascending in [1, %zu]", c,
                           cuts[c], L);
    return 0;
}

/* The head's vectors in double, transposed floats, the Gram matrix and the norms (section 4.4)
 * over the rows t < Lmax that any cut uses. */
static void head_vectors(met_ws *w, const float *vectors, size_t Lmax) {
    const size_t L = w->L, dim = w->dim;
    const met_axes *ax = w->ax;
    /* Gram matrix in double over the rows any cut uses (dsyrk's lower triangle, mirrored
     * below); columns Lmax .. L of those rows are zeroed because c_update reads whole
     * 16-column blocks past the row's n. Rows past Lmax are never read (every index in
     * order[] is below the row's n <= Lmax) and are left as they are: zeroing all of G
     * (8 MB at L = 1024) was a tenth of the fixed cost per head. */
    for (size_t i = 0; i < Lmax && Lmax < L; i++)
        memset(w->G + i * L + Lmax, 0, (L - Lmax) * sizeof *w->G);
    w->finite = 1;
    for (size_t i = 0; i < Lmax * dim; i++) {
        w->X[i] = (double)vectors[i];
        if (!isfinite(w->X[i])) w->finite = 0;
    }
    /* zero past Lmax too: the kernels read whole 16-column blocks */
    memset(w->x_sq, 0, L * sizeof *w->x_sq);
    /* XTf [dim][L]: the vectors transposed, zero past Lmax (c_update reads whole 16-column blocks) */
    w->Xf = vectors;
    memset(w->XTf, 0, dim * L * sizeof *w->XTf);
    /* in blocks of 16 vectors: each k then writes one whole 64-byte line of XTf (the
     * stride of L floats, 4 KB at L = 1024, maps every k to the same cache set, so a
     * vector-at-a-time walk evicted each line after one store) */
    for (size_t i0 = 0; i0 < Lmax; i0 += 16) {
        size_t i1 = i0 + 16 < Lmax ? i0 + 16 : Lmax;
        for (size_t k = 0; k < dim; k++)
            for (size_t i = i0; i < i1; i++) w->XTf[k * L + i] = vectors[i * dim + k];
    }
    for (size_t i = 0; i < (L > dim ? L : dim); i++) w->iota[i] = (uint32_t)i;
    if (ax->n_eps) met_direction_counters(w->dir_ctr, Lmax + 2);
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)Lmax, (int)dim, 1.0, w->X, (int)dim,
                0.0, w->G, (int)L);
    /* the upper triangle from the lower in 8 x 8 tiles (a column walk over the whole
     * matrix missed the cache at every element; 32 x 32 tiles read 32 rows whose stride,
     * 8 KB at L = 1024, puts them all in one cache set: more lines than its ways) */
    for (size_t i0 = 0; i0 < Lmax; i0 += 8)
        for (size_t j0 = i0; j0 < Lmax; j0 += 8)
            for (size_t i = i0; i < i0 + 8 && i < Lmax; i++)
                for (size_t j = j0 > i + 1 ? j0 : i + 1; j < j0 + 8 && j < Lmax; j++)
                    w->G[i * L + j] = w->G[j * L + i];
    for (size_t i = 0; i < Lmax; i++) {
        /* |x_i|^2 summed from X itself, not G_ii: dsyrk may round the diagonal of two
         * identical rows differently, and y_i = x_i / |x_i| of exact duplicates must be equal
         * (delta = 0, r = 0 for twins) */
        double sq = 0;
        for (size_t k = 0; k < dim; k++) sq += w->X[i * dim + k] * w->X[i * dim + k];
        w->x_sq[i] = sq;
        w->x_norm[i] = sqrt(w->x_sq[i]);
        w->x_inv[i] = w->x_norm[i] > 0 ? 1.0 / w->x_norm[i] : 0.0;
        w->y_sq[i] = w->x_norm[i] > 0 ? 1.0 : 0.0;
        /* prefix maximum (NaN skipped: never > anything), so that a row of n entries finds
         * max_j |x_j|^2 in x_sq_pmax[n - 1] instead of a serial O(n) max chain */
        double pm = i ? w->x_sq_pmax[i - 1] : 0;
        w->x_sq_pmax[i] = w->x_sq[i] > pm ? w->x_sq[i] : pm;
    }
}

/* delta (section 6): running minimum over t of |y_i - y_t|, i < t */
static void delta_runs(met_ws *w, size_t Lmax) {
    const size_t L = w->L, dim = w->dim;
    double run = INFINITY;
    for (size_t t = 0; t < Lmax; t++) {
        const double *Gt = w->G + t * L;
        /* a branch-free pass first (min is exact in any order: the lanes change nothing);
         * only a row with a cancelled square (near-duplicates) takes the explicit loop */
        double ml[LANES], gl[LANES];
        for (int q = 0; q < LANES; q++) ml[q] = INFINITY, gl[q] = INFINITY;
        const double yt = w->y_sq[t], xt = w->x_inv[t];
        size_t i = 0;
#define MET_DELTA_TERM(lane, i)                                                     \
    do {                                                                            \
        double d2 = w->y_sq[i] + yt - 2 * w->x_inv[i] * xt * Gt[i];                   \
        double gd = d2 - MET_CANCEL * (w->y_sq[i] + yt);                             \
        gl[lane] = gd < gl[lane] ? gd : gl[lane];                                   \
        d2 = d2 > 0 ? d2 : 0;                                                       \
        ml[lane] = d2 < ml[lane] ? d2 : ml[lane];                                   \
    } while (0)
        for (; i + LANES <= t; i += LANES)
            for (int q = 0; q < LANES; q++) MET_DELTA_TERM(q, i + q);
        for (; i < t; i++) MET_DELTA_TERM(0, i);
#undef MET_DELTA_TERM
        double guard = INFINITY, mt = INFINITY;
        for (int q = 0; q < LANES; q++) {
            guard = gl[q] < guard ? gl[q] : guard;
            mt = ml[q] < mt ? ml[q] : mt;
        }
        if (guard < 0 || guard != guard) { /* some square cancelled (or NaN): explicitly */
            mt = INFINITY;
            for (i = 0; i < t; i++) {
                double d2 = w->y_sq[i] + yt - 2 * w->x_inv[i] * xt * Gt[i];
                if (d2 < MET_CANCEL * (w->y_sq[i] + yt)) { /* near-duplicates: directly */
                    for (size_t k = 0; k < dim; k++)
                        w->s_vec[k] = y_of(w->X + t * dim, k, w->x_norm[t]);
                    d2 = sq_diff_y(w->X + i * dim, w->x_norm[i], 1.0, w->s_vec, dim);
                }
                d2 = d2 > 0 ? d2 : 0;
                if (d2 < mt) mt = d2;
            }
        }
        if (mt < run) run = mt;
        w->delta_run[t] = sqrt(run);
    }

}

/* The rows of every cut (section 9): visible rows once for all cuts, full_row rows per cut;
 * metrics.query_rows = "sample:K" below a cut's rows: K of them (section 9.1). */
static void head_rows(met_ws *w, double *out, const size_t *cuts, size_t ncuts) {
    const met_axes *ax = w->ax;
    const size_t Lmax = cuts[ncuts - 1];
    size_t nout = w->nout;
    size_t first = ax->full_row ? 0 : 1; /* section 9: row 0 of a visible pass has no metric */
    if (ax->sample_rows && ax->sample_rows < Lmax - first) {
        met_sampled_cuts(out, w, cuts, ncuts);
        return;
    }
    if (!ax->full_row) {
        met_reset_acc(w);
        size_t c = 0;
        size_t B = w->finite ? w->rows_per_block : 1; /* a block adds 0 * x terms: finite x */
        for (size_t t = 0; t < Lmax;) {
            /* a block ends at the next cut: the cut's means take exactly its rows */
            size_t end = t + B < Lmax ? t + B : Lmax;
            if (c < ncuts && cuts[c] < end) end = cuts[c];
            if (end - t > 1)
                met_process_rows(w, t, end - t);
            else
                met_process_row(w, t, t + 1, w->delta_run[t]);
            t = end;
            while (c < ncuts && cuts[c] == t) met_finish_cut(out + nout * c++, w);
        }
    } else {
        for (size_t c = 0; c < ncuts; c++) {
            if (c && cuts[c] == cuts[c - 1]) {
                memcpy(out + nout * c, out + nout * (c - 1), nout * sizeof *out);
                continue;
            }
            met_reset_acc(w);
            size_t Lc = cuts[c];
            for (size_t t = 0; t < Lc; t++) met_process_row(w, t, Lc, w->delta_run[Lc - 1]);
            met_finish_cut(out + nout * c, w);
        }
    }
    /* every row taken although sampling was asked for (K >= the rows): exact means, SE 0 */
    if (ax->sample_rows)
        for (size_t c = 0; c < ncuts; c++) met_exact_se(out + nout * c, ax);
}

int met_head(double *out, void *workspace, size_t workspace_bytes, const float *scores,
             size_t ld_scores, const float *vectors, size_t L, size_t dim, const size_t *cuts,
             size_t ncuts, const met_axes *ax, as_err *err) {
    if (check_job(ld_scores, L, dim, cuts, ncuts, ax, err)) return -1;
    size_t need = met_workspace_bytes(L, dim, ax);
    if (workspace_bytes < need)
        return as_fail(err, "metrics: workspace of %zu bytes, need %zu for L=%zu dim=%zu",
                       workspace_bytes, need, L, dim);
    if (ncuts == 0) return 0;

    met_ws w;
    memset(&w, 0, sizeof w);
    char *base = (char *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    carve(&w, base, L, dim, ax);
    w.L = L, w.dim = dim, w.ld = ld_scores, w.ax = ax, w.scores = scores;
    w.nout = met_out_count(ax);
    w.nU = axes_unique_n(ax, w.uN, w.uOf);
    w.Kmax = w.uN[w.nU - 1];
    /* the walked T in slots 0 .. n_W, then the others (metrics_int.h) */
    w.n_W = 0;
    for (size_t iT = 0; iT < ax->n_T; iT++)
        if (!ax->per_n_T || ax->per_n_T[iT]) w.slotT[iT] = (uint32_t)w.n_W, w.wT[w.n_W++] = (uint32_t)iT;
    for (size_t iT = 0, k = w.n_W; iT < ax->n_T; iT++)
        if (ax->per_n_T && !ax->per_n_T[iT]) w.slotT[iT] = (uint32_t)k++;
    if (w.n_W == 0) w.Kmax = 1; /* no walk: only grad_fd's dominant entry, order[0] */
    w.do_grad_exact = !(ax->skip & MET_SKIP_GRAD_EXACT);
    w.do_expect = !(ax->skip & MET_SKIP_DIST_EXPECT) || ax->aggregate;
    /* grid indices of each unique N, grouped: uIdx[uStart[u] .. uStart[u+1]) */
    for (size_t u = 0, g = 0; u < w.nU; u++) {
        w.uStart[u] = (uint32_t)g;
        for (size_t iN = 0; iN < ax->n_N; iN++)
            if (w.uOf[iN] == u) w.uIdx[g++] = (uint32_t)iN;
        w.uStart[u + 1] = (uint32_t)g;
    }
    size_t Lmax = cuts[ncuts - 1];

    head_vectors(&w, vectors, Lmax);
    delta_runs(&w, Lmax);
    head_rows(&w, out, cuts, ncuts);
    return 0;
}
