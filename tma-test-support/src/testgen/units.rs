//! Random *accepted* declarations with random legal names, rendered as whole translation
//! units: every unit's code must compile (NVRTC with and without `TMA_DEBUG`, nvcc for the
//! header with and without Mirage MPK's names; `tests/generated_names_compile.rs`).
//!
//! Names are drawn near what the generated code already calls by name: identifiers of real
//! rendered code where that kind of name lands ([`NamePools`]: a pipeline's struct for its
//! members, ...), as they are (`s`, `bar`, `c0`) or with a generated prefix or suffix taken
//! off (`half` from `tma_half`), upper- or lower-cased, cut at an underscore, or given a
//! generated affix (`BOX_x`, `x_map`, `stride_M`); everyday ones (`a`, `M`, `row`), random and
//! long ones. A declaration the checks refuse is drawn again, and the refusals are counted.
//! What is accepted goes into the unit.

use std::collections::BTreeSet;

use super::{operand_case, operand_combinations, random_valid_spec, XorShift};
use tma_core::ident::{check_name, generated_names, NameKind};
use tma_core::operand::Operand;
use tma_core::pipeline::{
    ClusterAxis, Consumers, PipelineSpec, RoleWarps, ValidPipeline, ValidWarpRoles, WarpRoles,
};
use tma_core::plan::{KernelPlan, ValidKernelPlan};
use tma_core::render::KernelSource;
use tma_core::spec::{Arch, Extent, Swizzle, TileSpec};
use tma_core::validate::{validate, ValidSpec};
use tma_core::DType;

/// Everyday names.
const COMMON: [&str; 24] = [
    "a", "b", "c", "d", "k", "n", "q", "v", "x", "y", "z", "M", "N", "K", "H", "W", "C", "row",
    "col", "batch", "lhs", "rhs", "out", "acc",
];

/// Prefixes and suffixes the generated code puts around user names.
const AFFIXES: [&str; 35] = [
    "tma_pipe_",
    "tma_roles_",
    "tma_plan_",
    "TMA_PLAN_",
    "BYTES_",
    "ALIGN_",
    "COPIES_",
    "STRIDE_",
    "tma_encode_",
    "TMA_ROLES_",
    "_LAUNCH_BOUNDS",
    "tma_",
    "TMA_",
    "BOX_",
    "EXTENT_",
    "OFFSET_",
    "tile_",
    "smem_",
    "mask_",
    "slice_",
    "stride_",
    "sync_",
    "arrive_",
    "BARRIER_",
    "pipe_",
    "roles_",
    "encode_",
    "exercise_",
    "dim_",
    "_map",
    "_THREADS",
    "_encode_spec",
    "_shape",
    "_PARAMS",
    "_DEFINED",
];

/// Where names are drawn near, per kind: the identifiers of real rendered code (not the table
/// of `ident::generated`, so a name that table misses is still drawn), each also with the
/// generated prefixes and suffixes around it taken off (`smem_x` gives `x`: the member whose
/// `smem_<member>` it would be).
#[derive(Clone, Debug, Default)]
pub struct NamePools {
    /// Everything: the corpus's header with Mirage MPK's names, its exercise kernels, a tile
    /// set, a multicast pipeline, warp roles with barriers (one per consumer too), a kernel
    /// plan, every template identifier.
    pub all: Vec<String>,
    /// Per kind, the code where that kind of name lands: a tile's struct, encode function
    /// and exercise kernels for dims; a pipeline's struct for members; warp roles' struct for
    /// barriers; a set's struct and parameter macro for set members; a plan's struct for its
    /// regions; everything for names at namespace scope.
    pub by_kind: Vec<(NameKind, Vec<String>)>,
}

impl NamePools {
    /// The pool of `kind` (everything where none is kept).
    pub fn of(&self, kind: NameKind) -> &[String] {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(self.all.as_slice(), |(_, p)| p.as_slice())
    }
}

/// The identifiers of `code`, and each with a generated affix taken off.
fn pool_of(code: &str) -> BTreeSet<String> {
    let mut pool = BTreeSet::new();
    for id in tma_core::ident::generated::identifiers_of(code) {
        for affix in AFFIXES {
            let stripped = if affix.starts_with('_') {
                id.strip_suffix(affix)
            } else {
                id.strip_prefix(affix)
            };
            if let Some(s) = stripped.filter(|s| !s.is_empty()) {
                pool.insert(s.to_string());
            }
        }
        pool.insert(id);
    }
    pool
}

/// The pools ([`NamePools`]), rendered once.
pub fn name_pools() -> NamePools {
    use tma_core::render::{
        exercise_body_checked, header_with, HeaderOptions, PipelineCode, PlanCode, TileCode,
        TileSetCode, WarpRolesCode,
    };
    let tiles = tma_core::render::corpus();
    let mut tile_code = String::new();
    for t in &tiles {
        if let Ok(c) = TileCode::new(t, 0) {
            tile_code.push_str(c.source());
        }
        if let Ok(b) = exercise_body_checked(t) {
            tile_code.push_str(&b);
        }
    }
    let header = header_with(&tiles, HeaderOptions { mpk: true }).unwrap_or_default();
    let tile = |rows: u32, repeat: u32| {
        validate(
            &TileSpec::new("pool", DType::BF16, [4096, 4096], [rows, 64])
                .swizzle(Swizzle::B128)
                .repeat([repeat, 1]),
        )
        .ok()
    };
    let mut pipe_code = String::new();
    let mut roles_code = String::new();
    let mut set_code = String::new();
    let mut plan_code = String::new();
    if let (Some(a), Some(b)) = (tile(64, 2), tile(128, 1)) {
        for consumers in [Consumers::Warps(4), Consumers::Threads(128)] {
            let p = PipelineSpec::new("pool", 2, consumers)
                .multicast_tile("a", &a, ClusterAxis::X)
                .tile("b", &b)
                .cluster([2, 1, 1])
                .validate();
            if let Some(c) = p.ok().and_then(|p| PipelineCode::new(&p, 0).ok()) {
                pipe_code.push_str(c.source());
            }
        }
        for roles in [
            WarpRoles::new("pool", 40, 2, 232).barrier("x", 128),
            WarpRoles::warps("pool", 1, 4).per_consumer_barrier("x", 32),
        ] {
            if let Some(c) = roles
                .validate()
                .ok()
                .and_then(|r| WarpRolesCode::new(&r).ok())
            {
                roles_code.push_str(c.source());
            }
        }
        let ring = PipelineSpec::new("ring", 2, Consumers::Threads(128))
            .tile("b", &b)
            .validate()
            .ok();
        let mut plan = KernelPlan::new("pool")
            .tile_set("set", &[("a", &a), ("b", &b)])
            .staging("x", &a, 2)
            .scratch("y", 64, 16)
            .block_threads(128);
        if let Some(r) = &ring {
            plan = plan.pipeline(r);
        }
        if let Some(c) = plan.validate().ok().and_then(|p| PlanCode::new(&p).ok()) {
            plan_code.push_str(c.source());
        }

        if let Ok(c) = TileSetCode::new("pool", &[("a", &a), ("b", &b)]) {
            set_code.push_str(c.source());
        }
    }
    let mut all = pool_of(&format!(
        "{header}{tile_code}{pipe_code}{roles_code}{set_code}{plan_code}"
    ));
    all.extend(tma_core::ident::generated::template_identifiers());
    let all: Vec<String> = all.into_iter().collect();
    let of = |code: &str| pool_of(code).into_iter().collect::<Vec<String>>();
    NamePools {
        by_kind: vec![
            (NameKind::Dim, of(&format!("{tile_code}{header}"))),
            (NameKind::PipelineMember, of(&pipe_code)),
            (NameKind::NamedBarrier, of(&roles_code)),
            (NameKind::SetMember, of(&set_code)),
            (NameKind::PlanRegion, of(&plan_code)),
        ],
        all,
    }
}

/// A random legal name (a C identifier [`check_name`] takes): one of `pool` as it is (short
/// ones more often: parameters and locals are short), one near it, an everyday one, an
/// affixed one, a random or a long one.
pub fn random_name(rng: &mut XorShift, pool: &[String]) -> String {
    loop {
        let name = draw(rng, pool);
        if check_name(&name).is_ok() {
            return name;
        }
    }
}

fn random_chars(rng: &mut XorShift, len: u64) -> String {
    const FIRST: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
    const REST: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";
    (0..len.max(1))
        .map(|i| {
            let set = if i == 0 { FIRST } else { REST };
            char::from(*rng.pick(set).unwrap_or(&b'x'))
        })
        .collect()
}

fn draw(rng: &mut XorShift, pool: &[String]) -> String {
    let common = |rng: &mut XorShift| (*rng.pick(&COMMON).unwrap_or(&"a")).to_string();
    match rng.below(12) {
        0 | 1 => common(rng),
        8..=11 => {
            // A pool name as it is, the shorter of two.
            let (Some(x), Some(y)) = (rng.pick(pool), rng.pick(pool)) else {
                return common(rng);
            };
            if x.len() <= y.len() {
                x.clone()
            } else {
                y.clone()
            }
        }
        2 => {
            let len = rng.range(1, 12);
            random_chars(rng, len)
        }
        3 => {
            // Long: past every buffer a message might have.
            let len = rng.range(40, 200);
            random_chars(rng, len)
        }
        4 => {
            let affix = *rng.pick(&AFFIXES).unwrap_or(&"tma_");
            let base = if rng.chance(1, 2) {
                common(rng)
            } else {
                let len = rng.range(1, 6);
                random_chars(rng, len)
            };
            if affix.starts_with('_') {
                format!("{base}{affix}")
            } else {
                format!("{affix}{base}")
            }
        }
        _ => {
            // Near a template identifier.
            let Some(t) = rng.pick(pool) else {
                return common(rng);
            };
            let mut s = t.clone();
            for p in ["tma_", "TMA_"] {
                if rng.chance(3, 4) {
                    if let Some(rest) = s.strip_prefix(p) {
                        s = rest.to_string();
                    }
                }
            }
            match rng.below(6) {
                0 => s = s.to_ascii_uppercase(),
                1 => s = s.to_ascii_lowercase(),
                2 => {
                    // Cut at an underscore: a prefix of a generated name.
                    let parts: Vec<&str> = s.split('_').filter(|p| !p.is_empty()).collect();
                    let k = rng.range(1, parts.len().max(1) as u64) as usize;
                    s = parts[..k.min(parts.len())].join("_");
                }
                3 => s.push_str(&random_chars(rng, 1)),
                4 => {
                    s.pop();
                }
                _ => {}
            }
            if s.is_empty() {
                common(rng)
            } else {
                s
            }
        }
    }
}

/// One random translation unit of accepted declarations.
#[derive(Clone, Debug, Default)]
pub struct RandomUnit {
    /// Tiles, a tile set, aliases, pipelines and warp roles, and a body that uses each: its
    /// exercise kernels, a kernel per pipeline (`acquire`, `load` with named coordinates,
    /// `wait`, `release`) and per warp roles (its launch-bounds macro, `setmaxnreg`, every
    /// named barrier), a kernel taking the set's parameter macro, the wgmma exercise.
    pub source: KernelSource,
    /// Every tile of the unit, for a header.
    pub tiles: Vec<ValidSpec>,
    /// The user names of the unit, by kind.
    pub names: Vec<(NameKind, String)>,
    /// Declarations the checks refused (drawn again).
    pub refused: usize,
}

/// What a unit (or several sharing one header) has taken at namespace scope.
#[derive(Clone, Debug, Default)]
pub struct Taken(BTreeSet<String>);

impl Taken {
    /// Takes every namespace-scope name `name` of `kind` gives, or nothing and false when
    /// one is taken.
    pub fn take(&mut self, kind: NameKind, name: &str) -> bool {
        let globals: Vec<String> = generated_names(kind, name)
            .into_iter()
            .filter(|g| g.global)
            .map(|g| g.ident)
            .collect();
        if globals.iter().any(|g| self.0.contains(g)) {
            return false;
        }
        self.0.extend(globals);
        true
    }
}

/// A tile set drawn for a part: its name and members.
struct SetDraw {
    name: String,
    members: Vec<(String, ValidSpec)>,
}

struct Gen<'a> {
    rng: &'a mut XorShift,
    pools: &'a NamePools,
    taken: &'a mut Taken,
    unit: RandomUnit,
    body: String,
}

impl Gen<'_> {
    fn name(&mut self, kind: NameKind) -> String {
        random_name(self.rng, self.pools.of(kind))
    }

    /// `spec` under random tile and dim names, validated; `None` after many refusals.
    fn named_tile(&mut self, spec: &TileSpec) -> Option<ValidSpec> {
        for _ in 0..64 {
            let mut s = spec.clone();
            s.name = self.name(NameKind::Tile);
            s.dim_names = (0..s.rank())
                .map(|_| self.rng.chance(3, 4).then(|| self.name(NameKind::Dim)))
                .collect();
            match validate(&s) {
                Ok(v) if self.taken.take(NameKind::Tile, &s.name) => {
                    self.unit.names.push((NameKind::Tile, s.name.clone()));
                    for d in 0..s.rank() {
                        self.unit.names.push((NameKind::Dim, s.dim_label(d)));
                    }
                    self.unit.tiles.push(v.clone());
                    return Some(v);
                }
                _ => self.unit.refused += 1,
            }
        }
        None
    }

    /// A random valid tile of sm_90a, some dims and strides given at run time (encode
    /// parameters), under random names.
    fn random_tile(&mut self) -> Option<ValidSpec> {
        let (bound, _) = random_valid_spec(self.rng, Arch::Sm90a);
        let mut spec = bound.spec().clone();
        if self.rng.chance(1, 3) {
            spec.global = spec
                .global
                .iter()
                .map(|e| {
                    if self.rng.chance(1, 2) {
                        Extent::Runtime
                    } else {
                        *e
                    }
                })
                .collect();
            if spec.strides.is_some() && self.rng.chance(1, 2) {
                let rank = spec.rank();
                spec.strides = spec.strides.map(|s| {
                    s.iter()
                        .enumerate()
                        .map(|(d, e)| if d + 1 < rank { Extent::Runtime } else { *e })
                        .collect()
                });
            }
            if validate(&spec).is_err() {
                spec = bound.spec().clone();
            }
        }
        self.named_tile(&spec)
    }

    fn coords(tile: &ValidSpec) -> String {
        let s = tile.spec();
        let fields: Vec<String> = (0..s.rank())
            .map(|d| format!(".{} = 0", s.dim_label(d)))
            .collect();
        format!("{{{}}}", fields.join(", "))
    }

    fn plain_tiles(&mut self, n: u64) {
        for _ in 0..n {
            if let Some(v) = self.random_tile() {
                self.unit.source = std::mem::take(&mut self.unit.source).tile(&v);
                if let Ok(body) = tma_core::render::exercise_body_checked(&v) {
                    self.body.push_str(&body);
                }
            }
        }
    }

    fn aliases(&mut self, n: u64) {
        for _ in 0..n {
            let Some(v) = self.random_tile() else {
                continue;
            };
            let mut alias = None;
            for _ in 0..64 {
                let a = self.name(NameKind::Alias);
                if tma_core::ident::generated_clash(NameKind::Alias, &a).is_none()
                    && self.taken.take(NameKind::Alias, &a)
                {
                    alias = Some(a);
                    break;
                }
                self.unit.refused += 1;
            }
            let Some(alias) = alias else {
                self.unit.source = std::mem::take(&mut self.unit.source).tile(&v);
                continue;
            };
            self.unit.names.push((NameKind::Alias, alias.clone()));
            self.unit.source = std::mem::take(&mut self.unit.source).tile_as(&v, &alias);
            self.body.push_str(&format!(
                "static_assert({alias}::RANK == {}u, \"the alias names its tile\");\n",
                v.spec().rank()
            ));
        }
    }

    /// A set of two or three random tiles, and a kernel taking its parameter macro.
    fn set(&mut self) -> Option<SetDraw> {
        let tiles: Vec<ValidSpec> = (0..self.rng.range(2, 3))
            .filter_map(|_| self.random_tile())
            .collect();
        if tiles.is_empty() {
            return None;
        }
        for _ in 0..64 {
            let name = self.name(NameKind::TileSet);
            let members: Vec<String> = tiles
                .iter()
                .map(|_| self.name(NameKind::SetMember))
                .collect();
            let pairs: Vec<(&str, &ValidSpec)> = members
                .iter()
                .map(String::as_str)
                .zip(tiles.iter())
                .collect();
            let ok = tma_core::render::TileSetCode::new(&name, &pairs).is_ok()
                && self.taken.take(NameKind::TileSet, &name);
            if !ok {
                self.unit.refused += 1;
                continue;
            }
            self.unit.names.push((NameKind::TileSet, name.clone()));
            for m in &members {
                self.unit.names.push((NameKind::SetMember, m.clone()));
            }
            self.unit.source = std::mem::take(&mut self.unit.source).tile_set(&name, &pairs);
            let k = self.unit.names.len();
            self.body.push_str(&format!(
                "extern \"C\" __global__ void k__set{k}(TMA_{}_PARAMS) {{\n  static_assert(tma_{name}::TILES == {}u, \"\");\n",
                name.to_ascii_uppercase(),
                tiles.len()
            ));
            for (m, t) in members.iter().zip(&tiles) {
                self.body.push_str(&format!(
                    "  tma_{name}::{m}::prefetch(&{m}_map, {});\n  (void)tma_{name}::OFFSET_{m};\n",
                    Self::coords(t)
                ));
            }
            self.body.push_str("}\n");
            return Some(SetDraw {
                name,
                members: members.into_iter().zip(tiles).collect(),
            });
        }
        None
    }

    /// A tile a 2-CTA multicast can split: two 64-row boxes of bf16.
    fn multicast_tile(&mut self) -> Option<ValidSpec> {
        let spec = TileSpec::new("m", DType::BF16, [4096, 4096], [64, 64])
            .swizzle(Swizzle::B128)
            .repeat([2, 1]);
        self.named_tile(&spec)
    }

    /// A small tile of any shape, for a stage.
    fn stage_tile(&mut self) -> Option<ValidSpec> {
        for _ in 0..16 {
            let (bound, _) = random_valid_spec(self.rng, Arch::Sm90a);
            if bound.plan().footprint_bytes <= 32 * 1024 {
                let spec = bound.spec().clone();
                return self.named_tile(&spec);
            }
        }
        None
    }

    /// A pipeline whose consumers the roles' consumers can be (`roles`: theirs): all of
    /// them in their unit, or some of their warps or threads.
    fn pipeline(&mut self, roles: RoleWarps) -> Option<ValidPipeline> {
        let multicast = self.rng.chance(1, 2);
        let mut tiles: Vec<(ValidSpec, bool)> = Vec::new();
        if multicast {
            tiles.push((self.multicast_tile()?, true));
        }
        for _ in 0..self.rng.range(u64::from(!multicast), 2) {
            tiles.push((self.stage_tile()?, false));
        }
        let warps = roles.warps().max(1);
        let consumers = match (self.rng.below(3), roles) {
            (0, RoleWarps::Warpgroups(n)) => Consumers::Warpgroups(n),
            (0, RoleWarps::Warps(n)) if n % 4 == 0 => Consumers::Warpgroups(n / 4),
            (0 | 1, RoleWarps::Warps(n)) => Consumers::Warps(n),
            (1, _) => Consumers::Warps(self.rng.range(1, warps) as u32),
            _ => Consumers::Threads(32 * self.rng.range(1, warps) as u32),
        };
        for _ in 0..64 {
            let name = self.name(NameKind::Pipeline);
            let mut p = PipelineSpec::new(name.clone(), self.rng.range(1, 4) as u32, consumers);
            let mut members = Vec::new();
            for (t, mc) in &tiles {
                let m = self.name(NameKind::PipelineMember);
                p = if *mc {
                    p.multicast_tile(m.clone(), t, ClusterAxis::X)
                } else {
                    p.tile(m.clone(), t)
                };
                members.push(m);
            }
            if multicast {
                p = p.cluster([2, 1, 1]);
            }
            let valid = loop {
                match p.validate() {
                    Ok(v) => break Some(v),
                    Err(e)
                        if e.errors
                            .iter()
                            .all(|f| f.rule == tma_core::Rule::PipelineStagesFit)
                            && p.stages > 1 =>
                    {
                        p.stages -= 1;
                    }
                    Err(_) => break None,
                }
            };
            match valid {
                Some(v) if self.taken.take(NameKind::Pipeline, &name) => {
                    self.unit.names.push((NameKind::Pipeline, name.clone()));
                    for m in &members {
                        self.unit.names.push((NameKind::PipelineMember, m.clone()));
                    }
                    self.pipeline_kernel(&v);
                    return Some(v);
                }
                _ => self.unit.refused += 1,
            }
        }
        None
    }

    fn pipeline_kernel(&mut self, p: &ValidPipeline) {
        let name = &p.spec().name;
        let k = self.unit.names.len();
        let params: Vec<String> = (0..p.spec().tiles.len())
            .map(|i| format!("const __grid_constant__ CUtensorMap m{i}"))
            .collect();
        let args: Vec<String> = p
            .spec()
            .tiles
            .iter()
            .enumerate()
            .map(|(i, t)| format!("&m{i}, {}", Self::coords(&t.tile)))
            .collect();
        self.body.push_str(&format!(
            "extern \"C\" __global__ void k__pipe{k}({}) {{\n  extern __shared__ __align__(16) unsigned char raw__[];\n  const tma_pipe_{name} pipe(raw__);\n  pipe.init();\n  tma_pipe_{name}::state s;\n  if (threadIdx.x == 0u) {{\n    pipe.acquire(s);\n    pipe.load(s, {});\n  }}\n  pipe.wait(s);\n",
            params.join(", "),
            args.join(", ")
        ));
        for t in &p.spec().tiles {
            self.body
                .push_str(&format!("  (void)pipe.smem_{}(s);\n", t.member));
        }
        self.body
            .push_str("  pipe.release(s);\n  ++s;\n  pipe.finish();\n}\n");
    }

    /// Warp roles of one of three shapes: a producer warpgroup and two consumer warpgroups
    /// with `setmaxnreg`, the same without it, or one producer warp and one to four consumer
    /// warps; up to three named barriers, some per consumer.
    fn roles(&mut self) -> Option<ValidWarpRoles> {
        for _ in 0..64 {
            let name = self.name(NameKind::WarpRoles);
            let mut r = match self.rng.below(3) {
                0 => WarpRoles::new(name.clone(), 40, 2, 232),
                1 => WarpRoles::new(name.clone(), 40, 2, 232).without_setmaxnreg(),
                _ => WarpRoles::warps(name.clone(), 1, self.rng.range(1, 4) as u32),
            };
            let per_consumer_threads = 32 * r.consumers.warps_per_unit();
            for _ in 0..self.rng.below(4) {
                let barrier = self.name(NameKind::NamedBarrier);
                r = if self.rng.chance(1, 2) {
                    r.per_consumer_barrier(barrier, per_consumer_threads)
                } else {
                    let warps = r.producer_warps() + r.consumer_warps();
                    r.barrier(barrier, 32 * self.rng.range(1, warps) as u32)
                };
            }
            match r.validate() {
                Ok(v) if self.taken.take(NameKind::WarpRoles, &name) => {
                    self.unit.names.push((NameKind::WarpRoles, name.clone()));
                    let k = self.unit.names.len();
                    let mut body = format!(
                        "extern \"C\" __global__ void TMA_ROLES_{}_LAUNCH_BOUNDS k__roles{k}(unsigned* out) {{\n  typedef tma_roles_{name} R;\n",
                        name.to_ascii_uppercase()
                    );
                    if r.setmaxnreg.is_some() {
                        body.push_str(
                            "  if (R::is_producer()) R::producer_setmaxnreg(); else R::consumer_setmaxnreg();\n",
                        );
                    }
                    body.push_str(
                        "  static_assert(R::CONSUMERS * R::THREADS_PER_CONSUMER == 32u * R::CONSUMER_WARPS, \"\");\n  if (R::is_consumer()) out[threadIdx.x] = R::warp() + R::warpgroup() + R::warp_in_role() + R::consumer_index() + R::thread_in_consumer();\n",
                    );
                    for b in &r.barriers {
                        self.unit
                            .names
                            .push((NameKind::NamedBarrier, b.name.clone()));
                        let at = if b.per_consumer {
                            "R::consumer_index()"
                        } else {
                            ""
                        };
                        body.push_str(&format!(
                            "  static_assert(R::BARRIER_{n}_THREADS == {}u && R::BARRIER_{n} >= 1u, \"\");\n  R::sync_{n}({at});\n  R::arrive_{n}({at});\n",
                            b.threads,
                            n = b.name
                        ));
                    }
                    body.push_str("}\n");
                    self.body.push_str(&body);
                    return Some(v);
                }
                _ => self.unit.refused += 1,
            }
        }
        None
    }

    /// A kernel plan over what the part declared (its first pipeline, its roles, its set,
    /// when there) and a staging and a scratch region of its own, under random names; the
    /// kernel, named by the plan, takes every region from `tma_plan_<name>`. `None` after
    /// many refusals (dropping the pipeline and the set after a few).
    fn plan(
        &mut self,
        pipeline: Option<&ValidPipeline>,
        roles: Option<&ValidWarpRoles>,
        set: Option<&SetDraw>,
    ) -> Option<ValidKernelPlan> {
        let staged = self.stage_tile()?;
        for attempt in 0..64 {
            let name = self.name(NameKind::KernelPlan);
            let (staging, scratch) = (
                self.name(NameKind::PlanRegion),
                self.name(NameKind::PlanRegion),
            );
            let copies = self.rng.range(1, 3) as u32;
            let mut plan = KernelPlan::new(name.clone())
                .staging(staging.clone(), &staged, copies)
                .scratch(
                    scratch.clone(),
                    16 * self.rng.range(1, 64),
                    1 << self.rng.range(0, 10),
                );
            let full = attempt < 16;
            let pipeline = pipeline.filter(|_| full);
            let set = set.filter(|_| full);
            if let Some(p) = pipeline {
                plan = plan.pipeline(p);
            }
            if let Some(sd) = set {
                let members: Vec<(&str, &ValidSpec)> =
                    sd.members.iter().map(|(m, t)| (m.as_str(), t)).collect();
                plan = plan.tile_set(sd.name.clone(), &members);
            }
            plan = match roles {
                Some(r) => plan.roles(r),
                None => plan.block_threads(256),
            };
            match plan.validate() {
                Ok(v) if self.taken.take(NameKind::KernelPlan, &name) => {
                    self.unit.names.push((NameKind::KernelPlan, name.clone()));
                    for r in [&staging, &scratch] {
                        self.unit.names.push((NameKind::PlanRegion, r.clone()));
                    }
                    // The kernel sits at namespace scope under the plan's name: the shared
                    // arrays of the test's kernels are `raw__` (no user name has `__`), as an
                    // `extern` at block scope declares a namespace-scope name.
                    let mut body = format!(
                        "extern \"C\" __global__ void TMA_PLAN_{}_LAUNCH_BOUNDS {name}() {{\n  typedef tma_plan_{name} P;\n  extern __shared__ __align__(16) unsigned char raw__[];\n  unsigned char* base = P::base(raw__);\n  static_assert(P::DYNAMIC_SMEM_BYTES >= P::SMEM_BYTES && P::BLOCK_THREADS > 0u, \"\");\n  (void)P::tile_{staging}::RANK;\n  (void)P::{staging}(base, P::COPIES_{staging} - 1u);\n  (void)P::{scratch}(base);\n  (void)(P::OFFSET_{scratch} + P::BYTES_{scratch} + P::ALIGN_{scratch} + P::STRIDE_{staging});\n",
                        name.to_ascii_uppercase()
                    );
                    if let Some(p) = pipeline {
                        let r = &p.spec().name;
                        self.unit.names.push((NameKind::PlanRegion, r.clone()));
                        body.push_str(&format!(
                            "  const tma_pipe_{r} pipe = P::{r}(base);\n  pipe.init();\n"
                        ));
                    }
                    if let Some(sd) = set {
                        let r = &sd.name;
                        self.unit.names.push((NameKind::PlanRegion, r.clone()));
                        body.push_str(&format!(
                            "  (void)(P::{r}(base) + P::tile_{r}::SMEM_BYTES);\n"
                        ));
                    }
                    body.push_str("}\n");
                    self.body.push_str(&body);
                    return Some(v);
                }
                _ => self.unit.refused += 1,
            }
        }
        None
    }

    /// Two wgmma operand tiles that pair (A and B of one K), under random names, in a set
    /// `a`, `b` of the wgmma exercise's plan (the plan and the set under random names too).
    fn operands(&mut self) -> Option<ValidKernelPlan> {
        let pairs = [
            (DType::BF16, DType::BF16),
            (DType::F16, DType::F16),
            (DType::TF32, DType::TF32),
            (DType::E4M3, DType::E5M2),
        ];
        let &(da, db) = self.rng.pick(&pairs)?;
        let combos = operand_combinations();
        let k_slices = self.rng.range(1, 4);
        let pick = |rng: &mut XorShift, dtype: DType, operand: Operand, mn: u64| {
            let fits: Vec<_> = combos
                .iter()
                .filter(|(d, w, _)| *d == dtype && w.operand == operand)
                .collect();
            for _ in 0..16 {
                let (_, w, swizzle) = **rng.pick(&fits)?;
                if let Some((b, _)) = operand_case(rng, dtype, w, swizzle, mn, k_slices) {
                    return Some(b.spec().clone());
                }
            }
            None
        };
        let mn_a = 64 * self.rng.range(1, 2);
        let mn_b = 8 * self.rng.range(1, 32);
        let a = pick(self.rng, da, Operand::A, mn_a)?;
        let b = pick(self.rng, db, Operand::B, mn_b)?;
        let (a, b) = (self.named_tile(&a)?, self.named_tile(&b)?);
        for _ in 0..64 {
            let (set, name) = (
                self.name(NameKind::TileSet),
                self.name(NameKind::KernelPlan),
            );
            let plan = match tma_core::render::wgmma_exercise_plan(&name, &set, &a, &b).validate() {
                Ok(p)
                    if tma_core::render::TileSetCode::new(&set, &[("a", &a), ("b", &b)])
                        .is_ok()
                        && self.taken.take(NameKind::TileSet, &set)
                        && self.taken.take(NameKind::KernelPlan, &name) =>
                {
                    p
                }
                _ => {
                    self.unit.refused += 1;
                    continue;
                }
            };
            let body = tma_core::render::wgmma_exercise_body(&plan, &set).ok()?;
            self.unit.names.push((NameKind::TileSet, set.clone()));
            self.unit.names.push((NameKind::SetMember, "a".into()));
            self.unit.names.push((NameKind::SetMember, "b".into()));
            self.unit.names.push((NameKind::KernelPlan, name));
            self.unit.names.push((NameKind::PlanRegion, set));
            self.body.push_str(&body);
            return Some(plan);
        }
        None
    }
}

/// A random unit of `parts` parts, each a few tiles (their exercise kernels), a tile set,
/// aliases, warp roles (warpgroups with or without `setmaxnreg`, or warps; named barriers,
/// some per consumer), one or two pipelines whose consumers the roles' can be, and (one time
/// in two) a kernel plan over the part's first pipeline, roles and set with a staging and a
/// scratch region; the first part may add (one time in two) a wgmma operand pair with its
/// exercise, a kernel plan of its own. Names are drawn from [`random_name`] over the
/// `pools` of their kind; a name `taken` (by this unit or another sharing a header with it)
/// is drawn again.
pub fn random_unit(
    rng: &mut XorShift,
    pools: &NamePools,
    taken: &mut Taken,
    parts: usize,
) -> RandomUnit {
    let mut g = Gen {
        rng,
        pools,
        taken,
        unit: RandomUnit::default(),
        body: String::new(),
    };
    let mut pipelines = Vec::new();
    let mut all_roles = Vec::new();
    let mut plans = Vec::new();
    for part in 0..parts {
        let n = g.rng.range(1, 3);
        g.plain_tiles(n);
        let set = g.set();
        let n = g.rng.range(0, 2);
        g.aliases(n);
        let roles = g.roles();
        let consumers = roles
            .as_ref()
            .map_or(RoleWarps::Warpgroups(2), |r| r.roles().consumers);
        let mut own = Vec::new();
        for _ in 0..g.rng.range(1, 3) {
            if let Some(p) = g.pipeline(consumers) {
                own.push(p);
            }
        }
        if g.rng.chance(1, 2) {
            plans.extend(g.plan(own.first(), roles.as_ref(), set.as_ref()));
        }
        pipelines.extend(own);
        all_roles.extend(roles);
        if part == 0 && g.rng.chance(1, 2) {
            plans.extend(g.operands());
        }
    }
    let mut source = std::mem::take(&mut g.unit.source);
    for p in &pipelines {
        source = source.pipeline(p);
    }
    for r in &all_roles {
        source = source.warp_roles(r);
    }
    // Last: what a plan holds is in the source already (its staging tile is added here).
    for p in &plans {
        source = source.plan(p);
    }
    g.unit.source = source.body(&g.body);
    g.unit
}
