// O = softmax(Q K^T / sqrt(d)) V per (batch, head), fp32 accumulation, and the log-sum-exp of
// every query row (examples/06-attention). Appended after tma's generated helpers: the tiles
// q, k, v (wgmma operands) and o, the pipelines tma_pipe_q (Q once per work unit), tma_pipe_k
// and tma_pipe_v (K and V on separate barriers, so QK^T starts before V lands), the warp roles
// tma_roles_attn (a producer warpgroup, ATTN_NC consumers (2, or 3 at head dim 64), named
// barriers `epi` and `turn` per consumer) and the kernel plan tma_plan_attn (regions and launch). The ATTN_* macros before
// it say which configuration this is (kernel.rs renders them).
//
// Layout: Q and O are [B * H][Sq][D], K and V [B * Hkv][Sk][D] (row-major), LSE [B * H][Sq]
// f32. Head h reads K/V head h / (H / Hkv) (GQA). Causal: query row r sees key rows <= r (the
// top-left diagonal, as torch's is_causal). Rows past Sq and keys past Sk: TMA fills the
// loads with zeros, the scores of keys past Sk are masked, the stores are clipped.
//
// ATTN_TABLE (Config::walks_table): a CTA's work is a table the host plans (kernel.rs,
// WorkPlan): a causal persistent grid's whole units balanced by their key blocks, or with
// ATTN_SPLIT (Config::split_tail) the round-robin units whose last ones are cut by key blocks
// between CTAs; attn leaves a cut unit's pieces as partials and a second kernel, attn_merge,
// merges them into the unit's O and LSE.
//
// ATTN_CLUSTER (Config::cluster): 2-CTA clusters; the pipelines k and v multicast each tile
// over the pair (each CTA loads its half: the generated load and release do it), and the walk
// gives a cluster's CTAs units 2p and 2p + 1, one head's adjacent query blocks (the host rounds
// a head's query blocks up to even: Config::query_blocks), so both walk the same key blocks in
// step.

typedef tma_plan_attn P;
typedef tma_pipe_q QP;
typedef tma_pipe_k KP;
typedef tma_pipe_v VP;
typedef QP::tile_q TQ;
typedef KP::tile_k TK;
typedef VP::tile_v TV;
#if ATTN_O_TMA
typedef P::tile_o TO;
#endif

#define ATTN_NEG_INF __int_as_float(0xff800000)  // -inf: a masked score (NVRTC has no INFINITY)
constexpr int ATTN_BM = 64 * ATTN_NC;  // query rows per CTA
constexpr int ATTN_S = ATTN_BN / 2;    // S's f32 accumulators per thread (64 x BN)
constexpr int ATTN_O = ATTN_D / 2;     // O's (64 x D)
constexpr int ATTN_PK = ATTN_BN / 16;  // k-slices of P V (P's A fragments)
static_assert(TQ::M_BLOCKS == ATTN_NC, "Q's tile is one 64-row block per consumer");
static_assert(P::CLUSTER_X == (ATTN_CLUSTER ? 2u : 1u) && P::CLUSTER_Y == 1u && P::CLUSTER_Z == 1u, "the plan's cluster");
static_assert(TK::WGMMA_N == ATTN_BN, "K's tile is QK^T's N");
static_assert(TV::WGMMA_N == ATTN_D, "V's tile is P V's N");
static_assert(TQ::K_SLICES * 16 == ATTN_D && TV::K_SLICES == ATTN_PK, "the k-slices");
// What the host's plan refuses (kernel.rs, Plan::new), refused here too: O staged in Q's rows
// releases Q once a unit, after the overlap kind's epilogue (a split unit's piece runs none);
// the split tail's pieces come from the host's table.
static_assert(!ATTN_O_IN_Q || (ATTN_KIND == 3 && !ATTN_SPLIT), "O in Q's rows: the overlap kind, no split tail");
static_assert(!ATTN_SPLIT || ATTN_TABLE, "the split tail walks the host's table");
static_assert(!ATTN_FOLD || ATTN_KIND == 3, "block 0 through the loop: the overlap kind");
#if ATTN_O_IN_Q
// O staged in Q's stage (kernel.rs, OStore::InQ): the source declares TO (no staging region);
// consumer c's 64 rows of each of Q's boxes hold its O, box for box.
static_assert(TO::BOXES == TQ::BOXES && (TO::BOXES == 1u || TO::SMEM_STRIDE_BYTES == TQ::SMEM_STRIDE_BYTES), "O's boxes lie as Q's");
static_assert(TO::BOX_s == 64 && TQ::BOX_s == ATTN_BM && TO::BOX_d == TQ::BOX_d, "a consumer's rows of Q's box are O's box");
static_assert((64u * TQ::BOX_BYTES / ATTN_BM) % TO::SMEM_ALIGN == 0u, "a consumer's rows keep O's swizzle alignment");
#endif

#if ATTN_KIND >= 1
typedef tma_roles_attn R;
#endif

// A stage goes back to the producer once its consumer warpgroup's wgmmas are done with it: one
// arrival per warp (the pipelines' Consumers::Warpgroups), or (ATTN_RELEASE_ONE, Consumers::
// Threads) one by each warpgroup's first thread, after its wgmma.wait_group.
#if ATTN_RELEASE_ONE
#define ATTN_RELEASE(pipe, st) \
  do {                         \
    if (tw == 0u) pipe.release(st); \
  } while (0)
#else
#define ATTN_RELEASE(pipe, st) pipe.release(st)
#endif

// Work unit u (a query block of one batch x head): the query blocks of a head are consecutive
// units, so the CTAs running at once share a few heads' K and V in L2; under causal the
// heaviest (last) query block of each head comes first.
struct attn_unit {
  int m0, bh, bh_kv, nblocks;
  // nmb: a head's query blocks, the host's count (Config::query_blocks: with ATTN_CLUSTER a
  // multiple of the cluster's CTAs, so the CTAs of a cluster, units 2p and 2p + 1, share a head).
  __device__ __forceinline__ attn_unit(int u, int H, int Hkv, int nmb, int Sk) {
    const int mb = ATTN_CAUSAL ? nmb - 1 - u % nmb : u % nmb;
    m0 = mb * ATTN_BM;
    bh = u / nmb;
    const int b = bh / H, h = bh % H;
    bh_kv = b * Hkv + h / (H / Hkv);
    const int last = ATTN_CAUSAL ? min(Sk, m0 + ATTN_BM) : Sk;  // keys this block sees
    nblocks = (max(last, 0) + ATTN_BN - 1) / ATTN_BN;
  }
};

// The producer: Q once, then K and V of every key block, each on its own pipeline.
struct attn_producer {
  QP::state qs;
  KP::state ks;
  VP::state vs;
  __device__ __forceinline__ void q(const QP& qp, const CUtensorMap* map, const attn_unit& u) {
    qp.acquire(qs);
    qp.load(qs, map, {.bh = u.bh, .s = u.m0, .d = 0});
    ++qs;
  }
  __device__ __forceinline__ void k(const KP& kp, const CUtensorMap* map, const attn_unit& u, int j) {
    kp.acquire(ks);
    kp.load(ks, map, {.bh = u.bh_kv, .s = j * ATTN_BN, .d = 0});
    ++ks;
  }
  __device__ __forceinline__ void v(const VP& vp, const CUtensorMap* map, const attn_unit& u, int j) {
    vp.acquire(vs);
    vp.load(vs, map, {.bh = u.bh_kv, .s = j * ATTN_BN, .d = 0});
    ++vs;
  }
};

// Two fp32 -> one packed pair of the storage type (lo in the low half): tma's conversion,
// the one P's A fragments use.
__device__ __forceinline__ unsigned attn_pack(float lo, float hi) { return tma_wgmma_pack2<TV::WGMMA_TYPE>(lo, hi); }

// One consumer warpgroup's online softmax over its 64 rows: each thread holds two rows (its
// fragment's halves h = 0, 1, as tma's row helpers number them), their running max m (raw
// scores, the same in the quad) and its share l of their sums.
struct attn_softmax {
  float m[2], l[2];
  float scale_log2;
  __device__ __forceinline__ explicit attn_softmax(float sl2) : scale_log2(sl2) {
    m[0] = m[1] = ATTN_NEG_INF;
    l[0] = l[1] = 0.f;
  }
  // Masks S (keys past Sk, and past the row under causal), updates the max, turns S into
  // P = exp2(S * scale_log2 - max * scale_log2) in place and gives each row's factor for
  // what came before (corr). Returns whether O needs rescaling by it: always, or (ATTN_LAZY)
  // only when a row of the warp moved its max, which tma_wgmma_row_max_lazy does only past
  // ATTN_HEADROOM_LOG2 (kernel.rs's HEADROOM_LOG2: P then stays <= 2^8).
  __device__ __forceinline__ bool step(float (&s)[ATTN_S], int row0, int col0, int Sk, bool mask, float (&corr)[2],
                                       unsigned tw) {
    if (mask) {
#pragma unroll
      for (int i = 0; i < ATTN_S; ++i) {
        const int row = row0 + (int)tma_wgmma_d_row(tw, i), col = col0 + (int)tma_wgmma_d_col(tw, i);
        if (col >= Sk || (ATTN_CAUSAL && col > row)) s[i] = ATTN_NEG_INF;
      }
    }
#if ATTN_LAZY
    const bool rescale = tma_wgmma_row_max_lazy<ATTN_BN>(s, m, scale_log2, ATTN_HEADROOM_LOG2, corr);
#else
    const bool rescale = true;
    float mx[2] = {m[0], m[1]};
    tma_wgmma_row_max<ATTN_BN>(s, mx);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // A row with nothing seen yet keeps -inf: its factor is taken against 0, not NaN.
      corr[h] = exp2f(m[h] * scale_log2 - (mx[h] == ATTN_NEG_INF ? 0.f : mx[h] * scale_log2));
      m[h] = mx[h];
    }
#endif
    // ATTN_POLY of every 8 exponentials on tma's polynomial (the FMA pipe), the rest on MUFU.
    tma_wgmma_row_exp2_poly<ATTN_BN, ATTN_POLY, ATTN_POLY_DEG>(s, m, scale_log2);
    // l: this thread's share of each row sum (rescaled with O; the quad adds the shares once,
    // in the epilogue).
    if (rescale) {
#pragma unroll
      for (int h = 0; h < 2; ++h) l[h] *= corr[h];
    }
    tma_wgmma_row_sum_partial<ATTN_BN>(s, l);
    return rescale;
  }
};

// The epilogue of one consumer: O / l in the storage type, written where O's tile puts it in
// the consumer's staging (its 128B swizzle; ATTN_O_IN_Q: its rows of Q's stage) for one TMA
// store (clipped at Sq), or (OStore::Direct) straight to global memory, clipped; the
// log-sum-exp (natural log) of each row by the quad's first thread.
// TO_STAGING false: straight to global memory whatever ATTN_O_TMA and ATTN_O_IN_Q (attn_merge,
// which has no staging).
template <bool TO_STAGING = ATTN_O_TMA || ATTN_O_IN_Q>
__device__ __forceinline__ void attn_epilogue(float (&o)[ATTN_O], attn_softmax& sm, unsigned char* staging,
                                              void* out, float* __restrict__ lse, int bh, int row0, int Sq,
                                              unsigned tw) {
  float inv[2];
  const float l[2] = {tma_wgmma_quad_sum(sm.l[0]), tma_wgmma_quad_sum(sm.l[1])};
#pragma unroll
  for (int h = 0; h < 2; ++h) inv[h] = l[h] > 0.f ? 1.f / l[h] : 0.f;
  tma_wgmma_row_scale<ATTN_D>(o, inv);
  if (tw % 4u == 0u) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + (int)tma_wgmma_d_row(tw, 2 * h);
      if (row < Sq) lse[(size_t)bh * Sq + row] = (sm.m[h] * sm.scale_log2 + __log2f(l[h])) * 0.69314718055994531f;
    }
  }
#pragma unroll
  for (int i = 0; i < ATTN_O; i += 2) {
    const int row = (int)tma_wgmma_d_row(tw, i), col = (int)tma_wgmma_d_col(tw, i);
#if ATTN_O_TMA || ATTN_O_IN_Q
    if constexpr (TO_STAGING) {
      *reinterpret_cast<unsigned*>(staging + TO::offset({.bh = 0, .s = row, .d = col})) = attn_pack(o[i], o[i + 1]);
      continue;
    }
#endif
    if (row0 + row < Sq)
      *reinterpret_cast<unsigned*>(static_cast<unsigned short*>(out) + ((size_t)bh * Sq + row0 + row) * ATTN_D + col) =
          attn_pack(o[i], o[i + 1]);
  }
  if constexpr (TO_STAGING) tma_async_proxy_fence();
}

// P (the exponentiated S, 64 x BN) as the A fragments of P V: V's element type, one per k16
// slice; each thread already holds them (tma_wgmma_acc_to_a packs, no exchange).
typedef tma_wgmma_a_frag<TV::WGMMA_TYPE> attn_pfrag;

// O += P V: A from registers, V from its stage. Issue tma_wgmma_fence() after writing p. Each
// product's k-slices go in runs of asm statements (tma_wgmma_rs_k, tma_wgmma_k): NVRTC compiles
// the kernel about 10 % faster with the same SASS (BENCHMARKS.md, "The cold compile": byte for
// byte on 10 of the 16 best configurations, one uniform-register instruction apart on the rest).
__device__ __forceinline__ void attn_pv(float (&o)[ATTN_O], const attn_pfrag (&p)[ATTN_PK], const unsigned char* v) {
  tma_wgmma_rs_k<TV>(o, p, v, 1);
}

// S = Q K^T for consumer c's 64 rows.
__device__ __forceinline__ void attn_qk(float (&s)[ATTN_S], const unsigned char* q, const unsigned char* k, int c) {
  tma_wgmma_k<TQ, TK>(s, q, (unsigned)c, k, 0);
}

// The same on Q's descriptors made once (ATTN_FOLD: the loop then does not make them again).
__device__ __forceinline__ void attn_qk(float (&s)[ATTN_S], const tma_wgmma_a_descs<TQ>& q, const unsigned char* k) {
  tma_wgmma_k<TQ, TK>(s, q, k, 0);
}

// Whether key block j needs a mask for rows row0 .. row0 + 63.
__device__ __forceinline__ bool attn_masked(int j, int row0, int Sk) {
  const int c0 = j * ATTN_BN;
  return c0 + ATTN_BN > Sk || (ATTN_CAUSAL && c0 + ATTN_BN - 1 > row0);
}

// A CTA's work: whole units blockIdx.x, + gridDim.x, ..., or (ATTN_TABLE) the items the host
// planned for it (kernel.rs, WorkPlan): whole units balanced by their key blocks (causal), or
// (ATTN_SPLIT) the round-robin units, then its share of the last `split` units' key blocks, cut
// in nearly equal ranges so that no CTA runs a unit more than the others while most idle. A
// unit cut between CTAs is a piece on each, left as a partial; attn_merge, a second kernel,
// merges them. Read from a table rather than computed here: a walk computed in the kernel took
// the wgmma descriptors off the uniform datapath.
struct attn_item {
  int unit;    // the work unit
  int jb, je;  // key blocks [jb, je); je < 0: all of the unit's
  int piece;   // a piece of the t-th split unit: t * 2 + slot (its partial's slot); else -1
};

// The partials of the cut units' pieces: per CTA, slot (its first piece, its second) and
// consumer, O unnormalised (f32) then each thread's m and l of its two rows, in the fragment's
// order ([i][thread]: a warp's 32 floats together).
constexpr int ATTN_PART = (ATTN_O + 4) * 128;
__device__ __forceinline__ float* attn_part(float* part, int g, int slot, int c) {
  return part + ((size_t)(g * 2 + slot) * ATTN_NC + c) * ATTN_PART;
}

#if ATTN_TABLE
// Item r of this CTA's row of the host's table; without ATTN_SPLIT every item is a whole unit
// (its key blocks known here at compile time, as the round-robin walk's).
__device__ __forceinline__ attn_item attn_item_at(const int4* __restrict__ items, int items_stride, int r) {
#if ATTN_SPLIT
  const int4 e = __ldg(items + (size_t)blockIdx.x * items_stride + r);
  return attn_item{e.x, e.y, e.z, e.w};
#else
  return attn_item{__ldg(reinterpret_cast<const int*>(items + (size_t)blockIdx.x * items_stride + r)), 0, -1, -1};
#endif
}
#endif

#if ATTN_SPLIT

// A piece of a cut unit at its end: its partial (O unnormalised, each thread's m and l) to its
// slot, for attn_merge.
__device__ __forceinline__ void attn_partial(const float (&o)[ATTN_O], const attn_softmax& sm, float* part,
                                             int slot, int c, unsigned tw) {
  float* mine = attn_part(part, (int)blockIdx.x, slot, c);
#pragma unroll
  for (int i = 0; i < ATTN_O; ++i) mine[i * 128 + tw] = o[i];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mine[(ATTN_O + h) * 128 + tw] = sm.m[h];
    mine[(ATTN_O + 2 + h) * 128 + tw] = sm.l[h];
  }
}

// After attn, on the same stream: one CTA of 128 threads per cut unit and consumer merges the
// unit's pieces (their list from the host's plan, in its order: the same bits every run) and
// writes the unit's O and LSE as attn's epilogue would. A kernel of its own: merging inside
// attn took its wgmma descriptors off the uniform datapath (BENCHMARKS.md).
extern "C" __global__ void __launch_bounds__(128) attn_merge(void* out, float* __restrict__ lse,
                                                             const float* __restrict__ part,
                                                             const int* __restrict__ pieces, int H, int Hkv,
                                                             int Sq, int Sk, float scale_log2, int units,
                                                             int qblocks, int split) {
  const int t = (int)blockIdx.x / ATTN_NC, c = (int)blockIdx.x % ATTN_NC;
  const unsigned tw = threadIdx.x;
  const attn_unit u(units - split + t, H, Hkv, qblocks, Sk);
  const int* list = pieces + t * (ATTN_MAX_PIECES + 1);
  const int n_pieces = __ldg(list);
  // A unit the plan left whole (one CTA's range held all of it): attn wrote it.
  if (n_pieces == 0) return;
  attn_softmax sm(scale_log2);
  float o[ATTN_O];
#pragma unroll
  for (int i = 0; i < ATTN_O; ++i) o[i] = 0.f;
  for (int k = 1; k <= n_pieces; ++k) {
    const int gs = __ldg(list + k);
    const float* other = attn_part(const_cast<float*>(part), gs >> 1, gs & 1, c);
    float mine_f[2], other_f[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mo = __ldg(other + (ATTN_O + h) * 128 + tw), lo = __ldg(other + (ATTN_O + 2 + h) * 128 + tw);
      const float mx = fmaxf(sm.m[h], mo);
      // A row with nothing seen (-inf) adds nothing, and takes no NaN from -inf - -inf.
      mine_f[h] = sm.m[h] == ATTN_NEG_INF ? 0.f : exp2f((sm.m[h] - mx) * scale_log2);
      other_f[h] = mo == ATTN_NEG_INF ? 0.f : exp2f((mo - mx) * scale_log2);
      sm.m[h] = mx;
      sm.l[h] = sm.l[h] * mine_f[h] + lo * other_f[h];
    }
    float oo[ATTN_O];
#pragma unroll
    for (int i = 0; i < ATTN_O; ++i) oo[i] = __ldg(other + i * 128 + tw);
    tma_wgmma_row_scale<ATTN_D>(oo, other_f);
    tma_wgmma_row_scale<ATTN_D>(o, mine_f);
#pragma unroll
    for (int i = 0; i < ATTN_O; ++i) o[i] += oo[i];
  }
  attn_epilogue<false>(o, sm, nullptr, out, lse, u.bh, u.m0 + c * 64, Sq, tw);
}
#endif

extern "C" __global__ void TMA_PLAN_ATTN_LAUNCH_BOUNDS attn(const __grid_constant__ CUtensorMap mapQ,
                                                          const __grid_constant__ CUtensorMap mapK,
                                                          const __grid_constant__ CUtensorMap mapV,
                                                          const __grid_constant__ CUtensorMap mapO, void* out,
                                                          float* __restrict__ lse, int H, int Hkv, int Sq, int Sk,
                                                          float scale_log2, int units, int qblocks,
                                                          float* __restrict__ part,
                                                          const int4* __restrict__ items,
                                                          const int* __restrict__ nitems, int items_stride) {
  extern __shared__ __align__(16) unsigned char attn_raw[];
  unsigned char* const base = P::base(attn_raw);
  const QP qp = P::q(base);
  const KP kp = P::k(base);
  const VP vp = P::v(base);
  if (threadIdx.x == 0u) {
    tma_prefetch_tensormap(&mapQ);
    tma_prefetch_tensormap(&mapK);
    tma_prefetch_tensormap(&mapV);
    tma_prefetch_tensormap(&mapO);
  }
  qp.init();
  kp.init();
  vp.init();
  // Units blockIdx.x, + gridDim.x, ... (or the host's table: ATTN_TABLE): one each when the
  // grid is every unit, several in a persistent grid (Q of the next unit then loads while this
  // one's last blocks run; ATTN_O_IN_Q: once its epilogue's stores have read Q's stage).

#if ATTN_KIND == 0
  // One warpgroup: thread 0 loads Q and keeps K and V STAGES - 1 blocks ahead; all 128 threads
  // compute, each block's GEMMs waited for before the softmax.
  const unsigned tw = threadIdx.x;
  const int c = 0;
  attn_producer prod;
#else
  if (R::is_producer()) {
    R::producer_setmaxnreg();
    if (threadIdx.x == 0u) {
      attn_producer prod;
#if ATTN_TABLE
      const int n_items = __ldg(nitems + blockIdx.x);
      for (int r = 0; r < n_items; ++r) {
        const attn_item it = attn_item_at(items, items_stride, r);
#else
      for (int ui = (int)blockIdx.x; ui < units; ui += (int)gridDim.x) {
        const attn_item it{ui, 0, -1, -1};
#endif
        const attn_unit u(it.unit, H, Hkv, qblocks, Sk);
        prod.q(qp, &mapQ, u);
        const int je = it.je < 0 ? u.nblocks : it.je;
        // V in the order the consumers' passes read it: ATTN_FOLD, block j's pass reads block
        // j - 1's (the first block's pass its own, for the P V of zeros) and the last P V the
        // last block's, so the first block's V comes twice.
        for (int j = it.jb; j < je; ++j) {
          prod.k(kp, &mapK, u, j);
          prod.v(vp, &mapV, u, ATTN_FOLD ? max(j - 1, it.jb) : j);
        }
        if (ATTN_FOLD && it.jb < je) prod.v(vp, &mapV, u, je - 1);
      }
    }
    qp.finish();
    return;
  }
  R::consumer_setmaxnreg();
  const int c = (int)R::consumer_index_sync();
  const unsigned tw = threadIdx.x % 128u;
#endif
  QP::state qs;
  KP::state ks;
  VP::state vs;
#if ATTN_O_TMA
  unsigned char* staging = P::o(base, (unsigned)c);
#else
  unsigned char* staging = nullptr;  // ATTN_O_IN_Q: set per unit, in Q's stage
#endif
  // ATTN_TABLE 0: the round-robin walk; the host's table is not read (nor, without
  // ATTN_SPLIT, is attn_merge compiled).
#if ATTN_TABLE
  const int n_items = __ldg(nitems + blockIdx.x);
  const bool any_item = n_items > 0;
#else
  const bool any_item = (int)blockIdx.x < units;
#endif
#if ATTN_KIND == 2 || ATTN_KIND == 3
  // Ping-pong: the consumers take turns in order 0, 1, .., ATTN_NC - 1, 0, .. over all of the
  // CTA's items, not item by item: the last consumer arrives on consumer 0's first turn once, up
  // front, then after each of its turns but the very last (every sync has exactly one arrive).
  // So consumer 0 starts the next unit's QK^T while the others finish this one's softmax, last
  // P V and epilogue, rather than after them.
  if (c == ATTN_NC - 1 && any_item) R::arrive_turn(0);
#else
  (void)any_item;
#endif
#if ATTN_TABLE
  for (int r = 0; r < n_items; ++r) {
    const attn_item it = attn_item_at(items, items_stride, r);
    const bool last_item = r + 1 == n_items;
#else
  for (int ui = (int)blockIdx.x; ui < units; ui += (int)gridDim.x) {
    const attn_item it{ui, 0, -1, -1};
    const bool last_item = ui + (int)gridDim.x >= units;
#endif
    const attn_unit u(it.unit, H, Hkv, qblocks, Sk);
    // This item's key blocks [jb, nb) (nb: the item's end, not always the unit's).
    const int jb = it.jb;
    const int nb = it.je < 0 ? u.nblocks : it.je;
    const int row0 = u.m0 + c * 64;
#if ATTN_KIND == 0
    if (tw == 0u) {
      prod.q(qp, &mapQ, u);
      for (int j = jb; j < jb + (int)KP::STAGES - 1 && j < nb; ++j) {
        prod.k(kp, &mapK, u, j);
        prod.v(vp, &mapV, u, j);
      }
    }
#endif
    attn_softmax sm(scale_log2);
    float o[ATTN_O];
#pragma unroll
    for (int i = 0; i < ATTN_O; ++i) o[i] = 0.f;
    float s[ATTN_S];
    float corr[2];
    qp.wait(qs);
    const unsigned char* q = qp.smem_q(qs);

#if ATTN_KIND == 2 || ATTN_KIND == 3
    // Whether this consumer hands the turn on after the item's last block: all but the last
    // consumer on the CTA's last item (its arrive would have no sync).
    const bool hand_on = c != ATTN_NC - 1 || !last_item;
#else
    (void)last_item;
#endif

#if ATTN_KIND <= 2
    for (int j = jb; j < nb; ++j) {
#if ATTN_KIND == 0
      const int next = j + (int)KP::STAGES - 1;
      if (tw == 0u && next < nb) {
        prod.k(kp, &mapK, u, next);
        prod.v(vp, &mapV, u, next);
      }
#endif
      kp.wait(ks);
#if ATTN_KIND == 2
      R::sync_turn(c);
#endif
      tma_wgmma_fence();
      attn_qk(s, q, kp.smem_k(ks), c);
      tma_wgmma_commit_group();
#if ATTN_KIND == 2
      if (hand_on || j + 1 < nb) R::arrive_turn((c + 1) % ATTN_NC);
#endif
      tma_wgmma_wait_group<0>();
      ATTN_RELEASE(kp, ks);
      ++ks;
      if (sm.step(s, row0, j * ATTN_BN, Sk, attn_masked(j, row0, Sk), corr, tw)) tma_wgmma_row_scale<ATTN_D>(o, corr);
      attn_pfrag p[ATTN_PK];
      tma_wgmma_acc_to_a<ATTN_BN>(s, p);
      vp.wait(vs);
      tma_wgmma_fence();
      attn_pv(o, p, vp.smem_v(vs));
      tma_wgmma_commit_group();
      tma_wgmma_wait_group<0>();
      ATTN_RELEASE(vp, vs);
      ++vs;
    }
    ATTN_RELEASE(qp, qs);
    ++qs;
#else
    // Overlap: block j's QK^T and block j-1's P V are issued together (one turn), and block j's
    // softmax runs while P V is in flight (ATTN_WAIT_LATE: else ptxas moves the wait for P V up
    // to the row max); O is rescaled once P V has landed. Block 0 (QK^T
    // alone) and the last P V are peeled off, so every wgmma in the loop is issued on every
    // pass: a conditional one makes ptxas serialize them all (C7520, "WG.AR in divergent path").
    // ATTN_FOLD (Config::fold): block 0 runs the loop too, its "P V of block -1" a P of zeros
    // times its own V (loaded twice by the producer): one softmax in the kernel instead of two,
    // about a fifth less NVRTC time, for one P V more an item (BENCHMARKS.md, "The first block
    // through the loop").
    attn_pfrag p[ATTN_PK];
#if ATTN_P2
    // P double-buffered: block j's softmax packs into `next` while block j - 1's P V still reads
    // `cur`, before the wait for that P V rather than after it (measured faster at head dim 256
    // only, BENCHMARKS.md).
    attn_pfrag p2[ATTN_PK];
#endif
#if ATTN_FOLD
    // Block 0's pass reads zeros as its P (ATTN_P2: whichever buffer its pass reads first, as
    // below); Q's descriptors are made once, so that the loop does not make them again.
#pragma unroll
    for (int k = 0; k < ATTN_PK; ++k) p[k] = attn_pfrag{{0u, 0u, 0u, 0u}};
#if ATTN_P2
    const bool odd = (nb - jb) % 2 == 1;
#pragma unroll
    for (int k = 0; k < ATTN_PK; ++k) p2[k] = p[k];
#endif
    const tma_wgmma_a_descs<TQ> qd(q, (unsigned)c);
#else
    kp.wait(ks);
    R::sync_turn(c);
    tma_wgmma_fence();
    attn_qk(s, q, kp.smem_k(ks), c);
    tma_wgmma_commit_group();
    if (hand_on || nb > jb + 1) R::arrive_turn((c + 1) % ATTN_NC);
    tma_wgmma_wait_group<0>();
    ATTN_RELEASE(kp, ks);
    ++ks;
    // Q goes back with the item's last QK^T done, so the next unit's Q loads under this one's
    // last softmax and P V (ATTN_O_IN_Q: after the epilogue's store has read O from it).
#if !ATTN_O_IN_Q
    if (nb == jb + 1) ATTN_RELEASE(qp, qs);
#endif
    sm.step(s, row0, jb * ATTN_BN, Sk, attn_masked(jb, row0, Sk), corr, tw);  // O is 0: nothing to rescale
    tma_wgmma_acc_to_a<ATTN_BN>(s, p);
#if ATTN_P2
    // An odd count of blocks after block 0 starts at a pass's second half, which reads p2, so
    // every pass ends with P in p (the copy is outside the loop, before any P V reads p2).
    const bool odd = (nb - jb - 1) % 2 == 1;
    if (odd) {
#pragma unroll
      for (int k = 0; k < ATTN_PK; ++k) p2[k] = p[k];
    }
#endif
#endif
    // Key block j >= 1 (ATTN_FOLD: j >= 0): its QK^T and block j - 1's P V (from cur) in one
    // turn, its softmax while P V is in flight, then O rescaled once P V has landed; its P into
    // next (ATTN_P2: the other buffer, packed before that P V has landed; else cur again, after).
    auto block = [&](int j, attn_pfrag(&cur)[ATTN_PK], attn_pfrag(&next)[ATTN_PK]) {
      kp.wait(ks);
      vp.wait(vs);
      R::sync_turn(c);
      tma_wgmma_fence();
#if ATTN_FOLD
      attn_qk(s, qd, kp.smem_k(ks));
#else
      attn_qk(s, q, kp.smem_k(ks), c);
#endif
      tma_wgmma_commit_group();
      attn_pv(o, cur, vp.smem_v(vs));
      tma_wgmma_commit_group();
      if (hand_on || j + 1 < nb) R::arrive_turn((c + 1) % ATTN_NC);
      tma_wgmma_wait_group<1>();  // QK^T of block j
      ATTN_RELEASE(kp, ks);
      ++ks;
#if !ATTN_O_IN_Q
      if (j + 1 == nb) ATTN_RELEASE(qp, qs);
#endif
      const bool rescale = sm.step(s, row0, j * ATTN_BN, Sk, attn_masked(j, row0, Sk), corr, tw);
#if ATTN_P2
      tma_wgmma_acc_to_a<ATTN_BN>(s, next);
#endif
#if ATTN_WAIT_LATE
      // P V of block j - 1, waited for once the softmax is done (the sums need every
      // exponential): else ptxas waits right after the row max, and the softmax never runs
      // under the P V.
      tma_wgmma_wait_group_after<0>(sm.l[0] + sm.l[1]);
#else
      tma_wgmma_wait_group<0>();  // P V of block j - 1
#endif
      // cur stays live until here: else ptxas may give next cur's registers (a P V in flight
      // reads them).
#pragma unroll
      for (int k = 0; k < ATTN_PK; ++k) tma_wgmma_fence_operand(cur[k]);
      ATTN_RELEASE(vp, vs);
      ++vs;
      if (rescale) tma_wgmma_row_scale<ATTN_D>(o, corr);
#if !ATTN_P2
      tma_wgmma_acc_to_a<ATTN_BN>(s, next);
#endif
    };
    int j = ATTN_FOLD ? jb : jb + 1;
#if ATTN_P2
    // Two blocks a pass, the buffers trading places; an odd count enters at the second half
    // (a loop with two entries: ptxas copes, no wgmma serialized). So the loop is the only
    // copy of the two blocks: a wgmma under an `if`, or a copy into a buffer inside the loop,
    // makes ptxas serialize every wgmma, and a loop of its own for an odd last block was a
    // third copy of the block (2.3 s of cold compile on the GPU machine against 1.1 s).
    if (odd) goto second_half;
    while (j < nb) {
      block(j, p, p2);
      ++j;
    second_half:
      block(j, p2, p);
      ++j;
    }
#else
    for (; j < nb; ++j) block(j, p, p);
#endif
#if !ATTN_O_IN_Q
    ++qs;  // released after the last QK^T
#endif
    vp.wait(vs);
    tma_wgmma_fence();
    attn_pv(o, p, vp.smem_v(vs));
    tma_wgmma_commit_group();
    tma_wgmma_wait_group<0>();
    ATTN_RELEASE(vp, vs);
    ++vs;
#endif

#if ATTN_SPLIT
    if (it.piece >= 0) {
      attn_partial(o, sm, part, it.piece & 1, c, tw);
      continue;
    }
#endif
#if ATTN_O_TMA
    // The staging is free once the previous unit's store has read it.
    if (tw == 0u) tma_store_async_wait<0>();
#if ATTN_KIND == 0
    __syncthreads();
#else
    R::sync_epi((unsigned)c);
#endif
#endif
#if ATTN_O_IN_Q
    // This consumer's rows of Q's stage: its last QK^T has read them (waited for), and the
    // other consumers' QK^Ts read only their own rows.
    staging = const_cast<unsigned char*>(q) + (unsigned)c * (64u * TQ::BOX_BYTES / ATTN_BM);
#endif
    attn_epilogue(o, sm, staging, out, lse, u.bh, row0, Sq, tw);
#if ATTN_O_TMA || ATTN_O_IN_Q
#if ATTN_KIND == 0
    __syncthreads();
#else
    R::sync_epi((unsigned)c);
#endif
    if (tw == 0u) {
#if ATTN_O_IN_Q
      // Q's stage goes back once the store has read O from it: one release a consumer (Q's
      // pipeline counts a thread each), and the next unit's Q loads into it.
      qp.release_after_store(qs, TO::store_committed(&mapO, staging, {.bh = u.bh, .s = row0, .d = 0}));
#else
      TO::store(&mapO, staging, {.bh = u.bh, .s = row0, .d = 0});
      tma_store_commit_group();
#endif
    }
#if ATTN_O_IN_Q
    ++qs;
#endif
#endif
  }
#if ATTN_O_TMA || ATTN_O_IN_Q
  if (tw == 0u) tma_store_async_wait_complete<0>();
#else
  (void)mapO;
#endif
  qp.finish();
}
