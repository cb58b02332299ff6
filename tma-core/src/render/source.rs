//! Whole translation units: [`KernelSource`], the headers for C++ users, the exercise kernel.

use super::*;
use crate::ident::NameKind;

/// Builds one translation unit: prelude, the tiles' helpers (ids in the order added), the
/// tile sets, pipelines, warp roles and kernel plans, the kernel's names for its tiles
/// (`using <alias> = tma_<name>;`) and a kernel body; and the typed description of what it
/// declares ([`KernelSource::facts`]) that the runtime carries beside the text.
///
/// A kernel body names a tile by the alias it chose ([`KernelSource::tile_as`]) or through its
/// set (`tma_<set>::<member>`), so no CUDA name is pasted into it:
///
/// ```
/// use tma_core::{render::KernelSource, validate, DType, TileSpec};
/// let rows = validate(&TileSpec::new("rows", DType::F32, [1024, 256], [32, 32]).dim_names(["M", "K"]))?;
/// let src = KernelSource::new()
///     .tile_as(&rows, "Rows")
///     .body(r#"
/// extern "C" __global__ void copy(const __grid_constant__ CUtensorMap in) {
///   extern __shared__ unsigned char raw[];
///   __shared__ alignas(8) tma_mbarrier bar;
///   unsigned char* smem = tma_align_smem<Rows>(raw);
///   // ... init bar ...
///   if (threadIdx.x == 0) {
///     tma_expect<Rows>(&bar);
///     Rows::load(&in, &bar, smem, {.M = 32 * (int)blockIdx.x, .K = 0});
///   }
///   tma_group<Rows>::wait(&bar, 0);
///   float x = Rows::at(smem, {.M = 1, .K = (int)threadIdx.x});
/// }
/// "#)
///     .build()?;
/// assert!(src.contains("using Rows = tma_rows;"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct KernelSource {
    tiles: Vec<ValidSpec>,
    /// Per tile: the source holds it outside its plans ([`crate::facts::TileFacts::outside_plans`]).
    tiles_outside: Vec<bool>,
    sets: Vec<SetDecl>,
    aliases: Vec<(String, usize)>,
    pipelines: Vec<crate::pipeline::ValidPipeline>,
    /// Per pipeline: the source holds it outside its plans.
    pipelines_outside: Vec<bool>,
    /// The kernel's names for pipelines: (alias, index into `pipelines`).
    pipeline_aliases: Vec<(String, usize)>,
    roles: Vec<crate::pipeline::ValidWarpRoles>,
    plans: Vec<crate::plan::ValidKernelPlan>,
    body: String,
}

impl KernelSource {
    pub fn new() -> KernelSource {
        KernelSource::default()
    }

    /// Adds a tile; tiles get ids 0, 1, ... in the order added.
    pub fn tile(mut self, valid: &ValidSpec) -> KernelSource {
        self.tiles.push(valid.clone());
        self.tiles_outside.push(true);
        self
    }

    /// Adds a tile (as [`KernelSource::tile`]) and names it `alias` for the kernel body:
    /// `using <alias> = tma_<name>;`. The alias must be a C identifier that starts with an
    /// upper-case letter (it sits at namespace scope beside CUDA's own functions and types,
    /// `min`, `j0`, `float4`, all lower-case), takes no name of the generated code
    /// ([`crate::ident::generated`]) and no name another alias, set, pipeline or tile of the
    /// source takes; [`KernelSource::build`] refuses it otherwise.
    pub fn tile_as(mut self, valid: &ValidSpec, alias: &str) -> KernelSource {
        self.aliases.push((alias.to_string(), self.tiles.len()));
        self.tile(valid)
    }

    /// Adds the tiles of a set (as [`KernelSource::tile`], in order) and their layout in one
    /// block's shared memory ([`TileSetCode`]): `struct tma_<name>` with, per member, the
    /// tile's struct as `tma_<name>::<member>` and its offset `OFFSET_<member>`, and the
    /// kernel's parameter list `TMA_<NAME>_PARAMS` (one `<member>_map` per tile).
    pub fn tile_set(mut self, name: &str, members: &[(&str, &ValidSpec)]) -> KernelSource {
        let mut decl = SetDecl {
            name: name.to_string(),
            members: Vec::with_capacity(members.len()),
        };
        for (member, valid) in members {
            decl.members.push((member.to_string(), self.tiles.len()));
            self.tiles.push((*valid).clone());
            self.tiles_outside.push(true);
        }
        self.sets.push(decl);
        self
    }

    /// Adds a pipeline (`struct tma_pipe_<name>`, [`PipelineCode`]) and the tiles it loads
    /// that the source does not hold yet (a tile equal to one already added is shared; ids as
    /// for [`KernelSource::tile`]). Pipelines get ids 0, 1, ... in the order added (each
    /// one's `PIPELINE_ID`; [`crate::facts::PipelineFacts`] describes it to the runtime).
    pub fn pipeline(self, pipeline: &crate::pipeline::ValidPipeline) -> KernelSource {
        self.add_pipeline(pipeline, true)
    }

    /// Adds `pipeline` and its stage tiles; `outside`: not for a plan only.
    fn add_pipeline(
        mut self,
        pipeline: &crate::pipeline::ValidPipeline,
        outside: bool,
    ) -> KernelSource {
        for t in &pipeline.spec().tiles {
            let i = self.tile_index(&t.tile, outside);
            if outside {
                self.tiles_outside[i] = true;
            }
        }
        self.pipelines.push(pipeline.clone());
        self.pipelines_outside.push(outside);
        self
    }

    /// Adds a pipeline (as [`KernelSource::pipeline`]) and names it `alias` for the kernel
    /// body: `using <alias> = tma_pipe_<name>;`. The alias obeys what a tile's alias does
    /// ([`KernelSource::tile_as`]: an upper-case first letter, no name of the generated code,
    /// none another declaration of the source takes).
    pub fn pipeline_as(
        mut self,
        pipeline: &crate::pipeline::ValidPipeline,
        alias: &str,
    ) -> KernelSource {
        self.pipeline_aliases
            .push((alias.to_string(), self.pipelines.len()));
        self.pipeline(pipeline)
    }

    /// Adds warp roles (`struct tma_roles_<name>`, [`WarpRolesCode`]).
    pub fn warp_roles(mut self, roles: &crate::pipeline::ValidWarpRoles) -> KernelSource {
        self.roles.push(roles.clone());
        self
    }

    /// Adds a kernel plan (`struct tma_plan_<name>`, [`PlanCode`]) and what it owns that the
    /// source does not hold yet (a part equal to one already added is shared, so several
    /// plans of one source may own the same tiles, pipelines or roles): its aliased tiles,
    /// tile sets, pipelines, warp roles and staging tiles. [`KernelSource::launch_plans`]
    /// gives the plans' launches ([`KernelSource::facts`] carries them to the runtime).
    pub fn plan(mut self, valid: &crate::plan::ValidKernelPlan) -> KernelSource {
        let p = valid.plan();
        for t in &p.tiles {
            let index = self.tile_index(&t.tile, false);
            if !self
                .aliases
                .iter()
                .any(|(a, i)| *a == t.alias && *i == index)
            {
                self.aliases.push((t.alias.clone(), index));
            }
        }
        for s in &p.tile_sets {
            let members = s
                .members
                .iter()
                .map(|(m, v)| (m.clone(), self.tile_index(v, false)))
                .collect();
            let decl = SetDecl {
                name: s.name.clone(),
                members,
            };
            if !self
                .sets
                .iter()
                .any(|d| d.name == decl.name && d.members == decl.members)
            {
                self.sets.push(decl);
            }
        }
        for pipe in &p.pipelines {
            if !self.pipelines.contains(pipe) {
                self = self.add_pipeline(pipe, false);
            }
        }
        if let Some(r) = &p.roles {
            if !self.roles.contains(r) {
                self.roles.push(r.clone());
            }
        }
        for r in &p.regions {
            if let crate::plan::RegionKind::Staging { tile, .. } = &r.kind {
                self.tile_index(tile, false);
            }
        }
        if !self.plans.contains(valid) {
            self.plans.push(valid.clone());
        }
        self
    }

    /// The launches of the plans added ([`KernelSource::plan`]), in order.
    pub fn launch_plans(&self) -> Vec<crate::plan::LaunchPlan> {
        self.plans.iter().map(|p| p.launch().clone()).collect()
    }

    /// What the source declares, typed, for the runtime (`tma_runtime::Source::kernel`
    /// carries it with the text): its tiles (ids as [`KernelSource::tile`] gives them, names,
    /// dim names, shared memory, target), its pipelines (ids, stages, cluster,
    /// `DYNAMIC_SMEM_BYTES`, stage tiles) and its plans' launches. The runtime names hang and
    /// check records and checks launches with it; nothing is read back out of the text.
    pub fn facts(&self) -> crate::facts::SourceFacts {
        use crate::facts::{PipelineFacts, QueueFacts, SourceFacts, TileFacts};
        let tiles = (0u32..)
            .zip(self.tiles.iter().zip(&self.tiles_outside))
            .map(|(id, (v, &outside))| TileFacts::of(v, id, outside))
            .collect();
        let pipelines = (0u32..)
            .zip(self.pipelines.iter().zip(&self.pipelines_outside))
            .map(|(id, (p, &outside))| {
                let stage_tiles = (p.spec().tiles.iter())
                    .filter_map(|t| self.tiles.iter().position(|x| *x == t.tile))
                    .filter_map(|i| u32::try_from(i).ok())
                    .collect();
                PipelineFacts::of(p, id, stage_tiles, outside)
            })
            .collect();
        // The plans' work queues, numbered across the plans in order (as render numbers them).
        let queues = (0u32..)
            .zip(self.plans.iter().flat_map(|p| {
                plan_queues(p).map(move |name| (p.name().to_string(), name.to_string()))
            }))
            .map(|(id, (kernel, name))| QueueFacts { id, kernel, name })
            .collect();
        SourceFacts {
            tiles,
            pipelines,
            queues,
            plans: self.launch_plans(),
        }
    }

    /// The index of `tile`, added (`outside` its plans or not) when the source does not hold
    /// it yet.
    fn tile_index(&mut self, tile: &ValidSpec, outside: bool) -> usize {
        match self.tiles.iter().position(|t| t == tile) {
            Some(i) => i,
            None => {
                self.tiles.push(tile.clone());
                self.tiles_outside.push(outside);
                self.tiles.len() - 1
            }
        }
    }

    /// Appends kernel code after the helpers.
    pub fn body(mut self, body: &str) -> KernelSource {
        self.body.push_str(body);
        self
    }

    /// Appends kernel code whose first line is line `line` of `file`, after a `#line`
    /// directive: NVRTC's messages about it then name that file and line. E.g.
    /// `.body_at("kernels/copy.cu", 1, COPY_CU)` for the text of that file, or
    /// `.body_at(file!(), line!(), r#"...` for a raw string that opens on the line of
    /// `line!()`. Code appended after it counts on from there. The file name is written as a
    /// C string literal (`\\`, `\"`, a newline as `\n`, other control characters in octal),
    /// so no file name ends the directive or starts a line of code; the line is kept in the
    /// range `#line` takes, 1 to 2147483647.
    pub fn body_at(mut self, file: &str, line: u32, body: &str) -> KernelSource {
        if !self.body.is_empty() && !self.body.ends_with('\n') {
            self.body.push('\n');
        }
        let line = line.clamp(1, i32::MAX as u32);
        self.body
            .push_str(&format!("#line {line} {}\n", c_string_literal(file)));
        self.body(body)
    }

    /// The whole source. Deterministic: the same inputs give the same bytes.
    pub fn build(&self) -> Result<String, RenderError> {
        let (tiles, mut globals) = render_tiles(&self.tiles)?;
        // Every struct, function, macro and alias at namespace scope is one name space
        // (macros included: they would replace a name): tiles, sets, pipelines, roles and
        // aliases must give different ones.
        let mut sets = Vec::with_capacity(self.sets.len());
        for set in &self.sets {
            let members: Vec<(&str, &ValidSpec)> = set
                .members
                .iter()
                .map(|(m, i)| (m.as_str(), &self.tiles[*i]))
                .collect();
            let code = TileSetCode::new(&set.name, &members)?;
            take_global_names(
                &mut globals,
                "tile set",
                NameKind::TileSet,
                &set.name,
                format!("tile set `{}`", set.name),
            )?;
            sets.push(code);
        }
        let mut aliases = String::new();
        for (alias, index) in &self.aliases {
            check_alias("tile alias", alias)?;
            let tile = &tiles[*index];
            take_global_names(
                &mut globals,
                "tile alias",
                NameKind::Alias,
                alias,
                format!("alias `{alias}` of tile `{}`", tile.name()),
            )?;
            aliases.push_str(&format!("using {alias} = {};\n", tile.cuda_name()));
        }
        let mut pipelines = Vec::with_capacity(self.pipelines.len());
        for (id, p) in (0u32..).zip(&self.pipelines) {
            let code = PipelineCode::new(p, id)?;
            take_global_names(
                &mut globals,
                "pipeline",
                NameKind::Pipeline,
                &p.spec().name,
                format!("pipeline `{}`", p.spec().name),
            )?;
            pipelines.push(code);
        }
        let mut pipeline_aliases = String::new();
        for (alias, index) in &self.pipeline_aliases {
            // `using <alias> = tma_pipe_<name>;` sits where a tile's alias does.
            check_alias("pipeline alias", alias)?;
            let (Some(code), Some(p)) = (pipelines.get(*index), self.pipelines.get(*index)) else {
                continue;
            };
            take_global_names(
                &mut globals,
                "pipeline alias",
                NameKind::Alias,
                alias,
                format!("alias `{alias}` of pipeline `{}`", p.spec().name),
            )?;
            pipeline_aliases.push_str(&format!("using {alias} = {};\n", code.cuda_name()));
        }
        check_consumers(&self.pipelines, &self.roles)?;
        let mut roles = Vec::with_capacity(self.roles.len());
        for r in &self.roles {
            let code = WarpRolesCode::new(r)?;
            take_global_names(
                &mut globals,
                "warp roles",
                NameKind::WarpRoles,
                &r.roles().name,
                format!("warp roles `{}`", r.roles().name),
            )?;
            roles.push(code);
        }
        let mut plans = Vec::with_capacity(self.plans.len());
        let mut first_queue_id = 0u32;
        for p in &self.plans {
            let code = PlanCode::with_queue_ids(p, first_queue_id)?;
            first_queue_id = first_queue_id.saturating_add(plan_queues(p).count() as u32);
            take_global_names(
                &mut globals,
                "kernel plan",
                NameKind::KernelPlan,
                p.name(),
                format!("kernel plan `{}`", p.name()),
            )?;
            plans.push(code);
        }
        let mut out = prelude_checked()?;
        for t in &tiles {
            out.push('\n');
            out.push_str(t.source());
        }
        out.push_str(&wgmma_ops(&self.tiles)?);
        for set in &sets {
            out.push('\n');
            out.push_str(set.source());
        }
        let queues = self.plans.iter().any(|p| plan_queues(p).next().is_some());
        if !pipelines.is_empty() || !roles.is_empty() || queues {
            out.push('\n');
            out.push_str(&warp_support()?);
        }
        for p in &pipelines {
            out.push('\n');
            out.push_str(p.source());
        }
        for r in &roles {
            out.push('\n');
            out.push_str(r.source());
        }
        for p in &plans {
            out.push('\n');
            out.push_str(p.source());
        }
        if !aliases.is_empty() {
            out.push_str("\n// The kernel's names for its tiles (KernelSource::tile_as).\n");
            out.push_str(&aliases);
        }
        if !pipeline_aliases.is_empty() {
            out.push_str(
                "\n// The kernel's names for its pipelines (KernelSource::pipeline_as).\n",
            );
            out.push_str(&pipeline_aliases);
        }
        if !self.body.is_empty() {
            out.push('\n');
            out.push_str(&self.body);
            if !self.body.ends_with('\n') {
                out.push('\n');
            }
        }
        Ok(out)
    }
}

/// The names of `plan`'s work-queue regions, in the order declared (their `QUEUE_ID`s, after
/// the earlier plans' queues).
fn plan_queues(plan: &crate::plan::ValidKernelPlan) -> impl Iterator<Item = &str> {
    plan.plan().regions.iter().filter_map(|r| match r.kind {
        crate::plan::RegionKind::WorkQueue(_) => Some(r.name.as_str()),
        _ => None,
    })
}

/// `text` as a C/C++ string literal, quotes included: `\\` and `"` escaped, newline, carriage
/// return and tab as `\n`, `\r`, `\t`, every other control character (and DEL) as a
/// three-digit octal escape (which, unlike `\x`, ends after three digits whatever follows).
/// Other characters, non-ASCII included, stay as they are.
pub(super) fn c_string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii_control() => out.push_str(&format!("\\{:03o}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Each tile's code (ids in slice order), and the names the tiles take at namespace scope
/// (each tile's struct, encode function, macros: [`crate::ident::generated_names`]), by who
/// took them.
pub(super) fn render_tiles(
    specs: &[ValidSpec],
) -> Result<(Vec<TileCode>, BTreeMap<String, String>), RenderError> {
    let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
    let mut globals = BTreeMap::new();
    let mut tiles = Vec::with_capacity(specs.len());
    for (id, v) in (0u32..).zip(specs) {
        let name = v.spec().name.as_str();
        if let Some(&first) = seen.get(name) {
            return Err(RenderError::DuplicateTile {
                name: name.to_string(),
                first,
                second: id,
            });
        }
        seen.insert(name, id);
        take_global_names(
            &mut globals,
            "tile",
            NameKind::Tile,
            name,
            format!("tile `{name}`"),
        )?;
        tiles.push(TileCode::new(v, id)?);
    }
    Ok((tiles, globals))
}

/// The tiles' shapes for host C++20 code (`g++ -std=c++20`): `#pragma once`, what the
/// coordinate structs need, and per tile a `struct tma_<name>` holding its `coords`,
/// `BOX_<dim>`, `EXTENT_<dim>`, `POSITIONS`, `position(n)` and `offset(p)`: the same text
/// its device struct holds, so a host program computes the shared-memory offsets a kernel
/// uses (and the tests check them against the CPU model).
pub fn host_header(specs: &[ValidSpec]) -> Result<String, RenderError> {
    let mut out = String::from(
        "// Generated by tma-core (tma::render::host_header); do not edit. Host C++20.\n#pragma once\n\n",
    );
    out.push_str(&render("shapes.cuh.tera", &NoContext {})?);
    let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
    let mut globals = BTreeMap::new();
    for (id, v) in (0u32..).zip(specs) {
        let name = v.spec().name.as_str();
        if seen.insert(name, ()).is_some() {
            let first = specs
                .iter()
                .position(|s| s.spec().name == name)
                .unwrap_or(0) as u32;
            return Err(RenderError::DuplicateTile {
                name: name.to_string(),
                first,
                second: id,
            });
        }
        take_global_names(
            &mut globals,
            "tile",
            NameKind::Tile,
            name,
            format!("tile `{name}`"),
        )?;
        out.push('\n');
        out.push_str(&render("host_tile.cuh.tera", &tile_context(v, id))?);
    }
    Ok(out)
}

/// A standalone header for C++ users: `#pragma once`, the prelude, every tile's helpers (ids
/// in slice order) and each tile's host encode function `tma_encode_<name>` (see
/// [`header_with`], which can add Mirage MPK's contract). Include it from `.cu` files compiled
/// with `-arch=sm_90a -std=c++20` (nvcc: the real `CUtensorMap` comes from `<cuda.h>`).
pub fn header(specs: &[ValidSpec]) -> Result<String, RenderError> {
    header_with(specs, HeaderOptions::default())
}

/// A kernel `tma_exercise_<name>(const __grid_constant__ CUtensorMap map, const
/// CUtensorMap* maps, int flags)` that calls every copy helper of the tile (as tile 0 of its
/// source) and of the prelude, so that its SASS shows UTMALDG, UTMASTG, UTMAREDG (when the
/// type has reductions), UTMAPF and UTMACCTL; and a kernel
/// `tma_exercise_<name>_shape(const __grid_constant__ CUtensorMap map, <tile>::elem* out)`
/// using `tma_align_smem`, `tma_expect`, `tma_group`, `position` and `at`. Build it with
/// `KernelSource::new().tile(valid).body(&exercise_body(valid)?)`.
pub fn exercise_body(valid: &ValidSpec) -> String {
    exercise_body_checked(valid).unwrap_or_else(|e| format!("#error \"tma exercise body: {e}\"\n"))
}

/// [`exercise_body`] with the error returned instead of written as `#error`.
pub fn exercise_body_checked(valid: &ValidSpec) -> Result<String, RenderError> {
    render("exercise.cu.tera", &tile_context(valid, 0))
}

/// The pipelines' consumers against the warp roles of the same source (which kernel pairs
/// which is not known): beside one warp roles, a pipeline released in the roles' consumer unit
/// (`Consumers::Warps(n)` beside consumer warps, `Warpgroups(n)` beside consumer warpgroups)
/// has the roles' consumer count, `Warpgroups(n)` beside consumer warps is all of them, and no
/// pipeline has more consumer threads than the roles; beside several, no pipeline has more
/// consumer threads than the largest. (`Warps(n)` beside warpgroups and `Threads(n)` may be a
/// subset.) A pipeline taken in turn ([`crate::pipeline::PipelineSpec::in_turn`]) is released
/// by one unit of the roles' consumers, of which there are at least two. The roles'
/// `is_producer()` / `consumer_index()` assume a 1-D block (`threadIdx.x`).
fn check_consumers(
    pipelines: &[crate::pipeline::ValidPipeline],
    roles: &[crate::pipeline::ValidWarpRoles],
) -> Result<(), RenderError> {
    use crate::pipeline::{Consumers, RoleWarps};
    let Some(widest) = roles.iter().max_by_key(|r| r.roles().consumer_warps()) else {
        return Ok(());
    };
    let w = widest.roles();
    for p in pipelines {
        let consumers = p.spec().consumers;
        let threads = consumers.threads().get().unwrap_or(u64::MAX);
        let error = |why| RenderError::ConsumersDisagree {
            pipeline: p.spec().name.clone(),
            consumers: consumers.to_string(),
            threads,
            roles: w.name.clone(),
            roles_consumers: w.consumers,
            why,
        };
        if p.spec().in_turn {
            // One consumer of the roles takes each stage: the pipeline's consumers are one
            // unit of the roles' consumers, and the roles have others to take turns with.
            match (consumers, w.consumers) {
                (Consumers::Warpgroups(1), RoleWarps::Warpgroups(c))
                | (Consumers::Warps(1), RoleWarps::Warps(c))
                    if c >= 2 => {}
                (Consumers::Warpgroups(1), RoleWarps::Warpgroups(_))
                | (Consumers::Warps(1), RoleWarps::Warps(_)) => {
                    return Err(error(
                        "a pipeline taken in turn needs at least two consumers to take turns: with one, declare it without in_turn",
                    ));
                }
                _ => {
                    return Err(error(
                        "a pipeline taken in turn is released by one consumer of the roles: Consumers::Warpgroups(1) beside consumer warpgroups, Consumers::Warps(1) beside consumer warps",
                    ));
                }
            }
            continue;
        }
        if threads > w.consumer_threads() {
            return Err(error(
                "more threads release each stage than the roles' consumers have, so its empty barrier never completes",
            ));
        }
        if roles.len() != 1 {
            continue;
        }
        match (consumers, w.consumers) {
            (Consumers::Warpgroups(n), RoleWarps::Warpgroups(c)) if n != c => {
                return Err(error(
                    "each consumer warpgroup of the roles releases each stage: declare Consumers::Warpgroups of the same count (or Warps(n) for a subset)",
                ));
            }
            (Consumers::Warps(n), RoleWarps::Warps(c)) if n != c => {
                return Err(error(
                    "each consumer warp of the roles releases each stage: declare Consumers::Warps of the same count",
                ));
            }
            (Consumers::Warpgroups(_), RoleWarps::Warps(_)) if threads != w.consumer_threads() => {
                return Err(error(
                    "the roles' consumers are warps: a pipeline released by warpgroups is released by all of them; declare Consumers::Warps of the roles' count",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// An alias (`using <alias> = ...;`) is a C identifier that meets none of the generated names.
fn check_alias(what: &'static str, alias: &str) -> Result<(), RenderError> {
    if let Err(problem) = check_name(alias) {
        return Err(RenderError::InvalidName {
            what,
            name: alias.to_string(),
            problem,
        });
    }
    match crate::ident::generated_clash(NameKind::Alias, alias) {
        Some(clash) => Err(RenderError::GeneratedName {
            what,
            name: alias.to_string(),
            clash,
        }),
        None => Ok(()),
    }
}
