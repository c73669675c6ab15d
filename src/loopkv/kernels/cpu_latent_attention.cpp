// Attention over past tokens stored as latents, one fused CPU pass (the math of
// kernels/latent_attention.py): per (batch, KV head) task, K is rebuilt from its latents 16 keys at a
// time (loop decoder rows + calibration mean, RoPE at each key's position), every query of the head
// is scored against them with an online softmax, and V stays absorbed: the softmax weights are summed
// over V latents and decoded once per query at the end. A decode step's own token (one query, its
// exact rotated K and V) joins the same softmax. Nothing of size S x d is materialised.
//
// Built at first use by loopkv.kernels.cpu_kernels (torch's extension loader, cached).
#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

// One latent row to float (the cache stores bf16 / fp16 / fp32); unit stride is the stored layout.
template <typename T>
__attribute__((always_inline)) inline void gather(const T* src, int64_t stride, int64_t n, float* dst) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i * stride]);
  }
}

// bf16 is the top half of a float: widening the bits is exact and vectorises (c10's conversion does not)
template <>
__attribute__((always_inline)) inline void gather(const c10::BFloat16* src, int64_t stride, int64_t n, float* dst) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(src);
  uint32_t* out = reinterpret_cast<uint32_t*>(dst);
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(bits[i]) << 16;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(bits[i * stride]) << 16;
  }
}

// A row's cache lines (every line it touches, unaligned rows included); locality 2: towards L2, 3: L1
template <int Locality>
inline void prefetch_lines(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, Locality);
  __builtin_prefetch(p + bytes - 1, 0, Locality);
}

// Rows first..last-1 of a store (row stride in elements): one contiguous range when the rows lie end
// to end (the stores' layout), else row by row (packed rows share lines, fetched twice row by row)
template <int Locality, typename T>
inline void prefetch_rows(const T* base, int64_t row_stride, int64_t first, int64_t last, int64_t row_len) {
  if (first >= last) return;
  if (row_stride == row_len) {
    prefetch_lines<Locality>(base + first * row_stride, (last - first) * row_len * static_cast<int64_t>(sizeof(T)));
    return;
  }
  for (int64_t s = first; s < last; ++s) prefetch_lines<Locality>(base + s * row_stride, row_len * sizeof(T));
}

// Everything a task reads; shapes and strides as checked by the Python wrapper.
template <typename LatentT>
struct Args {
  const float* q;            // (B, Hq, L, d) contiguous
  int64_t hq, group, length, d;
  const LatentT* ck;         // ck_st: strides (batch, token, group, rank); groups 1 = shared by all heads
  int64_t ck_st[4], k_groups, r_k;
  const LatentT* cv;
  int64_t cv_st[4], v_groups, r_v, s_len;
  const char* cv_end;         // one past cv's storage: V rows read in place as whole vectors stay below it
  const float *up_k_t, *mu_k, *up_v_t, *mu_v;   // the decoders transposed, (H_kv, r, d)
  const float *cos, *sin;     // rope_st: strides (batch, token); the last dim contiguous
  int64_t rope_st[2];
  const int64_t* rope_rows;   // null, or the keys' positions (strides rows_st): cos/sin rows indexed by them
  int64_t rows_st[2];
  const bool* valid;          // (B, S) or null
  const float *own_k, *own_v; // (B, H_kv, 1, d) or null
  const float *own_cos, *own_sin;   // (B, 1, 1, d) or null: own_k is pre-RoPE, rotated in the epilogue
  float *out, *lse;
};

// 16 floats: one AVX-512 register, two AVX2 or four SSE ones, whichever the copy is compiled for
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));   // for unaligned loads and stores
inline v16 load16(const float* p) { return *reinterpret_cast<const v16u*>(p); }
inline void store16(float* p, v16 x) { *reinterpret_cast<v16u*>(p) = x; }

// the sum of a vector's 16 lanes, as a tree (a serial chain of 16 adds dominated the scoring)
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));
inline float hsum16(v16 x) {
  const v8 a = __builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15);
  const v4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}

// q . k over d dims
inline float dot(const float* q, const float* k, int64_t d) {
  if (d % 16 == 0) {
    v16 x = v16{};
    for (int64_t j = 0; j < d; j += 16) x += load16(q + j) * load16(k + j);
    return hsum16(x);
  }
  float x = 0.0f;
  for (int64_t j = 0; j < d; ++j) x += q[j] * k[j];
  return x;
}

// exp of 16 floats <= 0 (softmax weights): x = n ln2 + r, |r| <= ln2/2, e^r by Cephes' degree-6
// polynomial, 2^n through the exponent bits; within 2 ulp of expf, 0 below -87.3 (a float's range)
typedef int32_t v16i __attribute__((vector_size(64)));
inline v16 exp16(v16 x) {
  const v16 lo = v16{} - 87.33654f;
  const v16i underflow = x < lo;
  x = underflow ? lo : x;
  const v16 t = x * 1.44269504088896341f - 0.5f;   // x <= 0: round to nearest = truncate(t - 0.5)
  const v16i n = __builtin_convertvector(t, v16i);
  const v16 nf = __builtin_convertvector(n, v16);
  const v16 r = x - nf * 0.693359375f + nf * 2.12194440e-4f;
  v16 y = v16{} + 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  v16 scale;
  const v16i bits = (n + 127) << 23;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  y = y * scale;
  return underflow ? v16{} : y;
}

// U keys' pre-RoPE values over one 16-dim slice of both halves, a = mu + U c: 2U independent
// accumulators in registers, each decoder row loaded once for the U keys. c: the keys' latents
// (rows of r_k); ukt: the decoder transposed, at the slice's first dim.
template <int U>
__attribute__((always_inline)) inline void decode_keys(const float* c, int64_t r_k, const float* ukt, int64_t d,
                                                       int64_t half, v16 mu1, v16 mu2, v16* a1, v16* a2) {
  v16 x1[U], x2[U];   // local, so they stay in registers; written out once
  for (int u = 0; u < U; ++u) { x1[u] = mu1; x2[u] = mu2; }
  for (int64_t r = 0; r < r_k; ++r) {
    const v16 u1 = load16(ukt + r * d), u2 = load16(ukt + r * d + half);
    for (int u = 0; u < U; ++u) {
      const float cr = c[u * r_k + r];
      x1[u] += cr * u1;
      x2[u] += cr * u2;
    }
  }
  for (int u = 0; u < U; ++u) { a1[u] = x1[u]; a2[u] = x2[u]; }
}

// Rotated keys of a tile: key_t = R(p_t) (mu + U c_t), U given transposed (r_k, d); cos/sin rows of
// rows `pos[t]` of the tables (row stride `pos_stride`, dims contiguous); rotate-half RoPE.
__attribute__((always_inline)) inline void rebuild_rotated_keys(const float* c, int64_t n, int64_t r_k,
                                                                const float* ukt, const float* mu, int64_t d,
                                                                const float* cos, const float* sin,
                                                                int64_t pos_stride, const int64_t* pos, float* keys) {
  const int64_t half = d / 2;
  if (half % 16 == 0) {
    for (int64_t j0 = 0; j0 < half; j0 += 16) {
      const v16 mu1 = load16(mu + j0), mu2 = load16(mu + j0 + half);
      for (int64_t t = 0; t < n;) {
        const int u_keys = t + 4 <= n ? 4 : 1;   // four keys at a time, then one by one
        v16 a1[4], a2[4];
        if (u_keys == 4) decode_keys<4>(c + t * r_k, r_k, ukt + j0, d, half, mu1, mu2, a1, a2);
        else decode_keys<1>(c + t * r_k, r_k, ukt + j0, d, half, mu1, mu2, a1, a2);
        for (int u = 0; u < u_keys; ++u, ++t) {
          const float* cs = cos + pos[t] * pos_stride;
          const float* sn = sin + pos[t] * pos_stride;
          store16(keys + t * d + j0, a1[u] * load16(cs + j0) - a2[u] * load16(sn + j0));
          store16(keys + t * d + j0 + half, a2[u] * load16(cs + j0 + half) + a1[u] * load16(sn + j0 + half));
        }
      }
    }
    return;
  }
  for (int64_t t = 0; t < n; ++t) {   // head widths whose half is not a multiple of 16
    float* key = keys + t * d;
    for (int64_t j = 0; j < d; ++j) {
      float x = mu[j];
      for (int64_t r = 0; r < r_k; ++r) x += c[t * r_k + r] * ukt[r * d + j];
      key[j] = x;
    }
    const float* cs = cos + pos[t] * pos_stride;
    const float* sn = sin + pos[t] * pos_stride;
    for (int64_t j = 0; j < half; ++j) {
      const float x1 = key[j], x2 = key[j + half];
      key[j] = x1 * cs[j] - x2 * sn[j];
      key[j + half] = x2 * cs[j + half] + x1 * sn[j + half];
    }
  }
}

// 16 vectors -> their 16 lane sums, in order, as one vector: a transpose tree of 15 adds, where a
// horizontal sum per vector cost ~10 operations each
__attribute__((always_inline)) inline v16 lane_sums16(const v16* x) {
  v16 y[8], z[4], w[2];
  for (int i = 0; i < 8; ++i)
    y[i] = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(x[2 * i], x[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int i = 0; i < 4; ++i)
    z[i] = __builtin_shufflevector(y[2 * i], y[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
           __builtin_shufflevector(y[2 * i], y[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  for (int i = 0; i < 2; ++i)
    w[i] = __builtin_shufflevector(z[2 * i], z[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
           __builtin_shufflevector(z[2 * i], z[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  return __builtin_shufflevector(w[0], w[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(w[0], w[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// 16 dims of both halves of q . R(p) a, lane-wise (cs, sn: the key's cos/sin rows at the first half's dims).
// A function, not a lambda: a lambda is not inlined into the per-ISA copies, and 64-byte vectors
// passed to it by value cross an ABI boundary between them.
__attribute__((always_inline)) inline v16 rotated_dot(v16 a1, v16 a2, v16 q1, v16 q2, const float* cs,
                                                      const float* sn, int64_t half) {
  return a1 * (q1 * load16(cs) + q2 * load16(sn + half)) + a2 * (q2 * load16(cs + half) - q1 * load16(sn));
}

// One query's scores against a tile's keys without building them (d a multiple of 32): with
// a = mu + U c the key's pre-RoPE value, q . R(p) a = a_1 . (q_1 cos_1 + q_2 sin_2) + a_2 . (q_2 cos_2 -
// q_1 sin_1) over the two halves; each key's 16-lane partial sums are reduced together at the end.
// A decode step has one query per head: building, rotating, storing and re-reading its keys cost as
// much again as their rebuild.
__attribute__((always_inline)) inline void score_one_query(const float* c, int64_t n, int64_t r_k, const float* ukt,
                                                           const float* mu, int64_t d, const float* cos,
                                                           const float* sin, int64_t pos_stride, const int64_t* pos,
                                                           const float* q, float* score) {
  const int64_t half = d / 2;
  v16 x[16];
  for (int t = 0; t < 16; ++t) x[t] = v16{};
  for (int64_t j0 = 0; j0 < half; j0 += 16) {
    const v16 mu1 = load16(mu + j0), mu2 = load16(mu + j0 + half);
    const v16 q1 = load16(q + j0), q2 = load16(q + j0 + half);
    for (int64_t t = 0; t < n;) {
      const int u_keys = t + 4 <= n ? 4 : 1;
      v16 a1[4], a2[4];
      if (u_keys == 4) decode_keys<4>(c + t * r_k, r_k, ukt + j0, d, half, mu1, mu2, a1, a2);
      else decode_keys<1>(c + t * r_k, r_k, ukt + j0, d, half, mu1, mu2, a1, a2);
      for (int u = 0; u < u_keys; ++u, ++t)
        x[t] += rotated_dot(a1[u], a2[u], q1, q2, cos + pos[t] * pos_stride + j0, sin + pos[t] * pos_stride + j0, half);
    }
  }
  store16(score, lane_sums16(x));
}

// One (batch, KV head) task; always inlined into per-ISA copies below. While it runs, the latent rows
// of the same thread's next task (next_b, next_h; -1: none) are prefetched, one tile's rows per tile:
// once a layer's store outgrows L2, loading them on demand stalled ~20% of the kernel (batch 32 here).
template <typename LatentT>
__attribute__((always_inline)) inline void head_task(const Args<LatentT>& A, int64_t b, int64_t h, int64_t next_b,
                                                     int64_t next_h) {
  const float* q = A.q;
  const int64_t hq = A.hq, group = A.group, length = A.length, d = A.d, r_k = A.r_k, r_v = A.r_v, s_len = A.s_len;
  const int64_t *ck_st = A.ck_st, *cv_st = A.cv_st, *rope_st = A.rope_st;
  const LatentT *ck = A.ck, *cv = A.cv;
  const float *mu_k = A.mu_k, *mu_v = A.mu_v, *cos = A.cos, *sin = A.sin;
  const bool* valid = A.valid;
  const float *own_k = A.own_k, *own_v = A.own_v, *own_cos = A.own_cos, *own_sin = A.own_sin;
  float *out = A.out, *lse = A.lse;
  const int64_t rows = group * length;
  const int64_t rv_pad = (r_v + 15) / 16 * 16;   // V-latent rows padded with zeros to whole vectors
  const int64_t gk = A.k_groups == 1 ? 0 : h, gv = A.v_groups == 1 ? 0 : h;   // shared latent or per head
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> queries(rows * d), own_rotated(own_cos != nullptr ? d : 0);
  std::vector<float> m(rows, -std::numeric_limits<float>::infinity()), l(rows, 0.0f), acc(rows * rv_pad, 0.0f);
  const float* uk_t = A.up_k_t + h * r_k * d;   // the rebuild loops run along d
  for (int64_t g = 0; g < group; ++g)      // query heads h*group .. of this KV head, row = g * length + i
    for (int64_t i = 0; i < length; ++i) {
      const float* src = q + (((b * hq) + h * group + g) * length + i) * d;
      for (int64_t j = 0; j < d; ++j) queries[(g * length + i) * d + j] = src[j] * scale;
    }
  const float* mk = mu_k + h * d;
  // keys are rebuilt a tile at a time (latents gathered and converted to float once)
  constexpr int64_t kTile = 16;
  const bool one_query = rows == 1 && d % 32 == 0;   // a decode step: scores without the keys (score_one_query)
  const bool k_in_place = std::is_same<LatentT, float>::value && ck_st[3] == 1 && ck_st[1] == r_k;
  const bool v_in_place = std::is_same<LatentT, float>::value && cv_st[3] == 1 && cv_st[1] == r_v;
  std::vector<float> c_tile(kTile * r_k), keys(kTile * d), cv_tile(kTile * rv_pad, 0.0f);   // padding stays 0
  int64_t tile_pos[kTile], tile_rope[kTile];
  // a key's RoPE row: its position in a (P, d) table, or its slot in the (B, 1, S, d) tables
  const float* cos_b = A.rope_rows ? cos : cos + b * rope_st[0];
  const float* sin_b = A.rope_rows ? sin : sin + b * rope_st[0];
  const int64_t row_stride = A.rope_rows ? d : rope_st[1];
  const int64_t* rope_rows = A.rope_rows ? A.rope_rows + b * A.rows_st[0] : nullptr;
  const bool prefetch_rows = ck_st[3] == 1 && cv_st[3] == 1;   // rows of unit stride (the stores')
  const bool prefetch = next_b >= 0 && prefetch_rows;
  const LatentT* next_k = !prefetch ? nullptr : ck + next_b * ck_st[0] + (A.k_groups == 1 ? 0 : next_h) * ck_st[2];
  const LatentT* next_v = !prefetch ? nullptr : cv + next_b * cv_st[0] + (A.v_groups == 1 ? 0 : next_h) * cv_st[2];
  const LatentT* this_k = !prefetch_rows ? nullptr : ck + b * ck_st[0] + gk * ck_st[2];
  const LatentT* this_v = !prefetch_rows ? nullptr : cv + b * cv_st[0] + gv * cv_st[2];
  const int64_t k_row_bytes = r_k * sizeof(LatentT), v_row_bytes = r_v * sizeof(LatentT);
  for (int64_t s0 = 0; s0 < s_len; s0 += kTile) {
    // The next task's rows go row by row: as one range per tile, batch 32 ran 19-28% slower here
    // (replayed in-model calls; cause not found). This task's next tile goes as one range: 3-10%
    // faster at batch 1-32 than row by row.
    if (next_k != nullptr)
      for (int64_t s = s0; s < std::min(s0 + kTile, s_len); ++s) {
        prefetch_lines<2>(next_k + s * ck_st[1], k_row_bytes);
        prefetch_lines<2>(next_v + s * cv_st[1], v_row_bytes);
      }
    if (this_k != nullptr) {   // and this task's next tile, on towards L1 (L2 alone left the tile copies waiting)
      prefetch_rows<3>(this_k, ck_st[1], s0 + kTile, std::min(s0 + 2 * kTile, s_len), r_k);
      prefetch_rows<3>(this_v, cv_st[1], s0 + kTile, std::min(s0 + 2 * kTile, s_len), r_v);
    }
    int64_t n = 0;
    for (int64_t s = s0; s < std::min(s0 + kTile, s_len); ++s) {
      if (valid != nullptr && !valid[b * s_len + s]) continue;
      tile_rope[n] = rope_rows ? rope_rows[s * A.rows_st[1]] : s;
      tile_pos[n++] = s;
    }
    if (n == 0) continue;
    // float32 rows laid end to end with no key masked out are read in place (the store's layout);
    // otherwise gathered and converted into the tile
    const bool end_to_end = tile_pos[n - 1] - s0 == n - 1;
    const LatentT* k_rows = ck + b * ck_st[0] + s0 * ck_st[1] + gk * ck_st[2];
    const float* c_keys = k_in_place && end_to_end ? reinterpret_cast<const float*>(k_rows) : nullptr;
    if (c_keys == nullptr) {
      for (int64_t t = 0; t < n; ++t)
        gather(ck + b * ck_st[0] + tile_pos[t] * ck_st[1] + gk * ck_st[2], ck_st[3], r_k, c_tile.data() + t * r_k);
      c_keys = c_tile.data();
    }
    alignas(64) float tile_scores[kTile];
    if (one_query)
      score_one_query(c_keys, n, r_k, uk_t, mk, d, cos_b, sin_b, row_stride, tile_rope, queries.data(), tile_scores);
    else
      rebuild_rotated_keys(c_keys, n, r_k, uk_t, mk, d, cos_b, sin_b, row_stride, tile_rope, keys.data());
    // the tile's V latents, shared by every query row: in place likewise, read 16 ranks at a time
    // (the last vector of a row runs into the next row: lanes past r_v are summed but never read),
    // or gathered into zero-padded rows
    const float* v_rows = cv_tile.data();
    int64_t v_stride = rv_pad;
    if (v_in_place && end_to_end) {
      const float* first = reinterpret_cast<const float*>(cv + b * cv_st[0] + s0 * cv_st[1] + gv * cv_st[2]);
      if (reinterpret_cast<const char*>(first + (n - 1) * r_v + rv_pad) <= A.cv_end) v_rows = first, v_stride = r_v;
    }
    if (v_rows == cv_tile.data())
      for (int64_t t = 0; t < n; ++t) {
        const LatentT* v = cv + b * cv_st[0] + tile_pos[t] * cv_st[1] + gv * cv_st[2];
        gather(v, cv_st[3], r_v, cv_tile.data() + t * rv_pad);
      }
    for (int64_t row = 0; row < rows; ++row) {
      // the tile's scores, then one online-softmax step for the whole tile: one rescale of the
      // running sums, 16 exponentials in a vector
      const float* qr = queries.data() + row * d;
      alignas(64) float score[kTile], p[kTile];
      float top = m[row];
      for (int64_t t = 0; t < n; ++t) {
        score[t] = one_query ? tile_scores[t] : dot(qr, keys.data() + t * d, d);
        top = std::max(top, score[t]);
      }
      for (int64_t t = n; t < kTile; ++t) score[t] = top;
      store16(p, exp16(load16(score) - top));
      for (int64_t t = n; t < kTile; ++t) p[t] = 0.0f;
      const float rescale = std::exp(m[row] - top);   // 0 while nothing was summed (m = -inf)
      l[row] = l[row] * rescale + hsum16(load16(p));
      m[row] = top;
      // the running sum of weighted V latents, 16 ranks at a time in registers (two chains over keys)
      float* a = acc.data() + row * rv_pad;
      for (int64_t r0 = 0; r0 < rv_pad; r0 += 16) {
        v16 x0 = load16(a + r0) * rescale, x1 = v16{};
        const float* vt = v_rows + r0;
        int64_t t = 0;
        for (; t + 2 <= n; t += 2) {
          x0 += p[t] * load16(vt + t * v_stride);
          x1 += p[t + 1] * load16(vt + (t + 1) * v_stride);
        }
        if (t < n) x0 += p[t] * load16(vt + t * v_stride);
        store16(a + r0, x0 + x1);
      }
    }
  }
  const float* uv_t = A.up_v_t + h * r_v * d;   // V's decoder transposed: the decode runs along d
  const float* mv = mu_v + h * d;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t g = row / length, i = row % length;
    const int64_t head = h * group + g;
    float* o = out + ((b * hq + head) * length + i) * d;
    const float* a = acc.data() + row * rv_pad;
    float past_weight = 0.0f, own_weight = 0.0f, total = l[row], top = m[row];
    if (own_k != nullptr) {   // a decode step's own token (length 1), exact, in the same softmax
      const float* ok = own_k + (b * (hq / group) + h) * d;
      if (own_cos != nullptr) {   // rotate-half RoPE at its position
        const float *cs = own_cos + b * d, *sn = own_sin + b * d;
        const int64_t half = d / 2;
        for (int64_t j = 0; j < half; ++j) {
          own_rotated[j] = ok[j] * cs[j] - ok[j + half] * sn[j];
          own_rotated[j + half] = ok[j + half] * cs[j + half] + ok[j] * sn[j + half];
        }
        ok = own_rotated.data();
      }
      const float* qr = queries.data() + row * d;
      float own_score = 0.0f;
      for (int64_t j = 0; j < d; ++j) own_score += qr[j] * ok[j];
      top = std::max(top, own_score);
      past_weight = std::isinf(m[row]) ? 0.0f : std::exp(m[row] - top);
      own_weight = std::exp(own_score - top);
      total = l[row] * past_weight + own_weight;
    } else {
      past_weight = 1.0f;
    }
    // past part: (sum_s p_s c_v,s) U_v^T + (sum_s p_s) mu_v, then normalised
    const float inv = 1.0f / std::max(total, 1e-30f);
    int64_t j_vec = 0;
    for (; j_vec + 16 <= d; j_vec += 16) {   // 16 dims at a time summed in a register (through o, each
      v16 x = l[row] * load16(mv + j_vec);   // rank's add waited on the previous one's store)
      for (int64_t r = 0; r < r_v; ++r) x += a[r] * load16(uv_t + r * d + j_vec);
      store16(o + j_vec, x);
    }
    for (int64_t j = j_vec; j < d; ++j) o[j] = l[row] * mv[j];
    for (int64_t r = 0; r < r_v; ++r) {
      const float ar = a[r];
      const float* u = uv_t + r * d;
      for (int64_t j = j_vec; j < d; ++j) o[j] += ar * u[j];
    }
    for (int64_t j = 0; j < d; ++j) o[j] *= past_weight * inv;
    if (own_k != nullptr) {
      const float* ov = own_v + (b * (hq / group) + h) * d;
      for (int64_t j = 0; j < d; ++j) o[j] += own_weight * ov[j] * inv;
    } else if (l[row] == 0.0f) {   // no valid past key: the tiled torch path's value (weight 0 in a merge)
      for (int64_t j = 0; j < d; ++j) o[j] = mv[j];
    }
    lse[(b * hq + head) * length + i] = top + std::log(total);
  }
}

// The same task compiled for AVX-512 and AVX2+FMA machines beside the baseline, picked at run time:
// the extension is built once per machine's cache, which a cluster may share across CPU types.
#if defined(__x86_64__) && defined(__GNUC__)
template <typename LatentT>
__attribute__((target("arch=x86-64-v4"))) void head_task_v4(const Args<LatentT>& A, int64_t b, int64_t h, int64_t nb,
                                                             int64_t nh) {
  head_task(A, b, h, nb, nh);
}
template <typename LatentT>
__attribute__((target("arch=x86-64-v3"))) void head_task_v3(const Args<LatentT>& A, int64_t b, int64_t h, int64_t nb,
                                                             int64_t nh) {
  head_task(A, b, h, nb, nh);
}
#endif
template <typename LatentT>
void head_task_base(const Args<LatentT>& A, int64_t b, int64_t h, int64_t nb, int64_t nh) {
  head_task(A, b, h, nb, nh);
}

int isa_level() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return 4;
  if (__builtin_cpu_supports("x86-64-v3")) return 3;
#endif
  return 0;
}

}  // namespace

int64_t simd_level() { return isa_level(); }

// The checks and conversions live here, not in Python: at the embedded default a decode step's call is
// ~20 us of work, and two dozen Python-side shape checks and dtype/layout no-ops cost as much again.
// q (B, Hq, L, d); ck (B, S, Gk, r_k), cv (B, S, Gv, r_v) any strides, f32/bf16/f16, G 1 (shared)
// or H_kv; up (H_kv, d, r), mu (H_kv, d); cos, sin (B, 1, S, d) of the latents' positions, or, with
// `positions` (B, S) int64 given, (P, d) rows indexed by position (one small table for every batch
// row and step, instead of B*S rows rebuilt per forward and streamed per call); valid
// (B, S) bool or empty; own_k, own_v (B, H_kv, 1, d) or empty: a decode step's own token, folded
// into the softmax; own_cos, own_sin (B, 1, 1, d) or empty: when given, own_k is pre-RoPE and is
// rotated here. Floating inputs are used as float32. -> [out (B, Hq, L, d), lse (B, Hq, L)]
std::vector<at::Tensor> latent_attention(at::Tensor q, at::Tensor ck, at::Tensor cv, at::Tensor up_k,
                                         at::Tensor mu_k, at::Tensor up_v, at::Tensor mu_v, at::Tensor cos,
                                         at::Tensor sin, at::Tensor valid, at::Tensor own_k, at::Tensor own_v,
                                         at::Tensor own_cos, at::Tensor own_sin, at::Tensor positions) {
  TORCH_CHECK_VALUE(q.dim() == 4 && ck.dim() == 4 && cv.dim() == 4 && up_k.dim() == 3 && up_v.dim() == 3,
                    "q (B, Hq, L, d), latents (B, S, G, r) and decoders (H_kv, d, r) expected");
  const int64_t b = q.size(0), hq = q.size(1), length = q.size(2), d = q.size(3);
  const int64_t h_kv = up_k.size(0), s_len = ck.size(1), r_k = ck.size(3), r_v = cv.size(3);
  TORCH_CHECK_VALUE(hq % h_kv == 0 && up_v.size(0) == h_kv, "query heads ", hq,
                    " must group over the decoder's KV heads ", h_kv, " (V: ", up_v.size(0), ")");
  TORCH_CHECK_VALUE(up_k.size(1) == d && up_v.size(1) == d && mu_k.sizes() == at::IntArrayRef({h_kv, d}) &&
                        mu_v.sizes() == at::IntArrayRef({h_kv, d}),
                    "decoder rows must be (H_kv, ", d, ", r); got up_k ", up_k.sizes(), ", mu_k ", mu_k.sizes());
  for (const auto& [name, c, up] : {std::tuple<const char*, const at::Tensor&, const at::Tensor&>{"ck", ck, up_k},
                                    {"cv", cv, up_v}}) {
    TORCH_CHECK_VALUE(c.size(2) == 1 || c.size(2) == h_kv, name, " has ", c.size(2),
                      " latent groups; the CPU kernel takes 1 (shared) or ", h_kv);
    TORCH_CHECK_VALUE(c.size(0) == b && c.size(1) == s_len && c.size(3) == up.size(2), name, " ", c.sizes(),
                      " does not fit batch ", b, " / ", s_len, " tokens / decoder ", up.sizes());
  }
  const bool by_position = positions.numel() > 0;
  if (by_position) {
    TORCH_CHECK_VALUE(positions.scalar_type() == at::kLong && positions.sizes() == at::IntArrayRef({b, s_len}),
                      "positions must be (B, S) int64 of the latents, got ", positions.sizes());
    TORCH_CHECK_VALUE(cos.dim() == 2 && cos.size(1) == d && sin.sizes() == cos.sizes(), "rope_table ", cos.sizes(),
                      " must be (P, d) rows indexed by position");
    // every row read must exist: one pass over the positions, no tensor operation on the hot path
    const int64_t* pos = positions.data_ptr<int64_t>();
    int64_t lowest = 0, highest = 0;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t s = 0; s < s_len; ++s) {
        const int64_t p = pos[i * positions.stride(0) + s * positions.stride(1)];
        lowest = std::min(lowest, p), highest = std::max(highest, p);
      }
    TORCH_CHECK_VALUE(lowest >= 0 && highest < cos.size(0), "rope_table has ", cos.size(0),
                      " rows; positions reach ", lowest < 0 ? lowest : highest);
  } else {
    TORCH_CHECK_VALUE(cos.sizes() == at::IntArrayRef({b, 1, s_len, d}) && sin.sizes() == cos.sizes(), "rope_tables ",
                      cos.sizes(), " must be (B, 1, S, d) of the latents' positions");
  }
  TORCH_CHECK_VALUE(valid.numel() == 0 || (valid.scalar_type() == at::kBool && valid.sizes() == at::IntArrayRef({b, s_len})),
                    "key_valid must be a (B, S) bool mask");
  const bool fold = own_k.numel() > 0;
  TORCH_CHECK_VALUE(!fold || (length == 1 && own_k.sizes() == at::IntArrayRef({b, h_kv, 1, d}) &&
                              own_v.sizes() == own_k.sizes()),
                    "the own token folded in must be one new token, (B, H_kv, 1, d) keys and values");
  TORCH_CHECK_VALUE(own_cos.numel() == 0 || (own_cos.sizes() == at::IntArrayRef({b, 1, 1, d}) && own_sin.sizes() == own_cos.sizes()),
                    "the own token's rope tables must be (B, 1, 1, d)");
  // float32 and contiguous, without a dispatcher round trip when already so (the common case)
  const auto f32 = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.is_contiguous() ? t : t.to(at::kFloat).contiguous();
  };
  // the decoders as (H_kv, r, d) rows (the rebuild runs along d): a float32 (H_kv, d, r) view of such
  // rows, as a cache keeps them, is read in place; anything else is transposed here, per call (two
  // copies were ~9 us of a ~21 us call at batch 1)
  const auto rows_along_d = [&f32](const at::Tensor& up) {
    const int64_t dd = up.size(1), r = up.size(2);
    if (up.scalar_type() == at::kFloat && up.stride(0) == dd * r && up.stride(1) == 1 && up.stride(2) == dd) return up;
    return f32(up).transpose(1, 2).contiguous().transpose(1, 2);
  };
  const auto up_k_t = rows_along_d(up_k), up_v_t = rows_along_d(up_v);
  q = f32(q), mu_k = f32(mu_k), mu_v = f32(mu_v), cos = f32(cos), sin = f32(sin);
  if (!valid.is_contiguous()) valid = valid.contiguous();
  const bool rotate_own = fold && own_cos.numel() > 0;
  if (fold) own_k = f32(own_k), own_v = f32(own_v);
  if (rotate_own) own_cos = f32(own_cos), own_sin = f32(own_sin);
  const int64_t group = hq / h_kv;
  auto out = at::empty({b, hq, length, d}, q.options());
  auto lse = at::empty({b, hq, length}, q.options());
  // tasks of at least ~64k multiply-adds before a thread is worth waking
  const int64_t per_task = std::max<int64_t>(1, s_len * (d * r_k + r_v));
  const int64_t grain = std::max<int64_t>(1, 65536 / per_task);
  static const int level = isa_level();
  const char* cv_end = static_cast<const char*>(cv.storage().data()) + cv.storage().nbytes();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, ck.scalar_type(), "latent_attention", [&] {
    TORCH_CHECK(cv.scalar_type() == ck.scalar_type(), "ck and cv must share a dtype");
    Args<scalar_t> A{q.data_ptr<float>(), hq, group, length, d,
                     ck.data_ptr<scalar_t>(), {ck.stride(0), ck.stride(1), ck.stride(2), ck.stride(3)}, ck.size(2), r_k,
                     cv.data_ptr<scalar_t>(), {cv.stride(0), cv.stride(1), cv.stride(2), cv.stride(3)}, cv.size(2), r_v,
                     s_len, cv_end, up_k_t.data_ptr<float>(), mu_k.data_ptr<float>(), up_v_t.data_ptr<float>(),
                     mu_v.data_ptr<float>(), cos.data_ptr<float>(), sin.data_ptr<float>(),
                     {cos.stride(0), by_position ? 0 : cos.stride(2)},
                     by_position ? positions.data_ptr<int64_t>() : nullptr,
                     {by_position ? positions.stride(0) : 0, by_position ? positions.stride(1) : 0},
                     valid.numel() ? valid.data_ptr<bool>() : nullptr,
                     fold ? own_k.data_ptr<float>() : nullptr,
                     fold ? own_v.data_ptr<float>() : nullptr,
                     rotate_own ? own_cos.data_ptr<float>() : nullptr,
                     rotate_own ? own_sin.data_ptr<float>() : nullptr,
                     out.data_ptr<float>(), lse.data_ptr<float>()};
    auto task = &head_task_base<scalar_t>;
#if defined(__x86_64__) && defined(__GNUC__)
    if (level == 4) task = &head_task_v4<scalar_t>;
    else if (level == 3) task = &head_task_v3<scalar_t>;
#endif
    at::parallel_for(0, b * h_kv, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        task(A, t / h_kv, t % h_kv, t + 1 < end ? (t + 1) / h_kv : -1, (t + 1) % h_kv);
    });
  });
  return {out, lse};
}
