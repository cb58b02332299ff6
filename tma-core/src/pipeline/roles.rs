//! Warp specialization: which warps produce and which consume, optionally the registers each
//! keeps after `setmaxnreg` (checked against the register file), and named barriers with ids
//! allocated without clashes ([`WarpRoles`] -> [`WarpRoles::validate`] -> [`ValidWarpRoles`],
//! rendered by [`crate::render::WarpRolesCode`]).
//!
//! The block is the producer warps (threads `0 .. 32 P`) then the consumer warps (threads
//! `32 P ..`), counted along `threadIdx.x`: the generated `is_producer()`, `consumer_index()`,
//! `warp_in_role()` read `threadIdx.x` alone, so they assume a 1-D block
//! (`block = (32 (P + C), 1, 1)`; a 2-D or 3-D block makes them wrong). Each role is counted in
//! warps or in warpgroups of 4 ([`RoleWarps`]): a kernel may have one producer warp and four
//! consumer warps (160 threads), or a producer warpgroup and two consumer warpgroups (384).
//! The consumers' unit (a warp or a warpgroup) is what `consumer_index()` counts and what a
//! per-consumer named barrier gives one id to. Consumers counted in warpgroups start on a
//! warpgroup ([`crate::Rule::WarpgroupAlignment`]: wgmma's warpgroup is warps `4k .. 4k + 3`).
//!
//! `setmaxnreg` is optional. It is executed by all warps of a warpgroup (PTX ISA,
//! "setmaxnreg": "the same setmaxnreg instruction must be executed by all warps in a
//! warpgroup"), so it needs roles of whole warpgroups ([`crate::Rule::SetmaxnregWarpgroups`]).
//! A launch allocates each thread the registers the kernel was compiled for; with
//! `__launch_bounds__(threads, blocks_per_sm)` that is at most [`ValidWarpRoles::launch_regs`]:
//! 64K registers over `threads x blocks_per_sm`, rounded down to a multiple of 8. `setmaxnreg`
//! only moves registers within the block's pool, so
//!
//! ```text
//! 32 (P x producer_regs + C x consumer_regs) <= 32 (P + C) x launch_regs     (P, C in warps)
//! ```
//!
//! ([`crate::Rule::RegisterBudget`]); otherwise `setmaxnreg.inc` blocks forever. And
//! `setmaxnreg.dec` only lowers a warp's count, `.inc` only raises it, so
//! `producer_regs <= launch_regs <= consumer_regs` ([`crate::Rule::SetmaxnregDirection`]).
//!
//! Named barriers take ids 1, 2, .. in the order declared; a *per-consumer* barrier takes one
//! id per consumer (`sync_<name>(consumer)` selects it), and every id counts towards the 15
//! ([`crate::Rule::NamedBarrierIds`]).

use std::fmt;
use std::ops::RangeInclusive;

use super::{check_resident_blocks, finding, PipelineErrors, MAX_BLOCK_THREADS};
use crate::error::{Field, SpecError};
use crate::ident::{check_name, generated_clash, shared_generated_name, NameKind};
use crate::rules::Rule;
use crate::size::Size;

/// Registers of one SM's register file (sm_90: 64K 32-bit registers).
pub const REGISTER_FILE: u64 = 65536;

/// The field a finding on the block's warpgroups as a whole names (their sum is past a block's
/// threads) when both roles are counted in warpgroups.
pub const BLOCK_WARPGROUPS: &str = "producer_warpgroups + consumer_warpgroups";

/// The field a finding on the block's warps as a whole names when a role is counted in warps.
pub const BLOCK_WARPS: &str = "producer warps + consumer warps";

/// The largest named-barrier id: ids 0 to 15 exist, 0 is `__syncthreads()`.
pub const MAX_NAMED_BARRIER_ID: u32 = 15;

/// `setmaxnreg`'s register count: a multiple of 8 in [24, 256] (PTX ISA, "setmaxnreg").
pub const SETMAXNREG_MIN: u32 = 24;
pub const SETMAXNREG_MAX: u32 = 256;

/// How many warps a role has, in the unit it is declared in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RoleWarps {
    /// `n` warps of 32 threads.
    Warps(u32),
    /// `n` warpgroups of 4 warps (128 threads).
    Warpgroups(u32),
}

impl RoleWarps {
    /// The count as declared.
    pub fn count(self) -> u32 {
        match self {
            RoleWarps::Warps(n) | RoleWarps::Warpgroups(n) => n,
        }
    }
    /// Warps of one unit: 1 or 4.
    pub fn warps_per_unit(self) -> u32 {
        match self {
            RoleWarps::Warps(_) => 1,
            RoleWarps::Warpgroups(_) => 4,
        }
    }
    /// Warps in all.
    pub fn warps(self) -> u64 {
        u64::from(self.count()) * u64::from(self.warps_per_unit())
    }
    /// `warps` or `warpgroups`.
    pub fn unit(self) -> &'static str {
        match self {
            RoleWarps::Warps(_) => "warps",
            RoleWarps::Warpgroups(_) => "warpgroups",
        }
    }
    /// The field that declares it: `producer_warps`, `consumer_warpgroups`, ...
    fn field(self, producer: bool) -> &'static str {
        match (producer, self) {
            (true, RoleWarps::Warps(_)) => "producer_warps",
            (true, RoleWarps::Warpgroups(_)) => "producer_warpgroups",
            (false, RoleWarps::Warps(_)) => "consumer_warps",
            (false, RoleWarps::Warpgroups(_)) => "consumer_warpgroups",
        }
    }
}

impl fmt::Display for RoleWarps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.unit(), self.count())
    }
}

/// The registers per thread each role keeps after `setmaxnreg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegisterSplit {
    /// Registers per producer thread after `setmaxnreg.dec`.
    pub producer_regs: u32,
    /// Registers per consumer thread after `setmaxnreg.inc`.
    pub consumer_regs: u32,
}

/// A named barrier: `bar.sync id, threads` over `threads` threads (a multiple of 32). A
/// per-consumer barrier is one such barrier per consumer, each with its own id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NamedBarrier {
    pub name: String,
    pub threads: u32,
    /// One barrier (and id) per consumer: `sync_<name>(consumer)`.
    pub per_consumer: bool,
}

/// The warp roles of a warp-specialized kernel (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WarpRoles {
    /// Names `struct tma_roles_<name>`.
    pub name: String,
    /// The producers: the block's first warps.
    pub producers: RoleWarps,
    /// The consumers: the warps after the producers; their unit is what `consumer_index()`
    /// counts.
    pub consumers: RoleWarps,
    /// The registers after `setmaxnreg`; `None`: no `setmaxnreg`.
    pub setmaxnreg: Option<RegisterSplit>,
    /// Blocks the kernel's `__launch_bounds__` asks to fit on one SM.
    pub blocks_per_sm: u32,
    /// Named barriers, given ids 1, 2, ... in order (a per-consumer one, one per consumer).
    pub barriers: Vec<NamedBarrier>,
}

impl WarpRoles {
    /// One producer warpgroup at `producer_regs` and `consumer_warpgroups` consumer
    /// warpgroups at `consumer_regs` after `setmaxnreg`, one block per SM, no named barriers yet.
    pub fn new(
        name: impl Into<String>,
        producer_regs: u32,
        consumer_warpgroups: u32,
        consumer_regs: u32,
    ) -> WarpRoles {
        WarpRoles {
            name: name.into(),
            producers: RoleWarps::Warpgroups(1),
            consumers: RoleWarps::Warpgroups(consumer_warpgroups),
            setmaxnreg: Some(RegisterSplit {
                producer_regs,
                consumer_regs,
            }),
            blocks_per_sm: 1,
            barriers: Vec::new(),
        }
    }
    /// `producer_warps` producer warps and `consumer_warps` consumer warps (each its own
    /// consumer), no `setmaxnreg`, one block per SM, no named barriers yet.
    pub fn warps(name: impl Into<String>, producer_warps: u32, consumer_warps: u32) -> WarpRoles {
        WarpRoles {
            name: name.into(),
            producers: RoleWarps::Warps(producer_warps),
            consumers: RoleWarps::Warps(consumer_warps),
            setmaxnreg: None,
            blocks_per_sm: 1,
            barriers: Vec::new(),
        }
    }
    /// `n` producer warpgroups.
    pub fn producer_warpgroups(mut self, n: u32) -> WarpRoles {
        self.producers = RoleWarps::Warpgroups(n);
        self
    }
    pub fn producers(mut self, producers: RoleWarps) -> WarpRoles {
        self.producers = producers;
        self
    }
    pub fn consumers(mut self, consumers: RoleWarps) -> WarpRoles {
        self.consumers = consumers;
        self
    }
    /// The registers per thread after `setmaxnreg` (roles of whole warpgroups only).
    pub fn setmaxnreg(mut self, producer_regs: u32, consumer_regs: u32) -> WarpRoles {
        self.setmaxnreg = Some(RegisterSplit {
            producer_regs,
            consumer_regs,
        });
        self
    }
    /// No `setmaxnreg`: every warp keeps what the launch allocates.
    pub fn without_setmaxnreg(mut self) -> WarpRoles {
        self.setmaxnreg = None;
        self
    }
    pub fn blocks_per_sm(mut self, n: u32) -> WarpRoles {
        self.blocks_per_sm = n;
        self
    }
    /// Adds a named barrier over `threads` threads (its id is the next free one).
    pub fn barrier(mut self, name: impl Into<String>, threads: u32) -> WarpRoles {
        self.barriers.push(NamedBarrier {
            name: name.into(),
            threads,
            per_consumer: false,
        });
        self
    }
    /// Adds a named barrier per consumer, each over `threads` threads (the next free ids, one
    /// per consumer): `sync_<name>(consumer)` in the kernel.
    pub fn per_consumer_barrier(mut self, name: impl Into<String>, threads: u32) -> WarpRoles {
        self.barriers.push(NamedBarrier {
            name: name.into(),
            threads,
            per_consumer: true,
        });
        self
    }
    /// Producer warps.
    pub fn producer_warps(&self) -> u64 {
        self.producers.warps()
    }
    /// Consumer warps.
    pub fn consumer_warps(&self) -> u64 {
        self.consumers.warps()
    }
    /// Consumers: what `consumer_index()` counts (warps or warpgroups, as declared).
    pub fn consumer_count(&self) -> u32 {
        self.consumers.count()
    }
    /// Threads of the block: 32 per warp.
    pub fn threads(&self) -> u64 {
        32 * (self.producer_warps() + self.consumer_warps())
    }
    /// Threads of the consumer warps.
    pub fn consumer_threads(&self) -> u64 {
        32 * self.consumer_warps()
    }
    /// The roles as their messages count them: in warpgroups when both roles are, else in
    /// warps (producers, consumers, the unit, its threads).
    fn counted(&self) -> (u64, u64, &'static str, u64) {
        match (self.producers, self.consumers) {
            (RoleWarps::Warpgroups(p), RoleWarps::Warpgroups(c)) => {
                (u64::from(p), u64::from(c), "warpgroup", 128)
            }
            _ => (self.producer_warps(), self.consumer_warps(), "warp", 32),
        }
    }
    /// Ids a barrier takes: one, or one per consumer.
    fn ids_of(&self, b: &NamedBarrier) -> u32 {
        if b.per_consumer {
            self.consumer_count()
        } else {
            1
        }
    }

    /// Checks every rule; all findings at once.
    pub fn validate(&self) -> Result<ValidWarpRoles, PipelineErrors> {
        let mut errors: Vec<SpecError> = Vec::new();
        if let Err(problem) = check_name(&self.name) {
            errors.push(finding(
                Field::Name,
                &self.name,
                Rule::NameIsIdentifier,
                format!(
                    "the roles' name names CUDA (`tma_roles_{}`): it {}",
                    self.name,
                    problem.describe()
                ),
            ));
        } else if let Some(why) = generated_clash(NameKind::WarpRoles, &self.name) {
            errors.push(finding(
                Field::Name,
                &self.name,
                Rule::GeneratedNameClash,
                format!(
                    "the roles' name names CUDA (`tma_roles_{}`, `TMA_ROLES_{}_LAUNCH_BOUNDS`); this one clashes: {why}",
                    self.name,
                    self.name.to_ascii_uppercase()
                ),
            ));
        }
        let threads = self.threads();
        let producers = Field::WarpRoles(self.producers.field(true));
        let consumers = Field::WarpRoles(self.consumers.field(false));
        for (field, n, what) in [
            (producers.clone(), self.producers.count(), "producer"),
            (consumers.clone(), self.consumers.count(), "consumer"),
            (
                Field::WarpRoles("blocks_per_sm"),
                self.blocks_per_sm,
                "block per SM",
            ),
        ] {
            if n == 0 {
                errors.push(finding(
                    field,
                    n,
                    Rule::WarpgroupCounts,
                    format!("the roles have at least one {what}"),
                ));
            }
        }
        if threads > u64::from(MAX_BLOCK_THREADS) {
            let (p, c, unit, per) = self.counted();
            let field = if per == 128 {
                BLOCK_WARPGROUPS
            } else {
                BLOCK_WARPS
            };
            errors.push(finding(
                Field::WarpRoles(field),
                p + c,
                Rule::WarpgroupCounts,
                format!(
                    "{p} producer + {c} consumer {unit}(s) x {per} = {threads} threads; a block has at most {MAX_BLOCK_THREADS} ({} {unit}s)",
                    u64::from(MAX_BLOCK_THREADS) / per
                ),
            ));
        }
        // A consumer warpgroup is a warpgroup of the hardware: warps 4k .. 4k + 3.
        if let RoleWarps::Warpgroups(_) = self.consumers {
            let pw = self.producer_warps();
            if pw % 4 != 0 {
                errors.push(finding(
                    producers.clone(),
                    self.producers.count(),
                    Rule::WarpgroupAlignment,
                    format!(
                        "the consumers are warpgroups, so they start on one: {pw} producer warp(s) put the first \
                         at warp {pw}, across two warpgroups of the block (wgmma and setmaxnreg act on warps \
                         4k .. 4k + 3): make the producers a multiple of 4 warps, or count the consumers in warps"
                    ),
                ));
            }
        }
        if let Some(split) = self.setmaxnreg {
            for (field, regs) in [
                ("producer_regs", split.producer_regs),
                ("consumer_regs", split.consumer_regs),
            ] {
                if !(SETMAXNREG_MIN..=SETMAXNREG_MAX).contains(&regs) || regs % 8 != 0 {
                    errors.push(finding(
                        Field::WarpRoles(field),
                        regs,
                        Rule::SetmaxnregRange,
                        format!(
                            "setmaxnreg takes a multiple of 8 in [{SETMAXNREG_MIN}, {SETMAXNREG_MAX}]"
                        ),
                    ));
                }
            }
            for (role, field, what) in [
                (self.producers, &producers, "producer"),
                (self.consumers, &consumers, "consumer"),
            ] {
                if role.warps() % 4 != 0 {
                    errors.push(finding(
                        field.clone(),
                        role.count(),
                        Rule::SetmaxnregWarpgroups,
                        format!(
                            "setmaxnreg (producer_regs / consumer_regs) is executed by all warps of a warpgroup \
                             (PTX ISA, \"setmaxnreg\"), so each role is whole warpgroups: {} {what} warp(s) share \
                             a warpgroup with the other role; declare no producer_regs / consumer_regs, or a \
                             multiple of 4 warps",
                            role.warps()
                        ),
                    ));
                }
            }
        }
        // `__launch_bounds__(threads, blocks_per_sm)`: blocks resident on one SM (the block
        // itself within 1024 threads, checked above).
        check_resident_blocks(
            Field::WarpRoles("blocks_per_sm"),
            self.blocks_per_sm,
            (threads <= u64::from(MAX_BLOCK_THREADS)).then_some(threads),
            &mut errors,
        );
        let launch_regs = launch_regs(threads, u64::from(self.blocks_per_sm));
        if let (Some(split), true) = (self.setmaxnreg, errors.is_empty()) {
            self.check_split(split, threads, launch_regs, &mut errors);
        }
        let ids = self.check_barriers(threads, &mut errors);
        if errors.is_empty() {
            Ok(ValidWarpRoles {
                roles: self.clone(),
                launch_regs,
                ids,
            })
        } else {
            Err(PipelineErrors {
                what: format!("warp roles `{}`", self.name),
                errors,
            })
        }
    }

    /// `setmaxnreg`'s direction and the register budget (on roles that passed the rest).
    fn check_split(
        &self,
        split: RegisterSplit,
        threads: u64,
        launch_regs: u64,
        errors: &mut Vec<SpecError>,
    ) {
        // `setmaxnreg.dec` lowers the count a warp runs with and `.inc` raises it: a producer
        // above the launch's count, or a consumer below it, asks for what PTX does not define.
        if u64::from(split.producer_regs) > launch_regs {
            errors.push(finding(
                Field::WarpRoles("producer_regs"),
                split.producer_regs,
                Rule::SetmaxnregDirection,
                format!(
                    "the producers release registers with setmaxnreg.dec, which only lowers the count: \
                     a launch of {threads} threads x {} block(s) per SM runs with at most {launch_regs} per thread, \
                     so producer_regs is at most {launch_regs}",
                    self.blocks_per_sm
                ),
            ));
        }
        if u64::from(split.consumer_regs) < launch_regs {
            errors.push(finding(
                Field::WarpRoles("consumer_regs"),
                split.consumer_regs,
                Rule::SetmaxnregDirection,
                format!(
                    "the consumers take registers with setmaxnreg.inc, which only raises the count: \
                     a launch of {threads} threads x {} block(s) per SM runs with up to {launch_regs} per thread, \
                     so consumer_regs is at least {launch_regs}",
                    self.blocks_per_sm
                ),
            ));
        }
        if !errors.is_empty() {
            return;
        }
        // Through `Size`: warps and registers of u32::MAX each overflow u64 here (and
        // WarpgroupCounts / SetmaxnregRange refuse them before).
        let (p, c, unit, per) = self.counted();
        let used = Size::new(per)
            * (Size::new(p) * split.producer_regs + Size::new(c) * split.consumer_regs);
        let pool = Size::new(threads) * launch_regs;
        let fits = used.get().zip(pool.get()).is_some_and(|(u, p)| u <= p);
        if !fits {
            errors.push(finding(
                Field::WarpRoles("consumer_regs"),
                split.consumer_regs,
                Rule::RegisterBudget,
                format!(
                    "{p} producer {unit}(s) x {} + {c} consumer {unit}(s) x {} registers x {per} threads = {used} registers; \
                     a launch of {threads} threads x {} block(s) per SM gets at most {launch_regs} per thread, {pool} for the block \
                     (64K per SM): setmaxnreg.inc would wait forever",
                    split.producer_regs,
                    split.consumer_regs,
                    self.blocks_per_sm
                ),
            ));
        }
    }

    /// Each barrier's name, ids and threads; the first id of each (ids in declaration order).
    fn check_barriers(&self, threads: u64, errors: &mut Vec<SpecError>) -> Vec<u32> {
        let mut ids = Vec::with_capacity(self.barriers.len());
        let mut next: u64 = 1;
        let mut past_last = false;
        for (i, b) in self.barriers.iter().enumerate() {
            let count = u64::from(self.ids_of(b));
            let first = next;
            let last = first + count.max(1) - 1;
            next = first + count;
            let earlier = &self.barriers[..i];
            let problem = if let Err(p) = check_name(&b.name) {
                Some((
                    b.name.clone(),
                    format!(
                        "its name names CUDA (`sync_{}`): it {}",
                        b.name,
                        p.describe()
                    ),
                ))
            } else if let Some(why) = generated_clash(NameKind::NamedBarrier, &b.name) {
                // Every form the templates give a barrier, the per-consumer ones included
                // (`sync_<b>(c)`, `arrive_<b>(c)`), is in the table.
                errors.push(finding(
                    Field::NamedBarrier {
                        name: b.name.clone(),
                    },
                    &b.name,
                    Rule::GeneratedNameClash,
                    format!(
                        "its name names CUDA (`BARRIER_{n}`, `sync_{n}`, `arrive_{n}`); this one clashes: {why}",
                        n = b.name
                    ),
                ));
                None
            } else if earlier.iter().any(|o| o.name == b.name) {
                Some((b.name.clone(), "two named barriers have this name".into()))
            } else if let Some((other, ident)) = earlier.iter().find_map(|o| {
                shared_generated_name(NameKind::NamedBarrier, &o.name, &b.name)
                    .map(|ident| (o.name.clone(), ident))
            }) {
                // `x` and `x_THREADS` both give `BARRIER_x_THREADS`.
                Some((
                    b.name.clone(),
                    format!("this barrier and barrier `{other}` would both give the roles struct a `{ident}`"),
                ))
            } else if last > u64::from(MAX_NAMED_BARRIER_ID) && !past_last {
                // The first barrier past the ids; the ones after it say nothing new.
                past_last = true;
                let total: u64 = self
                    .barriers
                    .iter()
                    .map(|o| u64::from(self.ids_of(o)))
                    .sum();
                let took = if b.per_consumer {
                    format!(
                        "`{}` takes ids {first} to {last}, one per consumer ({} {})",
                        b.name,
                        self.consumer_count(),
                        self.consumers.unit()
                    )
                } else {
                    format!("`{}` takes id {first}", b.name)
                };
                Some((
                    format!("id {last}"),
                    format!("named barrier ids are 1 to {MAX_NAMED_BARRIER_ID} (0 is __syncthreads): {took}; the barriers need {total} ids"),
                ))
            } else if b.threads == 0 || b.threads % 32 != 0 || u64::from(b.threads) > threads {
                Some((
                    b.threads.to_string(),
                    format!("a named barrier synchronises a multiple of 32 threads, at most the block's {threads}"),
                ))
            } else {
                None
            };
            if let Some((value, message)) = problem {
                errors.push(finding(
                    Field::NamedBarrier {
                        name: b.name.clone(),
                    },
                    value,
                    Rule::NamedBarrierIds,
                    message,
                ));
            }
            ids.push(u32::try_from(first).unwrap_or(u32::MAX));
        }
        ids
    }
}

/// Registers per thread a launch of `threads` threads with `blocks` blocks per SM allocates at
/// most: 64K over them, rounded down to a multiple of 8, at most 256.
fn launch_regs(threads: u64, blocks: u64) -> u64 {
    match threads.checked_mul(blocks) {
        Some(t) if t > 0 => (REGISTER_FILE / t / 8 * 8).min(u64::from(SETMAXNREG_MAX)),
        _ => 0,
    }
}

/// Warp roles whose rules all hold: registers that fit, named barriers with ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidWarpRoles {
    roles: WarpRoles,
    launch_regs: u64,
    /// Each barrier's first id.
    ids: Vec<u32>,
}

impl ValidWarpRoles {
    pub fn roles(&self) -> &WarpRoles {
        &self.roles
    }
    /// Registers per thread the launch allocates at most (see the module docs).
    pub fn launch_regs(&self) -> u64 {
        self.launch_regs
    }
    /// Each named barrier with its (first) id: 1, 2, ...; a per-consumer barrier's consumer
    /// `c` has the id `first + c`.
    pub fn barriers(&self) -> impl Iterator<Item = (&NamedBarrier, u32)> {
        self.roles.barriers.iter().zip(self.ids.iter().copied())
    }
    /// Each named barrier with all its ids (one, or one per consumer).
    pub fn barrier_ids(&self) -> impl Iterator<Item = (&NamedBarrier, RangeInclusive<u32>)> {
        self.barriers()
            .map(|(b, first)| (b, first..=first + self.roles.ids_of(b).max(1) - 1))
    }
    /// Named-barrier ids in use (the last one's last id; 0 without barriers).
    pub fn ids_used(&self) -> u32 {
        self.barrier_ids().map(|(_, r)| *r.end()).max().unwrap_or(0)
    }
}
