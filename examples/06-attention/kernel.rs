//! One attention configuration -> its tiles (Q, K, V, O), pipelines (Q once, K and V on
//! separate barriers), warp roles and kernel plan (tma's checked declarations) -> one CUDA
//! source (tma's generated helpers + attn.cu), compiled by tma's runtime.

use std::fmt;

use tma::pipeline::{ClusterAxis, Consumers, PipelineSpec, ValidPipeline, WarpRoles};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Source};
use tma::spec::{Extent, Major, Operand, WgmmaType};
use tma::wgmma::registers::Ex2Poly;
use tma::{validate, Arch, DType, Swizzle, TileSpec, ValidSpec};

pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The kernel body every configuration shares.
pub const ATTN_CU: &str = include_str!("attn.cu");

/// Element type of Q, K, V and O (fp32 accumulation, f32 log-sum-exp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum In {
    BF16,
    F16,
}

impl In {
    pub fn name(self) -> &'static str {
        match self {
            In::BF16 => "bf16",
            In::F16 => "f16",
        }
    }
    pub fn dtype(self) -> DType {
        match self {
            In::BF16 => DType::BF16,
            In::F16 => DType::F16,
        }
    }
    pub fn parse(s: &str) -> Option<In> {
        match s {
            "bf16" => Some(In::BF16),
            "f16" => Some(In::F16),
            _ => None,
        }
    }
    /// The unit roundoff of the type (half an ulp at 1): what one rounding may move a value by,
    /// relative to it.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            In::BF16 => 2f64.powi(-8),
            In::F16 => 2f64.powi(-11),
        }
    }
    pub fn to_bits(self, v: f32) -> u16 {
        match self {
            In::BF16 => tma::half::bf16::from_f32(v).to_bits(),
            In::F16 => tma::half::f16::from_f32(v).to_bits(),
        }
    }
    pub fn value_of(self, b: u16) -> f32 {
        match self {
            In::BF16 => tma::half::bf16::from_bits(b).to_f32(),
            In::F16 => tma::half::f16::from_bits(b).to_f32(),
        }
    }
}

/// How the kernel is organised: the ladder of features, each step one more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// One warpgroup, 64 query rows: thread 0 keeps the K/V loads ahead, every thread runs
    /// both GEMMs and the softmax.
    Wg1,
    /// A producer warpgroup and `Config::nc` consumer warpgroups (64 query rows each),
    /// setmaxnreg.
    Ws,
    /// Ws and ping-pong: the consumers take turns issuing their GEMMs (named barriers), so
    /// one's softmax runs under the other's GEMMs.
    PingPong,
    /// PingPong and, inside a warpgroup, QK^T of the next block issued before the softmax of
    /// this one.
    Overlap,
}

impl Kind {
    fn code(self) -> u32 {
        match self {
            Kind::Wg1 => 0,
            Kind::Ws => 1,
            Kind::PingPong => 2,
            Kind::Overlap => 3,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Wg1 => "wg1",
            Kind::Ws => "ws",
            Kind::PingPong => "pp",
            Kind::Overlap => "ov",
        }
    }
}

/// One configuration: everything that changes the compiled kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub kind: Kind,
    pub input: In,
    /// Head dim: 64, 128 or 256.
    pub d: u32,
    /// Key/value rows per block (the N of QK^T, the K of P V).
    pub bn: u32,
    /// K and V stages.
    pub stages: u32,
    pub causal: bool,
    /// A grid of as many CTAs as fit the GPU at once, each walking work units (query block,
    /// batch x head), the next unit's Q loaded under this one's last blocks (`OStore::InQ`:
    /// once its epilogue has stored O from Q's stage); else one CTA a unit. Causal units differ
    /// in key blocks, so a causal grid walks a table the host balances (`WorkPlan::balanced`)
    /// rather than round-robin.
    pub persistent: bool,
    /// (`persistent`, not causal, `Kind::Overlap`) The units past the last full round of the
    /// grid (units % CTAs of them) are cut by key blocks into nearly equal ranges over up to
    /// every CTA, so that no CTA runs one unit more than the others while the rest idle: each
    /// CTA's work is a table the host plans (`WorkPlan::split_tail`), and a second kernel
    /// (`attn_merge`) merges a cut unit's pieces (their O, max and sum) into its O and LSE.
    pub split_tail: bool,
    /// (not causal, no `split_tail`, a producer warpgroup, head dim 128 or 256) Units in pairs
    /// on 2-CTA clusters: the two CTAs run adjacent query blocks of one head in step, each
    /// loading half of every K and V tile and multicasting it to both, so the K and V reads
    /// from L2 halve (as FlashAttention-3 does at head dim >= 128). A head's query blocks are
    /// rounded up to an even count: the extra block's rows lie past Sq (zeros in, its stores
    /// clipped). On the H100 1.5 % slower than the pick at 128 (the pair waits on each other's
    /// releases with two stages; BENCHMARKS.md): not picked.
    pub cluster: bool,
    /// How O leaves the consumers: `OStore`.
    pub o: OStore,
    /// Stages released by one thread per consumer warpgroup (after wgmma.wait_group) instead
    /// of one arrival per warp.
    pub release_one: bool,
    /// Of every 8 exponentials of the softmax, how many tma's polynomial raises on the FMA
    /// pipe (`tma_wgmma_row_exp2_poly`) instead of MUFU: 0 to 8.
    pub poly: u32,
    /// The running max moves only when a block's passes it by more than `HEADROOM_LOG2` (8)
    /// scaled log2 units, i.e. its weights would grow past 2^8 (`tma_wgmma_row_max_lazy`,
    /// FlashAttention-4's lazy rescale): a warp whose rows all stay skips rescaling O, which
    /// is most blocks after the first few.
    pub lazy: bool,
    /// (`Kind::Overlap`) P in two register buffers: a block's softmax packs its P while the
    /// block before's P V still reads the other (BN / 4 registers more a thread).
    pub p2: bool,
    /// (`Kind::Overlap`) The wait for the block before's P V after the softmax
    /// (`tma_wgmma_wait_group_after` on the row sums): else ptxas hoists it above the
    /// exponentials, right after the row max, and the softmax never runs under the P V.
    pub wait_late: bool,
    /// (`Kind::Overlap`) The first key block through the loop too, its pass's P V a P of zeros
    /// times its own V (loaded twice), rather than peeled off before the loop: one copy of
    /// the softmax in the kernel instead of two, about a fifth less NVRTC time (cold compile)
    /// for one P V more a work item (a unit, or a piece of a split one) and the loop's scheduling (head dim 128: 0.5-3 % slower at 4k
    /// and 16k keys on the H100, BENCHMARKS.md, "The first block through the loop"). Not picked.
    pub fold: bool,
    /// Consumer warpgroups of the kinds after `Wg1`: 2 (64 query rows each), or 3 as
    /// FlashAttention-3 at head dim 64 (a third warpgroup's GEMMs under two softmaxes; 160
    /// registers a consumer).
    pub nc: u32,
}

/// How a consumer's O (64 x D) reaches global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OStore {
    /// Through a staging copy per consumer beside Q and the stages (consumers x 64 x D x 2
    /// bytes) and one TMA store.
    Staging,
    /// (`Kind::Overlap`, no `split_tail`) Through the consumer's own rows of Q's stage, which
    /// its last QK^T has finished reading, and one TMA store; Q goes back to the producer once
    /// that store has read it (not after the last QK^T), so the next unit's Q loads later.
    /// For head dim 256, where no staging fits beside Q and the stages: each thread storing
    /// its 64 pairs to global memory (`Direct`) cost 8.6 us a unit boundary on the H100
    /// (3.7 key blocks; BENCHMARKS.md).
    InQ,
    /// Each thread stores its pairs to global memory (clipped).
    Direct,
}

/// A key block that beats `Config::best`'s up to `max_keys` keys (rows checked in order).
pub struct ShortBlock {
    pub d: u32,
    pub causal: bool,
    pub max_keys: usize,
    pub bn: u32,
    pub stages: u32,
    /// Consumer warpgroups (`Config::nc`).
    pub nc: u32,
}

/// Measured on the H100 (BENCHMARKS.md, "Short sequences" and "Three consumers at head dim
/// 64"): up to 2k keys at head dim 128, 128-row key blocks divide the lengths where `best`'s
/// 144 pads 512-2048 keys by 3-13 % (1024 = 7 x 144 + 16: the last block is 89 % empty); at
/// head dim 64 causal up to 1k keys, two consumers of 128 query rows beat three of 192 (a
/// short head has few 192-row units: 257 against 240-243 TFLOP/s at 1k).
pub const SHORT_BLOCKS: [ShortBlock; 2] = [
    ShortBlock {
        d: 64,
        causal: true,
        max_keys: 1024,
        bn: 128,
        stages: 3,
        nc: 2,
    },
    ShortBlock {
        d: 128,
        causal: false,
        max_keys: 2048,
        bn: 128,
        stages: 2,
        nc: 2,
    },
];

/// `Config::lazy`: how far (log2, scaled) a block's row max may pass the running one before it
/// moves: P's weights stay <= 2^8, which bf16 and f16 round as well as weights <= 1 (relative
/// rounding); the sums and O are f32.
pub const HEADROOM_LOG2: f32 = 8.0;

/// `Config::split_tail`: CTAs a cut unit is spread over, about (`WorkPlan::split_tail` uses at
/// most this many CTAs a unit on average, so a merge reads few partials: a unit touches at most
/// one more).
pub const TAIL_CTAS_PER_UNIT: usize = 4;
/// `Config::split_tail`: the most pieces a cut unit has room for (attn.cu's table rows).
pub const MAX_PIECES: usize = 8;
const _: () = assert!(MAX_PIECES > TAIL_CTAS_PER_UNIT);

/// Query rows per consumer warpgroup: wgmma's M.
pub const WG_ROWS: u32 = 64;
/// Columns of one 128B-swizzled box row of a 16-bit type.
pub const SPAN: u32 = 64;

impl Config {
    /// The configuration for one head dim, type and key length: the fastest measured on the
    /// H100 (BENCHMARKS.md): a row of `SHORT_BLOCKS` where one applies, else `best`'s.
    pub fn for_keys(input: In, d: u32, causal: bool, keys: usize) -> Config {
        let long = Config::best(input, d, causal);
        SHORT_BLOCKS
            .iter()
            .find(|r| r.d == d && r.causal == causal && keys <= r.max_keys)
            .map_or(long, |r| Config {
                bn: r.bn,
                stages: r.stages,
                nc: r.nc,
                ..long
            })
    }

    /// Every configuration `for_keys` picks for one head dim, type and mask: what the checks
    /// cover (read from the same table, so a new row is checked too).
    pub fn picks(input: In, d: u32, causal: bool) -> Vec<Config> {
        let long = Config::best(input, d, causal);
        let mut v = vec![long];
        for r in SHORT_BLOCKS
            .iter()
            .filter(|r| r.d == d && r.causal == causal)
        {
            let c = Config {
                bn: r.bn,
                stages: r.stages,
                nc: r.nc,
                ..long
            };
            if !v.contains(&c) {
                v.push(c);
            }
        }
        v
    }

    /// The configuration for long sequences (4k keys and up) for one head dim and type: the
    /// fastest measured on the H100 (BENCHMARKS.md). Every pick is a persistent grid: a
    /// unit's first K and V (and, but with `OStore::InQ`, its Q) load under the unit before,
    /// and the consumers' turns run on across units. Causal units differ in key
    /// blocks, and the round-robin walk gave a CTA the same query block of every head (132
    /// CTAs, 4 query blocks a head: 124 key blocks on some CTAs against 31), so causal walks the
    /// host's balanced table (`WorkPlan::balanced`): +39 % at 512 keys, +20 % at 1k, +4-8 % at
    /// 4k, +1 % at 16k over one CTA a unit (head dim 64; 128: +20, +13, +3, +1 %).
    pub fn best(input: In, d: u32, causal: bool) -> Config {
        // Head dim 64: three consumers (192 query rows), as FlashAttention-3: at 64 the
        // softmax of a block takes about as long as its two GEMMs, and a third warpgroup's
        // GEMMs keep the tensor cores busy under the other two's (+3-16 % over two consumers
        // at 2k-8k, even to +7 % at 16k, H100; at 128 the third consumer's registers allow
        // only 80-row key blocks, no faster).
        //
        // The softmax under the P V (`wait_late`) at head dim 128 (+0.6-1 %) and 256 (+2-3 %);
        // at 64 it loses 3 % (three consumers already keep the tensor cores busy, and the
        // later wait holds a consumer's turn longer). The lazy rescale (`lazy`) at 128 with the
        // late wait: +2 % at 16k, the same at 4k (+-2 %), in seven same-call A/Bs on five
        // machines (before the late wait it lost 3 %); with P in two buffers (`p2`) at 256:
        // +4-6 % there, no faster at 64 and 128 (BENCHMARKS.md, "The softmax under P V" and
        // "Where 4k loses to 16k"). The split tail (`split_tail`) at 64 not causal: +5 % at 2k
        // and 4k, +1-3 % at 8k and 16k; at 128 and 256 a piece's start and end cost what the
        // tail gave back (BENCHMARKS.md, "Where 4k loses to 16k").
        let (bn, stages, nc, wait_late, lazy, p2) = match (d, causal) {
            (64, false) => (128, 3, 3, false, false, false),
            (64, true) => (128, 2, 3, false, false, false),
            (128, false) => (144, 2, 2, true, true, false),
            (128, true) => (128, 2, 2, true, false, false),
            // 80-row key blocks fit beside Q's 64 KB only by the plan's exact slack (227 KB).
            _ => (80, 2, 2, true, true, true),
        };
        Config {
            kind: Kind::Overlap,
            input,
            d,
            bn,
            stages,
            causal,
            persistent: true,
            split_tail: d == 64 && !causal,
            cluster: false,
            // At 256 no staging fits beside Q and the K/V stages: O is staged in Q's rows
            // (+15 % at 512 keys, +2-8 % from 1k to 16k over each thread storing its pairs,
            // H100, one call; at 64 and 128 the later Q load costs more than it saves: -3 to
            // -23 %, BENCHMARKS.md).
            o: match d {
                ..=128 => OStore::Staging,
                _ => OStore::InQ,
            },
            // One release a consumer warpgroup (after its wgmma.wait_group) rather than one a
            // warp, at head dim 128 not causal: +0.3 % at 4k and +1.1 % at 16k over four
            // same-call rounds on the H100; the same or slower at 64, 256 and causal 128
            // (BENCHMARKS.md, "One release a warpgroup").
            release_one: d == 128 && !causal,
            poly: 0,
            lazy,
            p2,
            wait_late,
            fold: false,
            nc,
        }
    }

    /// The ladder of features at one head dim (each step one more).
    pub fn ladder(input: In, d: u32, causal: bool) -> Vec<(&'static str, Config)> {
        let best = Config::best(input, d, causal);
        // O staged in Q's rows (head dim 256's pick) is the ladder's last step: the steps
        // before it store O directly.
        let a4 = Config {
            persistent: false,
            split_tail: false,
            cluster: false,
            release_one: false,
            lazy: false,
            p2: false,
            wait_late: false,
            o: match best.o {
                OStore::InQ => OStore::Direct,
                o => o,
            },
            ..best
        };
        let a7 = Config {
            persistent: true,
            wait_late: true,
            lazy: true,
            p2: true,
            ..a4
        };
        let mut steps = vec![
            (
                "A1 one warpgroup",
                Config {
                    kind: Kind::Wg1,
                    // One consumer whatever `best` has: named without `_c3`.
                    nc: 2,
                    ..a4
                },
            ),
            (
                "A2 + producer warpgroup, consumers, setmaxnreg",
                Config {
                    kind: Kind::Ws,
                    ..a4
                },
            ),
            (
                "A3 + ping-pong consumers",
                Config {
                    kind: Kind::PingPong,
                    ..a4
                },
            ),
            ("A4 + QK^T of the next block under the softmax", a4),
            (
                "A5 + persistent CTAs, the next Q under the last blocks",
                Config {
                    persistent: true,
                    ..a4
                },
            ),
            (
                "A6 + the softmax under P V (its wait after the softmax)",
                Config {
                    persistent: true,
                    wait_late: true,
                    ..a4
                },
            ),
            ("A7 + lazy rescale, P in two buffers", a7),
        ];
        if best.o == OStore::InQ {
            steps.push((
                "A8 + O staged in Q's rows, one TMA store",
                Config { o: best.o, ..a7 },
            ));
        }
        steps
    }

    /// The relative error the kernel's exponentials may add to a weight beyond `ex2.approx`'s
    /// few ulps: tma's polynomial's bound when part of P is raised by it (`poly`), else 0.
    pub fn exp_rel_error(&self) -> f64 {
        match WgmmaType::of(self.input.dtype()) {
            Some(t) if self.poly > 0 => Ex2Poly::for_type(t).max_rel_error(),
            _ => 0.0,
        }
    }

    /// Consumer warpgroups.
    pub fn consumers(&self) -> u32 {
        match self.kind {
            Kind::Wg1 => 1,
            _ => self.nc,
        }
    }
    /// Query rows per CTA.
    pub fn bm(&self) -> u32 {
        WG_ROWS * self.consumers()
    }

    /// CTAs of a cluster: 2 with `cluster`, else 1.
    pub fn cluster_ctas(&self) -> u32 {
        if self.cluster {
            2
        } else {
            1
        }
    }

    /// Whether attn walks a table the host plans (`WorkPlan`) rather than round-robin: the split
    /// tail's, or a causal persistent grid's balanced walk.
    pub fn walks_table(&self) -> bool {
        self.split_tail || (self.persistent && self.causal)
    }

    /// Key blocks of work unit `u` (attn.cu's `attn_unit`): under causal each head's last
    /// query block comes first and sees the keys up to its last row. Only the balanced walk's
    /// weights come from it: a count off from the kernel's would cost speed, not correctness
    /// (the kernel counts its own blocks).
    pub fn unit_blocks(&self, u: usize, qblocks: usize, sk: usize) -> usize {
        let mb = if self.causal {
            qblocks - 1 - u % qblocks
        } else {
            u % qblocks
        };
        let bm = self.bm() as usize;
        let last = if self.causal {
            sk.min((mb + 1) * bm)
        } else {
            sk
        };
        last.div_ceil(self.bn as usize)
    }

    /// Work units of one head at `sq` query rows: its query blocks, a multiple of the cluster's
    /// CTAs (the CTAs of a cluster on one head). The kernel takes it as an argument.
    pub fn query_blocks(&self, sq: usize) -> usize {
        let ctas = self.cluster_ctas() as usize;
        sq.div_ceil(self.bm() as usize).div_ceil(ctas) * ctas
    }

    /// `ov_d128_n128_s2_p_bf16_causal` (`_p`: persistent, `_st`: the last units split by key
    /// blocks, `_x2`: units in pairs on 2-CTA clusters, `_od`: O stored directly, `_r1`:
    /// one release per warpgroup, `_e2`: 2 of every 8 exponentials on the polynomial, `_lz`:
    /// the lazy rescale, `_db`: P double-buffered, `_wl`: P V waited for after the softmax,
    /// `_fo`: the first block through the loop, `_c3`: three consumer warpgroups).
    pub fn name(&self) -> String {
        format!(
            "{}_d{}_n{}_s{}{}{}{}{}{}{}{}{}{}{}{}_{}{}",
            self.kind.name(),
            self.d,
            self.bn,
            self.stages,
            if self.persistent { "_p" } else { "" },
            if self.split_tail { "_st" } else { "" },
            if self.cluster { "_x2" } else { "" },
            match self.o {
                OStore::Staging => "",
                OStore::InQ => "_oq",
                OStore::Direct => "_od",
            },
            if self.release_one { "_r1" } else { "" },
            if self.poly > 0 {
                format!("_e{}", self.poly)
            } else {
                String::new()
            },
            if self.lazy { "_lz" } else { "" },
            if self.p2 { "_db" } else { "" },
            if self.wait_late { "_wl" } else { "" },
            if self.fold { "_fo" } else { "" },
            if self.consumers() == 3 { "_c3" } else { "" },
            self.input.name(),
            if self.causal { "_causal" } else { "" }
        )
    }

    pub fn parse(s: &str) -> Option<Config> {
        let mut p: Vec<&str> = s.split('_').collect();
        // The optional pieces after `s<stages>`, in `name`'s order: each taken when present.
        fn take(p: &mut Vec<&str>, piece: &str) -> bool {
            let here = p.get(4) == Some(&piece);
            if here {
                p.remove(4);
            }
            here
        }
        let persistent = take(&mut p, "p");
        let split_tail = take(&mut p, "st");
        let cluster = take(&mut p, "x2");
        let o = if take(&mut p, "od") {
            OStore::Direct
        } else if take(&mut p, "oq") {
            OStore::InQ
        } else {
            OStore::Staging
        };
        let release_one = take(&mut p, "r1");
        let poly = match p.get(4).and_then(|e| e.strip_prefix('e')) {
            Some(n) => {
                let n: u32 = n.parse().ok()?;
                p.remove(4);
                n
            }
            None => 0,
        };
        if poly > 8 {
            return None;
        }
        let lazy = take(&mut p, "lz");
        let p2 = take(&mut p, "db");
        let wait_late = take(&mut p, "wl");
        let fold = take(&mut p, "fo");
        let nc = if take(&mut p, "c3") { 3 } else { 2 };
        let kind = match *p.first()? {
            "wg1" => Kind::Wg1,
            "ws" => Kind::Ws,
            "pp" => Kind::PingPong,
            "ov" => Kind::Overlap,
            _ => return None,
        };
        let causal = match p.get(5) {
            None => false,
            Some(&"causal") => true,
            Some(_) => return None,
        };
        Some(Config {
            kind,
            d: p.get(1)?.strip_prefix('d')?.parse().ok()?,
            bn: p.get(2)?.strip_prefix('n')?.parse().ok()?,
            stages: p.get(3)?.strip_prefix('s')?.parse().ok()?,
            input: In::parse(p.get(4)?)?,
            causal,
            persistent,
            split_tail,
            cluster,
            o,
            release_one,
            poly,
            lazy,
            p2,
            wait_late,
            fold,
            nc,
        })
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A configuration's checked declarations, from which both the source's shared-memory layout
/// (`struct tma_plan_attn`) and the launch come.
#[derive(Clone)]
pub struct Plan {
    pub config: Config,
    pub q: ValidSpec,
    pub k: ValidSpec,
    pub v: ValidSpec,
    pub o: ValidSpec,
    pub q_pipe: ValidPipeline,
    pub k_pipe: ValidPipeline,
    pub v_pipe: ValidPipeline,
    pub kernel: ValidKernelPlan,
}

fn findings(what: &str, e: impl fmt::Display) -> Box<dyn std::error::Error + Send + Sync> {
    format!("{what}: {e}").into()
}

/// A [batch x heads][seq][head dim] tile of `rows` rows, the head dim in 128-byte boxes.
fn bhsd(name: &str, c: &Config, rows: u32) -> TileSpec {
    TileSpec::new(name, c.input.dtype(), [1, 1, 1], [1, rows, SPAN])
        .global_extents([Extent::Runtime, Extent::Runtime, Extent::Runtime])
        .dim_names(["bh", "s", "d"])
        .swizzle(Swizzle::B128)
        .repeat([1, 1, c.d / SPAN])
}

impl Plan {
    pub fn new(c: Config) -> Res<Plan> {
        if ![64, 128, 256].contains(&c.d) {
            return Err(format!("{c}: head dim {} (64, 128 or 256)", c.d).into());
        }
        if ![2, 3].contains(&c.nc) {
            return Err(format!("{c}: {} consumer warpgroups (2 or 3)", c.nc).into());
        }
        if (c.p2 || c.wait_late) && c.kind != Kind::Overlap {
            return Err(format!(
                "{c}: P in two buffers (_db) and the late wait (_wl) are the overlap kind's (ov_): only it keeps a P V in flight under the softmax"
            )
            .into());
        }
        if c.fold && c.kind != Kind::Overlap {
            return Err(format!(
                "{c}: the first block through the loop (_fo) is the overlap kind's (ov_): only its loop issues a block's QK^T with the P V of the block before"
            )
            .into());
        }
        if c.split_tail && !(c.persistent && !c.causal && c.kind == Kind::Overlap) {
            return Err(format!(
                "{c}: splitting the last units by key blocks (_st) takes a persistent grid (_p), no causal mask (units of one length) and the overlap kind (ov_)"
            )
            .into());
        }
        if c.cluster && (c.causal || c.split_tail || c.kind == Kind::Wg1 || c.d == 64) {
            return Err(format!(
                "{c}: units in pairs on 2-CTA clusters (_x2) take no causal mask (both CTAs walk the same key blocks), no split tail (_st), a producer warpgroup (not wg1_) and head dim 128 or 256 (at 64 a K tile is one box: no half for each CTA)"
            )
            .into());
        }
        if c.o == OStore::InQ && (c.kind != Kind::Overlap || c.split_tail) {
            return Err(format!(
                "{c}: O staged in Q's rows (_oq) takes the overlap kind (ov_) and no split tail (_st): Q goes back after the unit's epilogue, which a piece of a split unit does not run"
            )
            .into());
        }
        let v = |s: TileSpec, what: &str| validate(&s).map_err(|e| findings(what, e));
        // Q: the CTA's query rows, A of S = Q K^T (K = head dim), loaded once per work unit.
        let q = v(bhsd("q", &c, c.bm()).wgmma(Operand::A, Major::K), "tile q")?;
        // K: BN key rows, B of S = Q K^T: N = BN, K = head dim (K-major).
        let k = v(bhsd("k", &c, c.bn).wgmma(Operand::B, Major::K), "tile k")?;
        // V: BN value rows, B of O = P V: N = head dim (contiguous: MN-major), K = BN.
        let vt = v(bhsd("v", &c, c.bn).wgmma(Operand::B, Major::MN), "tile v")?;
        // O: one consumer's 64 rows, stored from its staging by TMA (clipped at the sequence end);
        // staged in Q's rows (`OStore::InQ`), its boxes lie as far apart as Q's (Q's box holds
        // every consumer's rows: a consumer's 64 rows of each box are its staging).
        let o_tile = bhsd("o", &c, WG_ROWS);
        let o_tile = if c.o == OStore::InQ {
            o_tile.smem_stride(u64::from(c.bm() * SPAN))
        } else {
            o_tile
        };
        let o = v(o_tile, "tile o")?;
        let consumers = if c.release_one {
            Consumers::Threads(c.consumers())
        } else {
            Consumers::Warpgroups(c.consumers())
        };
        // `cluster`: K and V multicast along the pair's two CTAs, Q each CTA's own; every
        // pipeline declares the launch's cluster.
        let ctas = c.cluster_ctas();
        let pipe = |name: &str, stages: u32, tile: &ValidSpec, shared: bool, consumers| {
            let p = PipelineSpec::new(name, stages, consumers);
            let p = if shared && c.cluster {
                p.multicast_tile(name, tile, ClusterAxis::X)
            } else {
                p.tile(name, tile)
            };
            p.cluster([ctas, 1, 1])
                .validate()
                .map_err(|e| findings(&format!("pipeline {name}"), e))
        };
        // Q once per work unit; K and V each on their own barriers, so QK^T starts before V lands.
        // `OStore::InQ`: Q is released by each consumer's first thread once its O store has
        // read Q's rows.
        let q_consumers = if c.o == OStore::InQ {
            Consumers::Threads(c.consumers())
        } else {
            consumers
        };
        let q_pipe = pipe("q", 1, &q, false, q_consumers)?;
        let k_pipe = pipe("k", c.stages, &k, true, consumers)?;
        let v_pipe = pipe("v", c.stages, &vt, true, consumers)?;
        // K's and V's rings first, Q's last: each ring's barriers pad its region to the next
        // 1 KB, and Q's is the one whose padding no region follows (at head dim 256 with
        // 80-row key blocks the plan fits 227 KB by 16 bytes).
        let mut kernel = KernelPlan::new("attn")
            .pipeline(&k_pipe)
            .pipeline(&v_pipe)
            .pipeline(&q_pipe);
        kernel = match c.kind {
            Kind::Wg1 => kernel.block_threads(128),
            _ => kernel.roles(
                // Three consumers: 24 + 3 x 160 of the 512 registers a thread the SM holds for
                // 4 warpgroups.
                &WarpRoles::new(
                    "attn",
                    24,
                    c.consumers(),
                    if c.consumers() == 3 { 160 } else { 240 },
                )
                .per_consumer_barrier("epi", 128)
                // Ping-pong: consumer c waits on its `turn` (its 128 threads sync, the 128 of
                // the consumer before it in the order 0, 1, .. arrive) before its GEMMs.
                .per_consumer_barrier("turn", 256)
                .validate()
                .map_err(|e| findings("warp roles", e))?,
            ),
        };
        if c.o == OStore::Staging {
            kernel = kernel.staging("o", &o, c.consumers());
        }
        let kernel = kernel.validate().map_err(|e| findings(&c.name(), e))?;
        Ok(Plan {
            config: c,
            q,
            k,
            v: vt,
            o,
            q_pipe,
            k_pipe,
            v_pipe,
            kernel,
        })
    }

    /// The whole CUDA source: the plan's helpers, the configuration's macros, attn.cu.
    pub fn source(&self) -> Res<Source> {
        let c = &self.config;
        let defines = format!(
            "#define ATTN_D {}\n#define ATTN_BN {}\n#define ATTN_NC {}\n#define ATTN_KIND {}\n#define ATTN_CAUSAL {}\n#define ATTN_O_TMA {}\n#define ATTN_O_IN_Q {}\n#define ATTN_RELEASE_ONE {}\n#define ATTN_POLY {}\n#define ATTN_POLY_DEG {}\n#define ATTN_LAZY {}\n#define ATTN_HEADROOM_LOG2 {:?}f\n#define ATTN_P2 {}\n#define ATTN_WAIT_LATE {}\n#define ATTN_SPLIT {}\n#define ATTN_TABLE {}\n#define ATTN_MAX_PIECES {}\n#define ATTN_CLUSTER {}\n#define ATTN_FOLD {}\n",
            c.d,
            c.bn,
            c.consumers(),
            c.kind.code(),
            u32::from(c.causal),
            u32::from(c.o == OStore::Staging),
            u32::from(c.o == OStore::InQ),
            u32::from(c.release_one),
            c.poly,
            Ex2Poly::for_type(WgmmaType::of(c.input.dtype()).ok_or("P's type: not a wgmma type")?)
                .degree(),
            u32::from(c.lazy),
            HEADROOM_LOG2,
            u32::from(c.p2),
            u32::from(c.wait_late),
            u32::from(c.split_tail),
            u32::from(c.walks_table()),
            MAX_PIECES,
            u32::from(c.cluster),
            u32::from(c.fold),
        );
        let src = KernelSource::new().plan(&self.kernel);
        // O staged in Q's rows: the O tile's helpers without a staging region (`TO`).
        let src = if c.o == OStore::InQ {
            src.tile_as(&self.o, "TO")
        } else {
            src
        };
        let src = src
            .body(&defines)
            .body_at("examples/06-attention/attn.cu", 1, ATTN_CU);
        Source::kernel(&src).map_err(|e| findings("render", e))
    }
}

/// Release code unless ATTN_DEBUG=1 (debug waits: hang detection, device checks).
pub fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
        .debug_waits(std::env::var("ATTN_DEBUG").is_ok_and(|v| v == "1"))
}

/// A persistent grid's table of every CTA's work, planned on the host (attn.cu reads it:
/// `Config::walks_table`): for `Config::split_tail`, the whole units round-robin, then the last
/// `split` units' key blocks cut in nearly equal ranges over about `TAIL_CTAS_PER_UNIT` CTAs a
/// unit (at most one more; so a merge reads few partials), each range one piece a unit it
/// touches; for a causal grid, whole units balanced by their key blocks (`WorkPlan::balanced`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkPlan {
    /// `[cta][r]`: (unit, first key block, end key block, piece), the piece `t * 2 + slot` for a
    /// piece of the t-th split unit (slot 0: the CTA's first piece, 1: its second), -1 for a
    /// whole unit; `stride` rows a CTA.
    pub items: Vec<[i32; 4]>,
    pub stride: usize,
    /// Items of each CTA.
    pub nitems: Vec<i32>,
    /// `[t][0]`: how many pieces the t-th split unit has (0: one CTA runs it whole), then
    /// each one's `cta * 2 + slot`; `MAX_PIECES + 1` a unit.
    pub pieces: Vec<i32>,
}

/// `WorkPlan::balanced`: what a unit's start and end cost, in key blocks (its Q, its first
/// QK^T and last P V with nothing to overlap, its epilogue): 0.86 of a block measured at head
/// dim 128 (BENCHMARKS.md, "Where a unit's boundary goes").
pub const UNIT_BOUNDARY_BLOCKS: usize = 1;

/// A count or index of a `WorkPlan` as the kernel's int, or an error naming it.
fn plan_int(v: usize) -> Res<i32> {
    i32::try_from(v).map_err(|_| format!("work plan: {v} does not fit an int").into())
}

impl WorkPlan {
    /// `units` of `nb` key blocks each on `grid` CTAs, the last `split` of them cut.
    pub fn split_tail(units: usize, grid: usize, nb: usize, split: usize) -> Res<WorkPlan> {
        let i = plan_int;
        if grid == 0 || nb == 0 || split > units || (split > 0 && split >= grid) {
            return Err(format!(
                "split plan: {split} of {units} units on {grid} CTAs, {nb} key blocks a unit (split < CTAs, nb > 0)"
            )
            .into());
        }
        let whole = units - split;
        let mut per_cta: Vec<Vec<[i32; 4]>> = (0..grid)
            .map(|g| {
                (g..whole)
                    .step_by(grid)
                    .map(|u| Ok([i(u)?, 0, -1, -1]))
                    .collect::<Res<Vec<_>>>()
            })
            .collect::<Res<_>>()?;
        let mut pieces = vec![0i32; split * (MAX_PIECES + 1)];
        if split > 0 {
            let tail_ctas = grid.min(split * TAIL_CTAS_PER_UNIT);
            let blocks = split * nb;
            for (g, items) in per_cta.iter_mut().enumerate().take(tail_ctas) {
                let (mut b, end) = (blocks * g / tail_ctas, blocks * (g + 1) / tail_ctas);
                let mut slot = 0;
                while b < end {
                    let (t, jb) = (b / nb, b % nb);
                    let je = nb.min(jb + end - b);
                    let unit = i(whole + t)?;
                    if jb == 0 && je == nb {
                        items.push([unit, 0, -1, -1]);
                    } else {
                        if slot > 1 {
                            return Err(format!(
                                "split plan: CTA {g} has a third item in the tail"
                            )
                            .into());
                        }
                        items.push([unit, i(jb)?, i(je)?, i(t * 2 + slot)?]);
                        let row = &mut pieces[t * (MAX_PIECES + 1)..(t + 1) * (MAX_PIECES + 1)];
                        let n = row[0] as usize;
                        if n >= MAX_PIECES {
                            return Err(format!(
                                "split plan: unit {t} in more than {MAX_PIECES} pieces"
                            )
                            .into());
                        }
                        row[n + 1] = i(g * 2 + slot)?;
                        row[0] += 1;
                    }
                    slot += 1;
                    b += je - jb;
                }
            }
        }
        WorkPlan::from_lists(per_cta, pieces)
    }

    /// Whole units, `blocks[u]` key blocks each, on `grid` CTAs so that every CTA ends at
    /// about the same time: the units in order (a head's query blocks together, so the CTAs
    /// running at once share a few heads' K and V in L2), each to the CTA with the least work
    /// so far (key blocks plus `UNIT_BOUNDARY_BLOCKS` a unit), the lowest index on a tie. The
    /// round-robin walk gives a causal CTA the same query block of every head whenever the grid
    /// is a multiple of a head's query blocks (132 CTAs, 4 blocks a head: 124 key blocks on a
    /// quarter of the CTAs against 31 on another); this is the hardware's own dispatch of a
    /// grid of one CTA a unit, planned ahead.
    pub fn balanced(blocks: &[usize], grid: usize) -> Res<WorkPlan> {
        if grid == 0 {
            return Err("work plan: a grid of 0 CTAs".into());
        }
        let i = plan_int;
        let mut per_cta: Vec<Vec<[i32; 4]>> = vec![Vec::new(); grid];
        let mut least = std::collections::BinaryHeap::new();
        for g in 0..grid {
            least.push(std::cmp::Reverse((0usize, g)));
        }
        for (u, &nb) in blocks.iter().enumerate() {
            let std::cmp::Reverse((load, g)) = least.pop().ok_or("work plan: no CTA")?;
            per_cta[g].push([i(u)?, 0, -1, -1]);
            least.push(std::cmp::Reverse((load + nb + UNIT_BOUNDARY_BLOCKS, g)));
        }
        WorkPlan::from_lists(per_cta, Vec::new())
    }

    /// Each CTA's list of items as one table of `stride` rows a CTA.
    fn from_lists(per_cta: Vec<Vec<[i32; 4]>>, pieces: Vec<i32>) -> Res<WorkPlan> {
        let stride = per_cta.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let nitems = per_cta
            .iter()
            .map(|v| plan_int(v.len()))
            .collect::<Res<Vec<_>>>()?;
        let mut items = vec![[0i32; 4]; per_cta.len() * stride];
        for (g, v) in per_cta.iter().enumerate() {
            items[g * stride..g * stride + v.len()].copy_from_slice(v);
        }
        Ok(WorkPlan {
            items,
            stride,
            nitems,
            pieces,
        })
    }
}
