//! Hostile but plausible input through the kernel-building surfaces added after the tiles:
//! pipelines (`PipelineSpec` -> `validate_pipeline`), warp roles (`WarpRoles::validate`), the
//! wgmma plan, descriptor and read model (`OperandPlan`, `MatrixDescriptor`, `wgmma::read`)
//! and launch shapes (`check_launch_shape`, what `LaunchConfig::check` runs). Random and
//! boundary values (0, 1, every power of two and its neighbours, `u32::MAX`, `u64::MAX`) in
//! every integer field; what must hold: no panic, and nothing accepted past a hardware limit
//! (each accepted number recomputed here in `u128`, independently of the code under test).
//!
//! Runs in the test profile (debug: overflow checks on), so an arithmetic overflow anywhere
//! under these APIs panics here. `TMA_HARDENING_CASES` sets the cases per surface (default
//! 20,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use tma::launch::check_launch_shape;
use tma::pipeline::{
    ClusterAxis, Consumers, NamedBarrier, PipelineErrors, PipelineSpec, RegisterSplit, RoleWarps,
    StageTile, WarpRoles,
};
use tma::render::KernelSource;
use tma::spec::limits::{
    MAX_BLOCKS_PER_SM, MAX_BLOCK_DIM, MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS, MAX_GRID_DIM,
    MAX_THREADS_PER_SM, MAX_TX_BYTES,
};
use tma::spec::{Major, Operand, Rule, Severity, WgmmaType};
use tma::wgmma::read::{element_address, read_operand, ReadError, ReadShape};
use tma::wgmma::{LayoutType, MatrixDescriptor, OperandPlan, ADDRESS_LIMIT};
use tma::{validate, Arch, DType, Swizzle, TileSpec, ValidSpec};
use tma_test_support::testgen::{operand_case, operand_combinations, random_valid_spec, XorShift};

// ---- boundary values --------------------------------------------------------------------

/// 0, 1, every `2^k - 1`, `2^k`, `2^k + 1` below 2^64, and `u64::MAX`.
fn u64_boundaries() -> Vec<u64> {
    let mut v = vec![0, 1, u64::MAX - 1, u64::MAX];
    for k in 1..64 {
        let p = 1u64 << k;
        v.extend([p - 1, p, p + 1]);
    }
    v
}

/// The same below 2^32.
fn u32_boundaries() -> Vec<u32> {
    u64_boundaries()
        .into_iter()
        .filter_map(|v| u32::try_from(v).ok())
        .collect()
}

struct Gen {
    rng: XorShift,
    u32s: Vec<u32>,
    u64s: Vec<u64>,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            rng: XorShift::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xbeef),
            u32s: u32_boundaries(),
            u64s: u64_boundaries(),
        }
    }
    /// Usually `plausible`, sometimes a boundary value, sometimes any value.
    fn u32(&mut self, plausible: impl FnOnce(&mut XorShift) -> u32) -> u32 {
        match self.rng.below(10) {
            0..=6 => plausible(&mut self.rng),
            7 | 8 => self.u32s[self.rng.below(self.u32s.len() as u64) as usize],
            _ => (self.rng.next_u64() >> self.rng.below(64)) as u32,
        }
    }
    fn u64(&mut self, plausible: impl FnOnce(&mut XorShift) -> u64) -> u64 {
        match self.rng.below(10) {
            0..=6 => plausible(&mut self.rng),
            7 | 8 => self.u64s[self.rng.below(self.u64s.len() as u64) as usize],
            _ => self.rng.next_u64() >> self.rng.below(64),
        }
    }
    fn name(&mut self) -> String {
        const ODD: [&str; 8] = ["", "state", "tiles", "int", "a b", "__x", "1a", "sync"];
        if self.rng.chance(9, 10) {
            format!("n{}", self.rng.below(6))
        } else {
            ODD[self.rng.below(ODD.len() as u64) as usize].to_string()
        }
    }
}

fn cases() -> u64 {
    std::env::var("TMA_HARDENING_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// Runs `one` for every seed; a panic names the seed (rerun it alone with `replay`).
fn for_each_case(what: &str, mut one: impl FnMut(&mut Gen)) {
    for seed in 0..cases() {
        let mut g = Gen::new(seed);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| one(&mut g))) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("{what}: case {seed} panicked: {msg:?}");
        }
    }
}

/// Every refusal names a field, its value and the rule in words.
fn check_refusal(e: &PipelineErrors) {
    assert!(!e.errors.is_empty(), "a refusal with no finding: {e:?}");
    for f in &e.errors {
        assert_eq!(f.severity, Severity::Error);
        assert!(!f.field.to_string().is_empty(), "{f:?}");
        assert!(f.message.len() > 10, "{f:?}");
    }
    assert!(e.to_string().contains("breaks"));
}

// ---- pipelines --------------------------------------------------------------------------

/// Tiles a stage may load: a few fixed ones (repeats to split over multicast CTAs, a large
/// one, two of one name) and random valid specs, for each target.
fn tile_pool() -> Vec<ValidSpec> {
    let mut pool = Vec::new();
    let mut rng = XorShift::new(25);
    for arch in [Arch::Sm90a, Arch::Sm100a, Arch::Sm120a] {
        for repeat in [1, 2, 4, 16] {
            let spec = TileSpec::new(format!("t{repeat}"), DType::BF16, [4096, 4096], [64, 64])
                .swizzle(Swizzle::B128)
                .repeat([repeat, 1])
                .target(arch);
            pool.extend(validate(&spec).ok());
        }
        let big = TileSpec::new("big", DType::F32, [4096, 4096], [128, 256]).target(arch);
        pool.extend(validate(&big).ok());
        for i in 0..8 {
            // Named apart, but for the last two: two different tiles of one name.
            let mut spec = random_valid_spec(&mut rng, arch).0.spec().clone();
            spec.name = format!("g{}", i.min(6));
            pool.push(validate(&spec).unwrap());
        }
    }
    pool
}

fn random_pipeline(g: &mut Gen, pool: &[ValidSpec]) -> PipelineSpec {
    let target = match g.rng.below(10) {
        0 => Arch::Sm100a,
        1 => Arch::Sm120a,
        _ => Arch::Sm90a,
    };
    let ours: Vec<&ValidSpec> = pool.iter().filter(|t| t.spec().target == target).collect();
    let count = g.u32(|r| r.range(1, 4) as u32);
    let consumers = match g.rng.below(3) {
        0 => Consumers::Threads(count.wrapping_mul(32)),
        1 => Consumers::Warps(count),
        _ => Consumers::Warpgroups(count),
    };
    let cluster = [
        g.u32(|r| 1 << r.below(3)),
        g.u32(|r| 1 << r.below(2)),
        g.u32(|r| r.range(1, 1) as u32),
    ];
    let wide: Vec<ClusterAxis> = ClusterAxis::ALL
        .into_iter()
        .filter(|a| cluster[a.index()] >= 2)
        .collect();
    let n_tiles = if g.rng.chance(1, 30) {
        0
    } else {
        g.rng.range(1, 3)
    };
    let tiles = (0..n_tiles)
        .map(|i| StageTile {
            member: if g.rng.chance(1, 20) {
                g.name()
            } else {
                format!("m{i}")
            },
            tile: if g.rng.chance(1, 20) {
                pool[g.rng.below(pool.len() as u64) as usize].clone()
            } else {
                ours[g.rng.below(ours.len() as u64) as usize].clone()
            },
            multicast: g.rng.chance(1, 3).then(|| match g.rng.pick(&wide) {
                Some(&a) if g.rng.chance(9, 10) => a,
                _ => ClusterAxis::ALL[g.rng.below(3) as usize],
            }),
        })
        .collect();
    PipelineSpec {
        name: g.name(),
        stages: g.u32(|r| r.range(1, 4) as u32),
        tiles,
        consumers,
        cluster,
        target,
        reserve_smem: g.u64(|r| r.below(1 << 14)),
        in_turn: g.rng.chance(1, 8),
    }
}

fn check_pipeline(g: &mut Gen, spec: &PipelineSpec, t: &mut Tally) {
    let valid = match spec.validate() {
        Ok(v) => v,
        Err(e) => {
            check_refusal(&e);
            t.refused(&e);
            return;
        }
    };
    t.accepted += 1;
    // Recomputed in u128, against the limits.
    let cluster: Vec<u128> = spec.cluster.iter().map(|&n| u128::from(n)).collect();
    let ctas: u128 = cluster.iter().product();
    assert!(cluster.iter().all(|&n| n >= 1) && ctas <= u128::from(MAX_CLUSTER_CTAS));
    assert_eq!(u128::from(valid.cluster_ctas()), ctas);
    let (threads, arrivals) = match spec.consumers {
        Consumers::Threads(n) => (u128::from(n), u128::from(n)),
        Consumers::Warps(n) => (32 * u128::from(n), u128::from(n)),
        Consumers::Warpgroups(n) => (128 * u128::from(n), 4 * u128::from(n)),
    };
    assert!((1..=u128::from(MAX_BLOCK_THREADS)).contains(&threads));
    // Taken in turn: released by one consumer, a warpgroup or a warp.
    assert!(
        !spec.in_turn
            || matches!(
                spec.consumers,
                Consumers::Warpgroups(1) | Consumers::Warps(1)
            )
    );
    let mut axes: Vec<usize> = spec
        .tiles
        .iter()
        .filter_map(|t| t.multicast.map(ClusterAxis::index))
        .collect();
    axes.sort();
    axes.dedup();
    let peers = 1 + axes.iter().map(|&a| cluster[a] - 1).sum::<u128>();
    assert_eq!(u128::from(valid.peers()), peers);
    assert_eq!(u128::from(valid.empty_arrivals()), arrivals * peers);
    let tx: u128 = spec
        .tiles
        .iter()
        .map(|t| u128::from(t.tile.plan().tx_bytes))
        .sum();
    assert_eq!(u128::from(valid.stage_tx_bytes()), tx);
    assert!(tx <= u128::from(MAX_TX_BYTES));
    assert!(spec.stages >= 1 && !spec.tiles.is_empty());
    assert!(
        u128::from(valid.dynamic_smem_bytes()) + u128::from(spec.reserve_smem)
            <= u128::from(spec.target.max_smem_per_block())
    );
    for (i, tile) in spec.tiles.iter().enumerate() {
        assert_eq!(tile.tile.spec().target, spec.target);
        // One struct per tile name: a name twice is the same tile twice.
        for other in &spec.tiles[..i] {
            assert!(other.member != tile.member);
            assert!(other.tile.spec().name != tile.tile.spec().name || other.tile == tile.tile);
        }
        if let Some(axis) = tile.multicast {
            let n = spec.cluster[axis.index()];
            assert!(n >= 2 && tile.tile.plan().boxes % u64::from(n) == 0);
            assert_eq!(valid.split(i).map(|s| s.ctas), Some(n));
        }
    }
    if g.rng.chance(1, 20) {
        KernelSource::new().pipeline(&valid).build().unwrap();
        t.rendered += 1;
    }
}

#[derive(Default, Debug)]
struct Tally {
    accepted: usize,
    rendered: usize,
    rules: std::collections::BTreeSet<String>,
}

impl Tally {
    fn refused(&mut self, e: &PipelineErrors) {
        self.rules
            .extend(e.errors.iter().map(|f| format!("{:?}", f.rule)));
    }
    fn saw(&self, rules: &[Rule]) {
        for r in rules {
            assert!(
                self.rules.contains(&format!("{r:?}")),
                "{r:?} never hit: {self:?}"
            );
        }
    }
}

#[test]
fn no_pipeline_panics_or_passes_a_limit() {
    let pool = tile_pool();
    let mut t = Tally::default();
    for_each_case("pipeline", |g| {
        let spec = random_pipeline(g, &pool);
        check_pipeline(g, &spec, &mut t);
    });
    println!("{t:?}");
    assert!(t.accepted as u64 * 20 > cases(), "{t:?}");
    t.saw(&[
        Rule::ClusterShape,
        Rule::PipelineConsumers,
        Rule::PipelineStagesFit,
        Rule::MulticastSlices,
        Rule::MulticastAxis,
        Rule::PipelineStageCount,
        Rule::PipelineTileTarget,
    ]);
}

// ---- warp roles -------------------------------------------------------------------------

/// Plausible registers follow the launch's (what a user would pick: producers below it,
/// consumers above it, the block's pool nearly used); any field may be hostile instead. A
/// third of the roles count warps (warp-granular, usually without setmaxnreg); barriers are
/// sometimes one per consumer.
fn random_roles(g: &mut Gen) -> WarpRoles {
    let in_warps = g.rng.chance(1, 3);
    let (producers, consumers) = if in_warps {
        (
            RoleWarps::Warps(g.u32(|r| r.range(1, 8) as u32)),
            if g.rng.chance(1, 4) {
                RoleWarps::Warpgroups(g.u32(|r| r.range(1, 4) as u32))
            } else {
                RoleWarps::Warps(g.u32(|r| r.range(1, 16) as u32))
            },
        )
    } else {
        (
            RoleWarps::Warpgroups(g.u32(|r| r.range(1, 2) as u32)),
            RoleWarps::Warpgroups(g.u32(|r| r.range(1, 4) as u32)),
        )
    };
    let (pw, cw) = (producers.warps(), consumers.warps());
    let blocks = g.u32(|r| r.range(1, 3) as u32);
    let threads = 32 * (pw + cw); // each below 2^35: no overflow
    let per_sm = threads.saturating_mul(u64::from(blocks)).max(1);
    let launch = (65536 / per_sm / 8 * 8).clamp(24, 256) as u32;
    let producer = g.u32(|r| r.range(3, u64::from(launch / 8)) as u32 * 8);
    // The most each consumer warp may take: the pool less the producers', over the consumers.
    let room = (u64::from(launch) * (pw + cw))
        .saturating_sub(pw.saturating_mul(u64::from(producer)))
        / cw.max(1);
    let top = room.min(256) / 8;
    let consumer =
        g.u32(|r| r.range(u64::from(launch / 8), top.max(u64::from(launch / 8))) as u32 * 8);
    let setmaxnreg = (!in_warps || g.rng.chance(1, 4)).then_some(RegisterSplit {
        producer_regs: producer,
        consumer_regs: consumer,
    });
    WarpRoles {
        name: g.name(),
        producers,
        consumers,
        setmaxnreg,
        blocks_per_sm: blocks,
        barriers: (0..g.rng.below(4) + u64::from(g.rng.chance(1, 20)) * 14)
            .map(|i| NamedBarrier {
                name: if g.rng.chance(1, 10) {
                    g.name()
                } else {
                    format!("b{i}")
                },
                threads: g.u32(|r| r.range(1, 8) as u32 * 32),
                per_consumer: g.rng.chance(1, 3),
            })
            .collect(),
    }
}

fn check_roles(g: &mut Gen, roles: &WarpRoles, t: &mut Tally) {
    let valid = match roles.validate() {
        Ok(v) => v,
        Err(e) => {
            check_refusal(&e);
            t.refused(&e);
            return;
        }
    };
    t.accepted += 1;
    let (p, c) = (
        u128::from(roles.producer_warps()),
        u128::from(roles.consumer_warps()),
    );
    let threads = 32 * (p + c);
    let blocks = u128::from(roles.blocks_per_sm);
    assert!(p >= 1 && c >= 1 && threads <= u128::from(MAX_BLOCK_THREADS));
    assert!((1..=u128::from(MAX_BLOCKS_PER_SM)).contains(&blocks));
    assert!(threads * blocks <= u128::from(MAX_THREADS_PER_SM));
    if let RoleWarps::Warpgroups(_) = roles.consumers {
        assert_eq!(p % 4, 0, "consumer warpgroups start on a warpgroup");
    }
    let launch = (65536 / (threads * blocks) / 8 * 8).min(256);
    assert_eq!(u128::from(valid.launch_regs()), launch);
    if let Some(split) = roles.setmaxnreg {
        assert!(p % 4 == 0 && c % 4 == 0, "setmaxnreg over whole warpgroups");
        for regs in [split.producer_regs, split.consumer_regs] {
            assert!((24..=256).contains(&regs) && regs % 8 == 0);
        }
        let (pr, cr) = (
            u128::from(split.producer_regs),
            u128::from(split.consumer_regs),
        );
        assert!(pr <= launch && launch <= cr);
        assert!(32 * (p * pr + c * cr) <= threads * launch);
    }
    // Every id of every barrier in 1 ..= 15, none shared.
    let mut used = [false; 16];
    for (b, ids) in valid.barrier_ids() {
        let want = if b.per_consumer {
            roles.consumer_count()
        } else {
            1
        };
        assert_eq!(ids.clone().count() as u32, want);
        for id in ids {
            assert!((1..=15).contains(&id));
            assert!(
                !std::mem::replace(&mut used[id as usize], true),
                "id {id} twice"
            );
        }
        assert!(b.threads > 0 && b.threads % 32 == 0 && u128::from(b.threads) <= threads);
    }
    if g.rng.chance(1, 20) {
        KernelSource::new().warp_roles(&valid).build().unwrap();
        t.rendered += 1;
    }
}

#[test]
fn no_warp_roles_panic_or_pass_a_limit() {
    let mut t = Tally::default();
    for_each_case("warp roles", |g| {
        let roles = random_roles(g);
        check_roles(g, &roles, &mut t);
    });
    println!("{t:?}");
    assert!(t.accepted as u64 * 20 > cases(), "{t:?}");
    t.saw(&[
        Rule::WarpgroupCounts,
        Rule::SetmaxnregRange,
        Rule::SetmaxnregDirection,
        Rule::RegisterBudget,
        Rule::NamedBarrierIds,
        Rule::SetmaxnregWarpgroups,
        Rule::WarpgroupAlignment,
        Rule::ThreadsPerSm,
        Rule::BlocksPerSm,
    ]);
}

// ---- wgmma: plan, descriptor, read model -----------------------------------------------

/// Operand tiles of every combination, a few shapes each.
fn operand_pool() -> Vec<ValidSpec> {
    let mut rng = XorShift::new(2525);
    let mut pool = Vec::new();
    for (dtype, w, swizzle) in operand_combinations() {
        for _ in 0..4 {
            let mn = match w.operand {
                Operand::A => 64 * rng.range(1, 4),
                Operand::B => 8 * rng.range(1, 32),
            };
            let k_slices = rng.range(1, 8);
            if let Some((bound, _)) = operand_case(&mut rng, dtype, w, swizzle, mn, k_slices) {
                pool.push(bound.valid().clone());
            }
        }
    }
    assert!(pool.len() > 100, "{}", pool.len());
    pool
}

fn check_operand(g: &mut Gen, valid: &ValidSpec, t: &mut Tally) {
    let plan = OperandPlan::new(valid).expect("an operand tile has a plan");
    let k = g.u64(|r| r.below(plan.k_slices + 2));
    let m = g.u64(|r| r.below(plan.m_blocks + 2));
    let in_tile = k < plan.k_slices && m < plan.m_blocks;
    match plan.offset(k, m) {
        Ok(offset) => {
            assert!(
                in_tile,
                "offset of k-slice {k}, block {m} accepted: {plan:?}"
            );
            // The step table of the plan's docs, in u128; inside the tile.
            let exact = u128::from(k / plan.slices_per_box) * u128::from(plan.box_step)
                + u128::from(k % plan.slices_per_box) * u128::from(plan.slice_step)
                + u128::from(m) * u128::from(plan.m_block_step);
            assert_eq!(u128::from(offset), exact);
            assert!(offset < valid.plan().footprint_bytes, "{plan:?}");
        }
        Err(e) => {
            assert!(!in_tile);
            assert_eq!(e.rule, Rule::WgmmaSliceRange, "{e}");
        }
    }
    let align = valid.plan().align_bytes;
    let addr = g.u64(|r| r.below(200) * align);
    match plan.descriptor(valid, addr, k, m) {
        Ok(d) => {
            assert!(in_tile && addr % align == 0);
            let exact = u128::from(addr) + u128::from(plan.offset(k, m).unwrap());
            assert_eq!(u128::from(d.start_address), exact);
            t.accepted += 1;
            match d.encode() {
                Ok(word) => {
                    assert!(d.start_address < ADDRESS_LIMIT);
                    assert_eq!(MatrixDescriptor::decode(word), d);
                    check_read(g, word, &plan);
                }
                Err(e) => assert!(d.start_address >= ADDRESS_LIMIT, "{e}"),
            }
        }
        Err(e) => {
            assert!(!e.errors.is_empty());
            assert!(
                !in_tile || addr % align != 0 || u64::MAX - addr < valid.plan().footprint_bytes
            );
            t.rules
                .extend(e.errors.iter().map(|f| format!("{:?}", f.rule)));
        }
    }
}

/// The read model on a descriptor and on random words, shapes and elements.
fn check_read(g: &mut Gen, word: u64, plan: &OperandPlan) {
    let good = ReadShape {
        operand: plan.operand.operand,
        major: plan.operand.major,
        kind: plan.kind,
        n: plan.mn,
    };
    let shape = if g.rng.chance(1, 2) {
        good
    } else {
        ReadShape {
            n: g.u64(|r| r.below(40) * 8),
            ..good
        }
    };
    let n_ok = (8..=256).contains(&shape.n) && shape.n % 8 == 0;
    let word = if g.rng.chance(1, 4) {
        g.rng.next_u64()
    } else {
        word
    };
    let (row, k) = (g.u64(|r| r.below(300)), g.u64(|r| r.below(40)));
    match element_address(word, &shape, row, k) {
        Ok(addr) => {
            assert!(shape.operand == Operand::A || n_ok);
            assert!(row < shape.rows() && k < shape.k());
            // Fields below 2^18, row below 256, k below 32: the sum stays small.
            assert!(addr < 1 << 24, "{addr:#x}");
        }
        Err(ReadError::Shape(n)) => assert!(shape.operand == Operand::B && !n_ok && n == shape.n),
        Err(ReadError::Element { .. }) => assert!(row >= shape.rows() || k >= shape.k()),
        Err(ReadError::BaseOffset(b)) => assert_ne!(b, 0),
        Err(e) => panic!("{e}"),
    }
    // A whole read of a small buffer: refused or bounded, never a huge allocation.
    let base = g.u64(|r| r.below(4) * 1024);
    let smem = vec![0u8; 4096];
    if let Ok(rows) = read_operand(word, &shape, &smem, base) {
        assert_eq!(rows.len() as u64, shape.rows() * shape.k());
    }
}

#[test]
fn no_wgmma_helper_panics_or_addresses_past_the_tile() {
    let pool = operand_pool();
    let mut t = Tally::default();
    for_each_case("wgmma", |g| {
        let valid = &pool[g.rng.below(pool.len() as u64) as usize];
        check_operand(g, valid, &mut t);
        // The descriptor word itself: any fields, any word.
        let d = MatrixDescriptor {
            start_address: g.u64(|r| r.below(1 << 14) * 16),
            leading_byte_offset: g.u64(|r| r.below(1 << 14) * 16),
            stride_byte_offset: g.u64(|r| r.below(1 << 14) * 16),
            base_offset: g.u64(|r| r.below(8)) as u8,
            layout: LayoutType::from_bits(g.rng.below(4)),
        };
        if let Ok(word) = d.encode() {
            assert_eq!(MatrixDescriptor::decode(word), d);
        }
        let any = MatrixDescriptor::decode(g.rng.next_u64());
        assert!(any.encode().is_ok());
    });
    println!("{t:?}");
    assert!(t.accepted as u64 * 10 > cases(), "{t:?}");
    for rule in ["WgmmaSliceRange", "SmemAddressAlignment"] {
        assert!(t.rules.contains(rule), "{rule} never hit: {t:?}");
    }
}

/// Every operand type and a hostile shape through the read model alone.
#[test]
fn the_read_model_refuses_shapes_no_instruction_has() {
    for kind in WgmmaType::ALL {
        for n in u64_boundaries() {
            let shape = ReadShape {
                operand: Operand::B,
                major: Major::K,
                kind,
                n,
            };
            let r = read_operand(0, &shape, &[0u8; 64], 0);
            let n_ok = (8..=256).contains(&n) && n % 8 == 0;
            assert_eq!(matches!(r, Err(ReadError::Shape(_))), !n_ok, "n = {n}");
            for (row, k) in [(u64::MAX, 0), (0, u64::MAX), (u64::MAX, u64::MAX)] {
                assert!(element_address(0, &shape, row, k).is_err());
            }
        }
    }
}

// ---- launch shapes ----------------------------------------------------------------------

#[test]
fn no_launch_shape_past_a_limit_is_accepted() {
    let mut accepted = 0u64;
    let mut clusters = 0u64;
    for_each_case("launch", |g| {
        let dims = |g: &mut Gen, plausible: fn(&mut XorShift) -> u32| {
            (g.u32(plausible), g.u32(plausible), g.u32(plausible))
        };
        let grid = dims(g, |r| r.range(1, 64) as u32);
        let block = dims(g, |r| 1 << r.below(6));
        let cluster = g.rng.chance(1, 2).then(|| dims(g, |r| 1 << r.below(3)));
        match check_launch_shape(grid, block, cluster) {
            Ok(()) => {
                accepted += 1;
                let (g3, b3) = ([grid.0, grid.1, grid.2], [block.0, block.1, block.2]);
                for a in 0..3 {
                    assert!((1..=MAX_GRID_DIM[a]).contains(&g3[a]), "{grid:?}");
                    assert!((1..=MAX_BLOCK_DIM[a]).contains(&b3[a]), "{block:?}");
                }
                let threads: u128 = b3.iter().map(|&n| u128::from(n)).product();
                assert!(threads <= u128::from(MAX_BLOCK_THREADS));
                if let Some(c) = cluster {
                    clusters += 1;
                    let c3 = [c.0, c.1, c.2];
                    let ctas: u128 = c3.iter().map(|&n| u128::from(n)).product();
                    assert!((1..=u128::from(MAX_CLUSTER_CTAS)).contains(&ctas));
                    for a in 0..3 {
                        assert!(c3[a] >= 1 && g3[a] % c3[a] == 0, "{grid:?} {c:?}");
                    }
                }
            }
            Err(e) => {
                assert!(!e.errors.is_empty());
                for f in &e.errors {
                    assert!(
                        matches!(
                            f.rule,
                            Rule::GridDims | Rule::BlockDims | Rule::ClusterShape
                        ),
                        "{f}"
                    );
                    assert!(!f.value.is_empty() && f.message.len() > 10, "{f}");
                }
                assert!(e.to_string().contains("breaks"));
            }
        }
    });
    assert!(
        accepted * 20 > cases() && clusters * 500 > cases(),
        "{accepted} {clusters}"
    );
}
