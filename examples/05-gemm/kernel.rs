//! One GEMM configuration -> its tiles, pipeline and warp roles (tma's checked declarations)
//! -> one CUDA source (tma's generated helpers + kernel.cu), compiled by tma's runtime.

use std::fmt;

use tma::pipeline::{ClusterAxis, Consumers, PipelineSpec, ValidPipeline, WarpRoles, WorkQueue};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Source};
use tma::spec::{Extent, L2Promotion, Major, Operand};
use tma::{
    validate, validate_im2col, Arch, DType, Im2colSpec, Swizzle, TileSpec, ValidIm2col, ValidSpec,
};

pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The kernel body every configuration shares.
pub const KERNEL_CU: &str = include_str!("kernel.cu");

/// Input element type (A and B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum In {
    BF16,
    F16,
}

/// Output element type (D).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Out {
    BF16,
    F16,
    F32,
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
}

impl Out {
    pub fn name(self) -> &'static str {
        match self {
            Out::BF16 => "bf16",
            Out::F16 => "f16",
            Out::F32 => "f32",
        }
    }
    pub fn dtype(self) -> DType {
        match self {
            Out::BF16 => DType::BF16,
            Out::F16 => DType::F16,
            Out::F32 => DType::F32,
        }
    }
    pub fn bytes(self) -> u64 {
        match self {
            Out::F32 => 4,
            _ => 2,
        }
    }
    /// The output type matching the inputs (bf16 -> bf16, f16 -> f16).
    pub fn of(i: In) -> Out {
        match i {
            In::BF16 => Out::BF16,
            In::F16 => Out::F16,
        }
    }
    fn code(self) -> u32 {
        match self {
            Out::BF16 => 0,
            Out::F16 => 1,
            Out::F32 => 2,
        }
    }
}

/// How the kernel is organised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// One warpgroup: thread 0 loads ahead, everyone runs wgmma and waits each k-block.
    Simple,
    /// A producer warpgroup and `consumers` consumer warpgroups (2 or 3), each BM / consumers
    /// rows of the tile (setmaxnreg: [`Config::registers`]). Three of 64 rows make BM = 192,
    /// which fills 132 SMs where 128-row tiles leave a short last wave (examples/07-conv).
    Ws { consumers: u32 },
    /// Ping-pong (CUTLASS's `KernelTmaWarpSpecializedPingpong`; short-K problems, issue 22): a
    /// producer warpgroup and two consumer warpgroups, each owning whole BM-row tiles (the
    /// even and the odd tiles of the CTA's persistent walk). The producer loads the tiles'
    /// k-blocks in walk order into the one ring, each stage taken by the one consumer whose
    /// tile it is (`PipelineSpec::in_turn`); a named barrier per consumer (`turn`) makes the
    /// mainloops alternate, so one consumer's epilogue runs while the other's wgmmas do.
    PingPong,
}

impl Kind {
    /// Warp-specialized with two consumer warpgroups (every configuration before BM = 192).
    pub const WS2: Kind = Kind::Ws { consumers: 2 };
    /// Warp-specialized with three consumer warpgroups (BM = 192: 64 rows each).
    pub const WS3: Kind = Kind::Ws { consumers: 3 };
}

/// How the output leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epi {
    /// Each thread stores its accumulator pairs to global memory (clipped).
    Direct,
    /// Through 128B-swizzled shared memory (D's tile) and TMA stores, `nb` 64-row chunks of
    /// 128-byte rows per store call and staging buffer.
    Tma { nb: u32 },
}

/// One configuration: everything that changes the compiled kernel. (The raster group is a
/// launch argument.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub kind: Kind,
    pub bm: u32,
    pub bn: u32,
    pub stages: u32,
    /// CTAs of a cluster along M (B multicast) and along N (A multicast); at most one > 1.
    pub cm: u32,
    pub cn: u32,
    pub persistent: bool,
    pub epi: Epi,
    pub input: In,
    pub out: Out,
    /// Stage releases: one arrival per consumer warpgroup (thread 0 of each, after
    /// wgmma.wait_group; `Consumers::Threads`) instead of the pipeline's default of one per
    /// consumer warp (`Consumers::Warpgroups`). A side variant, to measure that choice.
    pub wg_release: bool,
}

/// K of one stage: 64 elements of 2 bytes, one 128-byte swizzled row.
pub const BK: u32 = 64;

impl Config {
    /// The fastest configuration of the prototype on large shapes (L5).
    pub const L5: Config = Config {
        kind: Kind::WS2,
        bm: 128,
        bn: 256,
        stages: 4,
        cm: 2,
        cn: 1,
        persistent: true,
        epi: Epi::Tma { nb: 2 },
        input: In::BF16,
        out: Out::BF16,
        wg_release: false,
    };

    /// The ladder of features: each step one more (what each buys is the benchmark's table).
    pub fn ladder(input: In) -> Vec<(&'static str, Config)> {
        let out = Out::of(input);
        let l1 = Config {
            kind: Kind::Simple,
            bm: 128,
            bn: 128,
            stages: 4,
            cm: 1,
            cn: 1,
            persistent: false,
            epi: Epi::Direct,
            input,
            out,
            wg_release: false,
        };
        let l2 = Config {
            kind: Kind::WS2,
            bn: 256,
            ..l1
        };
        let l3 = Config {
            persistent: true,
            ..l2
        };
        let l4 = Config { cm: 2, ..l3 };
        let l5 = Config {
            epi: Epi::Tma { nb: 2 },
            input,
            out,
            ..Config::L5
        };
        vec![
            ("L1 one warpgroup, 128x128, 4 stages", l1),
            ("L2 + producer/consumer warpgroups, setmaxnreg, 128x256", l2),
            ("L3 + persistent, grouped raster", l3),
            ("L4 + 2-CTA cluster, B multicast", l4),
            ("L5 + TMA-store epilogue", l5),
        ]
    }

    /// The autotune candidates for one input/output type: the large-tile family and the
    /// small-N tiles that stream a skinny M (decode) over many SMs.
    pub fn candidates(input: In, out: Out) -> Vec<Config> {
        let ws = |bm, bn, stages, cm, cn, nb| Config {
            kind: Kind::WS2,
            bm,
            bn,
            stages,
            cm,
            cn,
            persistent: true,
            epi: Epi::Tma { nb },
            input,
            out,
            wg_release: false,
        };
        // (f32 rows of 128 bytes hold 32 columns: twice the chunks per tile, each one store
        // of the same staging bytes.)
        let nb = |n: u32| n;
        let mut v = vec![
            ws(128, 256, 4, 2, 1, nb(2)),
            ws(128, 256, 4, 1, 1, nb(2)),
            ws(256, 128, 4, 1, 2, nb(2)),
            ws(128, 256, 3, 2, 1, nb(4)),
            ws(128, 128, 6, 1, 2, nb(2)),
            ws(128, 128, 6, 1, 1, nb(2)),
            ws(128, 64, 8, 1, 1, nb(1)),
            ws(128, 64, 8, 1, 2, nb(1)),
        ];
        // Three consumer warpgroups, 192-row tiles (the grids that 128-row tiles leave a short
        // last wave of; 192 x 256 does not compile: 128 accumulators per thread need 154
        // registers, a 512-thread launch has 128).
        v.push(Config {
            kind: Kind::WS3,
            ..ws(192, 128, 4, 2, 1, nb(2))
        });
        v.push(Config {
            persistent: false,
            ..ws(128, 256, 4, 1, 1, nb(2))
        });
        v.push(Config {
            wg_release: true,
            ..ws(128, 256, 4, 2, 1, nb(2))
        });
        // Ping-pong: each consumer warpgroup a whole 128 x 128 or 64 x 256 tile (128
        // accumulators per thread, as ws 128 x 256), its epilogue under the other's mainloop.
        for (bm, bn, stages, cm) in [(128, 128, 5, 1), (128, 128, 5, 2), (64, 256, 4, 2)] {
            v.push(Config {
                kind: Kind::PingPong,
                ..ws(bm, bn, stages, cm, 1, nb(2))
            });
        }
        v
    }
    /// CTAs per cluster.
    pub fn cluster(&self) -> u32 {
        self.cm * self.cn
    }
    /// Consumer warpgroups.
    pub fn consumers(&self) -> u32 {
        match self.kind {
            Kind::Simple => 1,
            Kind::Ws { consumers } => consumers,
            Kind::PingPong => 2,
        }
    }
    /// Rows of the tile one consumer warpgroup multiplies: its share of BM (a ping-pong
    /// consumer's, the whole tile).
    pub fn consumer_rows(&self) -> u32 {
        match self.kind {
            Kind::PingPong => self.bm,
            _ => self.bm / self.consumers(),
        }
    }
    /// The warp-specialized kernel's `setmaxnreg` split (producer, consumer registers per
    /// thread) for `consumers` consumer warpgroups: the block's 64K registers over one
    /// producer and the consumers (rule RegisterBudget; `WarpRoles` checks it). Two: 40 / 232
    /// of a 384-thread launch's 168 (the prototype's); three: 32 / 160 of a 512-thread
    /// launch's 128, 32 x 128 + 3 x 160 x 128 = 64K exactly (FlashAttention-3's split for
    /// three consumer warpgroups). `None` for other counts.
    pub fn registers(consumers: u32) -> Option<(u32, u32)> {
        match consumers {
            2 => Some((40, 232)),
            3 => Some((32, 160)),
            _ => None,
        }
    }
    /// A short unique name: `ws_128x256_s4_c2x1_p_tma2_bf16_bf16` (`ws3_`: three consumer
    /// warpgroups; `pp_`: ping-pong, BM the rows of each consumer's tile; `_r1`: one release
    /// arrival per warpgroup).
    pub fn name(&self) -> String {
        format!(
            "{}_{}x{}_s{}_c{}x{}{}_{}_{}_{}{}",
            match self.kind {
                Kind::Simple => "wg1".to_string(),
                Kind::Ws { consumers: 2 } => "ws".to_string(),
                Kind::Ws { consumers } => format!("ws{consumers}"),
                Kind::PingPong => "pp".to_string(),
            },
            self.bm,
            self.bn,
            self.stages,
            self.cm,
            self.cn,
            if self.persistent { "_p" } else { "" },
            match self.epi {
                Epi::Direct => "direct".to_string(),
                Epi::Tma { nb } => format!("tma{nb}"),
            },
            self.input.name(),
            self.out.name(),
            if self.wg_release { "_r1" } else { "" }
        )
    }
    /// Parses [`Config::name`].
    pub fn parse(s: &str) -> Option<Config> {
        let parts: Vec<&str> = s.split('_').collect();
        let kind = match *parts.first()? {
            "wg1" => Kind::Simple,
            "ws" => Kind::WS2,
            "pp" => Kind::PingPong,
            k => Kind::Ws {
                // Only counts with a register split (`registers`): `ws0_` is no name.
                consumers: k
                    .strip_prefix("ws")?
                    .parse()
                    .ok()
                    .filter(|&n| n != 2 && Config::registers(n).is_some())?,
            },
        };
        let (bm, bn) = parts.get(1)?.split_once('x')?;
        let stages = parts.get(2)?.strip_prefix('s')?.parse().ok()?;
        let (cm, cn) = parts.get(3)?.strip_prefix('c')?.split_once('x')?;
        let mut i = 4;
        let persistent = parts.get(i) == Some(&"p");
        if persistent {
            i += 1;
        }
        let epi = match *parts.get(i)? {
            "direct" => Epi::Direct,
            t => Epi::Tma {
                nb: t.strip_prefix("tma")?.parse().ok()?,
            },
        };
        let input = In::parse(parts.get(i + 1)?)?;
        let out = match *parts.get(i + 2)? {
            "bf16" => Out::BF16,
            "f16" => Out::F16,
            "f32" => Out::F32,
            _ => return None,
        };
        let wg_release = match parts.get(i + 3) {
            None => false,
            Some(&"r1") => true,
            Some(_) => return None,
        };
        Some(Config {
            kind,
            bm: bm.parse().ok()?,
            bn: bn.parse().ok()?,
            stages,
            cm: cm.parse().ok()?,
            cn: cn.parse().ok()?,
            persistent,
            epi,
            input,
            out,
            wg_release,
        })
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A configuration's checked declarations: its tiles and its kernel plan (the pipeline, the
/// warp roles, D's staging), from which both the source's shared-memory layout
/// (`struct tma_plan_gemm`) and the launch (block, cluster, dynamic shared memory) come.
#[derive(Clone)]
pub struct Plan {
    pub config: Config,
    pub a: ValidSpec,
    pub b: ValidSpec,
    /// D's tile (TMA-store epilogue only).
    pub d: Option<ValidSpec>,
    pub pipeline: ValidPipeline,
    /// The kernel `gemm`'s plan.
    pub kernel: ValidKernelPlan,
    /// The grouped schedule (examples/08-grouped-gemm).
    pub grouped: bool,
    /// The weight-gradient grouped GEMM (examples/08-grouped-gemm, `GEMM_WGRAD`): A and B
    /// MN-major over the tokens (the contraction), ragged per group.
    pub wgrad: bool,
    /// The weight gradient's prologue `gemm_wgrad_maps` (one thread a group builds the
    /// group's maps of A and B before `gemm`): its plan, in the same source.
    pub maps: Option<ValidKernelPlan>,
    /// The convolution (examples/07-conv): A is this im2col tile (`a` is its box), B the
    /// filter as `[R*S][K][C]`.
    pub im2col: Option<ValidIm2col>,
}

/// Threads of a block of the weight gradient's prologue `gemm_wgrad_maps` (one a group).
pub const WGRAD_MAPS_THREADS: u32 = 128;

/// Slots of the weight gradient's work queue: the producer claims one tile ahead, as it nears
/// the end of the one it loads, and a consumer pops the next once its mainloop is issued, so a
/// few slots keep the producer from ever waiting on them.
pub const WGRAD_QUEUE_SLOTS: u32 = 4;

fn runtime2(spec: TileSpec) -> TileSpec {
    spec.global_extents([Extent::Runtime, Extent::Runtime])
}

/// Errors of a declaration, as one message.
fn findings(what: &str, e: impl fmt::Display) -> Box<dyn std::error::Error + Send + Sync> {
    format!("{what}: {e}").into()
}

impl Plan {
    /// Declares and checks the tiles, the pipeline, the roles and the kernel plan of `c`.
    pub fn new(c: Config) -> Res<Plan> {
        Plan::build(c, false)
    }

    /// [`Plan::new`] with the grouped schedule (examples/08-grouped-gemm): warp-specialized
    /// with two consumers sharing a tile or ping-pong (the kinds run on a GPU in this mode),
    /// persistent, a cluster along M at most.
    #[allow(dead_code)] // examples/08-grouped-gemm's, which includes this file
    pub fn grouped(c: Config) -> Res<Plan> {
        Plan::walks_groups(c, "a grouped GEMM", "B")?;
        Plan::build(c, true)
    }

    /// What both grouped schedules ask of `c` (`what`: the GEMM, for the error): two consumer
    /// warpgroups (sharing a tile or ping-pong: the kinds run on a GPU in these modes), a
    /// persistent walk over the groups, a cluster along M only (`multicast`: the operand its
    /// CTAs share).
    fn walks_groups(c: Config, what: &str, multicast: &str) -> Res<()> {
        if !matches!(c.kind, Kind::WS2 | Kind::PingPong) || c.cn != 1 || !c.persistent {
            return Err(format!(
                "{c}: {what} is warp-specialized with two consumers (sharing a tile or ping-pong) and persistent, its cluster along M only (a group's {multicast} multicast)"
            )
            .into());
        }
        Ok(())
    }

    /// [`Plan::new`] with the convolution's operands (examples/07-conv, `GEMM_CONV`): A an
    /// im2col tile of BM output pixels x 64 channels (one load per filter tap and channel
    /// chunk, the tap as its offsets), B the filter as a `[R*S][K][C]` view of KRSC; the
    /// problem's dims, corners and traversal strides are the maps' (encoded per launch, see
    /// [`conv_a`]), not the kernel's. Warp-specialized, an A loaded by each CTA (a cluster
    /// along M at most: B multicast).
    #[allow(dead_code)] // examples/07-conv's, which includes this file
    pub fn conv(c: Config) -> Res<Plan> {
        if c.kind == Kind::Simple || c.cn != 1 {
            return Err(format!(
                "{c}: a convolution is warp-specialized, its cluster along M only (an im2col A is one box per CTA: B multicast)"
            )
            .into());
        }
        Plan::build_with(c, false, true, false)
    }

    /// [`Plan::new`] with the weight-gradient grouped schedule (examples/08-grouped-gemm,
    /// `GEMM_WGRAD`): dW_g[N][K] = dY_g^T X_g over each group's tokens, the tokens the GEMM's
    /// contraction and the strided dim of both operands. A is dY as `[tokens][N]` (tile dims
    /// `[k][m]`, wgmma's MN-major A), B is X as `[tokens][K]` (`[k][n]`, MN-major B), each a
    /// box of 64 tokens x 64 elements (128-byte rows, the 128B swizzle's atom) repeated along
    /// M or N. Warp-specialized with two consumers (sharing a tile or ping-pong), persistent,
    /// a cluster along M at most (X multicast).
    #[allow(dead_code)] // examples/08-grouped-gemm's, which includes this file
    pub fn wgrad(c: Config) -> Res<Plan> {
        Plan::walks_groups(c, "the weight-gradient GEMM", "X")?;
        Plan::build_with(c, false, false, true)
    }

    fn build(c: Config, grouped: bool) -> Res<Plan> {
        Plan::build_with(c, grouped, false, false)
    }

    fn build_with(c: Config, grouped: bool, conv: bool, wgrad: bool) -> Res<Plan> {
        let dt = c.input.dtype();
        if c.cm > 1 && c.cn > 1 {
            return Err(format!("{c}: a cluster spans M or N, not both").into());
        }
        // Each consumer warpgroup multiplies whole 64-row blocks of the tile (wgmma's M): its
        // share of BM, or (ping-pong) all of it.
        let nc = c.consumers();
        if c.kind != Kind::Simple && Config::registers(nc).is_none() {
            return Err(format!(
                "{c}: {nc} consumer warpgroups have no register split (2 or 3 do)"
            )
            .into());
        }
        let shares = if c.kind == Kind::PingPong { 1 } else { nc };
        let rows = c.consumer_rows();
        if rows == 0 || rows % 64 != 0 || rows * shares != c.bm {
            return Err(format!(
                "{c}: bm = {} is not whole 64-row blocks for each of {shares} consumer warpgroup(s) (a multiple of {})",
                c.bm,
                64 * shares
            )
            .into());
        }
        // Ping-pong: two consumers taking the persistent walk's tiles in turn, each stage
        // released by the warpgroup that took it (its four warps).
        if c.kind == Kind::PingPong && (!c.persistent || c.wg_release) {
            return Err(format!(
                "{c}: a ping-pong kernel is persistent (its consumers alternate over the CTA's tiles), its stages released by each warpgroup's warps"
            )
            .into());
        }
        let (a, im2col) = if conv {
            let i = conv_a(c.input, c.bm, ConvMap::PLACEHOLDER)?;
            (i.stage_tile().map_err(|e| findings("tile a", e))?, Some(i))
        } else if wgrad {
            // A: dY's 64 tokens x BM columns, MN-major (the columns contiguous): 64-column
            // boxes of 128 bytes, one swizzle atom each, repeated along M.
            let a = validate(
                &runtime2(TileSpec::new("a", dt, [1, 1], [BK, 64]))
                    .dim_names(["k", "m"])
                    .swizzle(Swizzle::B128)
                    .l2_promotion(L2Promotion::B256)
                    .repeat([1, c.bm / 64])
                    .wgmma(Operand::A, Major::MN),
            )
            .map_err(|e| findings("tile a", e))?;
            (a, None)
        } else {
            // A: BM x 64 (K-major), its rows split over the cluster's CTAs along N (A multicast).
            let a = validate(
                &runtime2(TileSpec::new("a", dt, [1, 1], [c.bm / c.cn, BK]))
                    .dim_names(["m", "k"])
                    .swizzle(Swizzle::B128)
                    .l2_promotion(L2Promotion::B256)
                    .repeat([c.cn, 1])
                    .wgmma(Operand::A, Major::K),
            )
            .map_err(|e| findings("tile a", e))?;
            (a, None)
        };
        // B: BN x 64, rows split over the CTAs along M (B multicast): repeated boxes along N,
        // back to back, one 256-row operand for wgmma (rule WgmmaTileShape). The convolution's
        // B is the filter's tap rs: [R*S][K][C] (strides C, R*S*C, 1 of KRSC), one tap a box.
        // The weight gradient's B is X's 64 tokens x BN columns, MN-major, BN / 64 boxes split
        // over the CTAs along M (multicast).
        let b = if wgrad {
            validate(
                &runtime2(TileSpec::new("b", dt, [1, 1], [BK, 64]))
                    .dim_names(["k", "n"])
                    .swizzle(Swizzle::B128)
                    .l2_promotion(L2Promotion::B256)
                    .repeat([1, c.bn / 64])
                    .wgmma(Operand::B, Major::MN),
            )
        } else if conv {
            validate(
                &TileSpec::new("b", dt, [1, 1, 1], [1, c.bn / c.cm, BK])
                    .global_extents([Extent::Runtime; 3])
                    .stride_extents([Extent::Runtime, Extent::Runtime, Extent::Static(1)])
                    .dim_names(["rs", "n", "k"])
                    .swizzle(Swizzle::B128)
                    .l2_promotion(L2Promotion::B256)
                    .repeat([1, c.cm, 1])
                    .wgmma(Operand::B, Major::K),
            )
        } else {
            validate(
                &runtime2(TileSpec::new("b", dt, [1, 1], [c.bn / c.cm, BK]))
                    .dim_names(["n", "k"])
                    .swizzle(Swizzle::B128)
                    .l2_promotion(L2Promotion::B256)
                    .repeat([c.cm, 1])
                    .wgmma(Operand::B, Major::K),
            )
        }
        .map_err(|e| findings("tile b", e))?;
        let d = match (c.kind, c.epi) {
            (Kind::Ws { .. } | Kind::PingPong, Epi::Tma { nb }) => {
                let cols = (128 / c.out.bytes()) as u32;
                // Each store moves `nb` whole chunks of 128-byte rows of one 64-row block.
                if nb == 0 || c.bn % cols != 0 || (c.bn / cols) % nb != 0 {
                    return Err(format!(
                        "{c}: the TMA-store epilogue's nb = {nb} chunks a store must divide BN = {} into whole chunks of {cols} columns (128 bytes of {})",
                        c.bn,
                        c.out.dtype().name()
                    )
                    .into());
                }
                Some(
                    validate(
                        &runtime2(TileSpec::new("d", c.out.dtype(), [1, 1], [64, cols]))
                            .dim_names(["m", "n"])
                            .swizzle(Swizzle::B128)
                            .repeat([1, nb]),
                    )
                    .map_err(|e| findings("tile d", e))?,
                )
            }
            (Kind::Simple, Epi::Tma { .. }) => {
                return Err(format!("{c}: the one-warpgroup kernel stores directly").into())
            }
            _ => None,
        };
        let consumers = match (c.kind, c.wg_release) {
            (Kind::PingPong, _) => Consumers::Warpgroups(1),
            (_, true) => Consumers::Threads(c.consumers()),
            (_, false) => Consumers::Warpgroups(c.consumers()),
        };
        let mut p = PipelineSpec::new("ring", c.stages, consumers);
        if c.kind == Kind::PingPong {
            p = p.in_turn();
        }
        p = if let Some(i) = &im2col {
            p.im2col_tile("a", i).map_err(|e| findings("tile a", e))?
        } else if c.cn > 1 {
            p.multicast_tile("a", &a, ClusterAxis::X)
        } else {
            p.tile("a", &a)
        };
        p = if c.cm > 1 {
            p.multicast_tile("b", &b, ClusterAxis::X)
        } else {
            p.tile("b", &b)
        };
        let pipeline = p
            .cluster([c.cluster(), 1, 1])
            .validate()
            .map_err(|e| findings("pipeline", e))?;
        // The kernel plan: the ring, then (TMA-store epilogue) one D call of staging per
        // consumer warpgroup; the block is the roles' (one warpgroup without them), the
        // cluster the pipeline's. Offsets, alignment and the launch are computed there, once.
        let mut kernel = KernelPlan::new("gemm").pipeline(&pipeline);
        // Each consumer's epilogue syncs its own warpgroup: one named barrier per consumer.
        // Ping-pong: consumer c waits on its `turn` (its 128 threads sync, the other
        // consumer's 128 arrive once their mainloop is issued) before its mainloop.
        kernel = match c.kind {
            Kind::Ws { .. } | Kind::PingPong => {
                let consumers = c.consumers();
                let (producer_regs, consumer_regs) = Config::registers(consumers).ok_or_else(|| {
                    format!("{c}: {consumers} consumer warpgroups: the kernel has register splits for 2 and 3")
                })?;
                let mut roles = WarpRoles::new("gemm", producer_regs, consumers, consumer_regs)
                    .per_consumer_barrier("epi", 128);
                if c.kind == Kind::PingPong {
                    roles = roles.per_consumer_barrier("turn", 256);
                }
                kernel.roles(&roles.validate().map_err(|e| findings("warp roles", e))?)
            }
            Kind::Simple => kernel.block_threads(128),
        };
        if let Some(d) = &d {
            kernel = kernel.staging("d", d, c.consumers());
        }
        // The weight gradient claims its tiles at run time (kernel.cu, `gemm_wgrad_order`): the
        // producer thread pushes each claimed tile's index to every consumer warpgroup. (A
        // cluster's CTAs walk a fixed order instead: they must take the same tiles.)
        if wgrad && c.cluster() == 1 {
            let queue = WorkQueue::new(WGRAD_QUEUE_SLOTS, Consumers::Warpgroups(c.consumers()))
                .validate()
                .map_err(|e| findings("work queue", e))?;
            kernel = kernel.work_queue("tiles", &queue);
        }
        let kernel = kernel.validate().map_err(|e| findings(&c.name(), e))?;
        let maps = if wgrad {
            Some(
                KernelPlan::new("gemm_wgrad_maps")
                    .block_threads(WGRAD_MAPS_THREADS)
                    .validate()
                    .map_err(|e| findings("gemm_wgrad_maps", e))?,
            )
        } else {
            None
        };
        Ok(Plan {
            config: c,
            a,
            b,
            d,
            pipeline,
            kernel,
            grouped,
            wgrad,
            maps,
            im2col,
        })
    }

    /// The whole CUDA source: the plan (tma's helpers for its tiles, pipeline and roles, and
    /// `struct tma_plan_gemm`), the config's macros, kernel.cu; it carries the plan's launch.
    pub fn source(&self) -> Res<Source> {
        let c = &self.config;
        let defines = format!(
            "#define GEMM_BM {}\n#define GEMM_BN {}\n#define GEMM_CM {}\n#define GEMM_CN {}\n#define GEMM_NC {}\n\
             #define GEMM_WS {}\n#define GEMM_PERSIST {}\n#define GEMM_EPI_TMA {}\n#define GEMM_OUT {}\n\
             #define GEMM_RELEASE_ONE {}\n#define GEMM_GROUPED {}\n#define GEMM_CONV {}\n#define GEMM_WGRAD {}\n\
             #define GEMM_PINGPONG {}\n",
            c.bm,
            c.bn,
            c.cm,
            c.cn,
            c.consumers(),
            u32::from(c.kind != Kind::Simple),
            u32::from(c.persistent),
            u32::from(matches!(c.epi, Epi::Tma { .. })),
            c.out.code(),
            u32::from(c.wg_release),
            u32::from(self.grouped),
            u32::from(self.im2col.is_some()),
            u32::from(self.wgrad),
            u32::from(c.kind == Kind::PingPong)
        );
        let mut src = KernelSource::new().plan(&self.kernel);
        if let Some(maps) = &self.maps {
            src = src.plan(maps);
        }
        let src = src
            .body(&defines)
            .body_at("examples/05-gemm/kernel.cu", 1, KERNEL_CU);
        Source::kernel(&src).map_err(|e| findings("render", e))
    }
}

/// `GEMM_DEBUG=1`: device checks and bounded waits in every kernel.
pub fn debug_build() -> bool {
    std::env::var("GEMM_DEBUG").is_ok_and(|v| v == "1")
}

/// The compile options of every configuration: release code (no debug waits or device
/// checks; the bare wait loops) unless GEMM_DEBUG=1; TMA_BOUNDED_WAITS=1 bounds the release
/// waits (what the bound costs: BENCHMARKS.md).
pub fn options() -> CompileOptions {
    CompileOptions::new(Arch::Sm90a)
        .debug_waits(debug_build())
        .bounded_waits(std::env::var("TMA_BOUNDED_WAITS").is_ok_and(|v| v == "1"))
}

/// What a convolution's im2col map holds besides the kernel's box: the input's dims
/// `[N][H][W][C]` (C padded to 8: 16 bytes), the bounding box's corners and the traversal
/// strides (user order, `[H][W]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvMap {
    pub dims: [u64; 4],
    pub lower: [i32; 2],
    pub upper: [i32; 2],
    pub strides: [u32; 2],
}

impl ConvMap {
    /// The kernel's plan holds no problem: run-time dims, a box of the whole image.
    pub const PLACEHOLDER: ConvMap = ConvMap {
        dims: [0; 4],
        lower: [0, 0],
        upper: [0, 0],
        strides: [1, 1],
    };
}

/// The convolution's A: an im2col tile of `bm` pixels x 64 channels (128 bytes, the 128B
/// swizzle), wgmma's K-major A (M = pixels, K = channels). With `ConvMap::PLACEHOLDER` the
/// dims are run-time ones (the kernel's); a problem's map gives its dims, corners and strides
/// (what `TensorMap::new_im2col` encodes). Both lay out the same box (the launch checks).
pub fn conv_a(input: In, bm: u32, map: ConvMap) -> Res<ValidIm2col> {
    let spec = Im2colSpec::new("a", input.dtype(), map.dims, BK, bm);
    let spec = if map == ConvMap::PLACEHOLDER {
        spec.global_extents([Extent::Runtime; 4])
    } else {
        spec
    };
    validate_im2col(
        &spec
            .corners(map.lower, map.upper)
            .element_strides(map.strides)
            .swizzle(Swizzle::B128)
            .l2_promotion(L2Promotion::B256)
            .wgmma(Operand::A, Major::K),
    )
    .map_err(|e| findings("im2col tile a", e))
}
