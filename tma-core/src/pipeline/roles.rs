//! Warp specialization: which warpgroups produce and which consume, the registers each keeps
//! after `setmaxnreg` (checked against the register file), and named barriers with ids
//! allocated without clashes ([`WarpRoles`] -> [`WarpRoles::validate`] -> [`ValidWarpRoles`],
//! rendered by [`crate::render::WarpRolesCode`]).
//!
//! The block is `producer_warpgroups` warpgroups (threads `0 .. 128 p`) then
//! `consumer_warpgroups` (threads `128 p ..`), counted along `threadIdx.x`: the generated
//! `is_producer()` and `consumer_index()` read `threadIdx.x` alone, so they assume a 1-D block
//! (`block = (128 (p + c), 1, 1)`; a 2-D or 3-D block makes them wrong). A launch allocates each thread the registers
//! the kernel was compiled for; with `__launch_bounds__(threads, blocks_per_sm)` that is at
//! most [`ValidWarpRoles::launch_regs`]: 64K registers over `threads x blocks_per_sm`, rounded
//! down to a multiple of 8. `setmaxnreg` only moves registers within the block's pool, so
//!
//! ```text
//! 128 (p x producer_regs + c x consumer_regs) <= 128 (p + c) x launch_regs
//! ```
//!
//! ([`crate::Rule::RegisterBudget`]); otherwise `setmaxnreg.inc` blocks forever. And
//! `setmaxnreg.dec` only lowers a warp's count, `.inc` only raises it, so
//! `producer_regs <= launch_regs <= consumer_regs` ([`crate::Rule::SetmaxnregDirection`]).

use super::{finding, PipelineErrors, MAX_BLOCK_THREADS};
use crate::error::{Field, SpecError};
use crate::ident::{check_name, generated_clash, shared_generated_name, NameKind};
use crate::rules::Rule;

/// Registers of one SM's register file (sm_90: 64K 32-bit registers).
pub const REGISTER_FILE: u64 = 65536;

/// The field a finding on the block's warpgroups as a whole names (their sum is past a block's
/// threads).
pub const BLOCK_WARPGROUPS: &str = "producer_warpgroups + consumer_warpgroups";

/// The largest named-barrier id: ids 0 to 15 exist, 0 is `__syncthreads()`.
pub const MAX_NAMED_BARRIER_ID: u32 = 15;

/// `setmaxnreg`'s register count: a multiple of 8 in [24, 256] (PTX ISA, "setmaxnreg").
pub const SETMAXNREG_MIN: u32 = 24;
pub const SETMAXNREG_MAX: u32 = 256;

/// A named barrier: `bar.sync id, threads` over `threads` threads (a multiple of 32).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NamedBarrier {
    pub name: String,
    pub threads: u32,
}

/// The warp roles of a warp-specialized kernel (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WarpRoles {
    /// Names `struct tma_roles_<name>`.
    pub name: String,
    pub producer_warpgroups: u32,
    /// Registers per producer thread after `setmaxnreg.dec`.
    pub producer_regs: u32,
    pub consumer_warpgroups: u32,
    /// Registers per consumer thread after `setmaxnreg.inc`.
    pub consumer_regs: u32,
    /// Blocks the kernel's `__launch_bounds__` asks to fit on one SM.
    pub blocks_per_sm: u32,
    /// Named barriers, given ids 1, 2, ... in order.
    pub barriers: Vec<NamedBarrier>,
}

impl WarpRoles {
    /// One producer warpgroup and `consumer_warpgroups` consumers, one block per SM, no
    /// named barriers yet.
    pub fn new(
        name: impl Into<String>,
        producer_regs: u32,
        consumer_warpgroups: u32,
        consumer_regs: u32,
    ) -> WarpRoles {
        WarpRoles {
            name: name.into(),
            producer_warpgroups: 1,
            producer_regs,
            consumer_warpgroups,
            consumer_regs,
            blocks_per_sm: 1,
            barriers: Vec::new(),
        }
    }
    pub fn producer_warpgroups(mut self, n: u32) -> WarpRoles {
        self.producer_warpgroups = n;
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
        });
        self
    }
    /// Threads of the block: 128 per warpgroup.
    pub fn threads(&self) -> u64 {
        128 * (u64::from(self.producer_warpgroups) + u64::from(self.consumer_warpgroups))
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
        for (field, n) in [
            ("producer_warpgroups", self.producer_warpgroups),
            ("consumer_warpgroups", self.consumer_warpgroups),
            ("blocks_per_sm", self.blocks_per_sm),
        ] {
            if n == 0 {
                errors.push(finding(
                    Field::WarpRoles(field),
                    n,
                    Rule::WarpgroupCounts,
                    format!("{field} is at least 1"),
                ));
            }
        }
        if threads > u64::from(MAX_BLOCK_THREADS) {
            errors.push(finding(
                Field::WarpRoles(BLOCK_WARPGROUPS),
                u64::from(self.producer_warpgroups) + u64::from(self.consumer_warpgroups),
                Rule::WarpgroupCounts,
                format!(
                    "{} producer + {} consumer warpgroup(s) x 128 = {threads} threads; a block has at most {MAX_BLOCK_THREADS} ({} warpgroups)",
                    self.producer_warpgroups,
                    self.consumer_warpgroups,
                    MAX_BLOCK_THREADS / 128
                ),
            ));
        }
        for (field, regs) in [
            ("producer_regs", self.producer_regs),
            ("consumer_regs", self.consumer_regs),
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
        let launch_regs = launch_regs(threads, u64::from(self.blocks_per_sm));
        // `setmaxnreg.dec` lowers the count a warp runs with and `.inc` raises it: a producer
        // above the launch's count, or a consumer below it, asks for what PTX does not define.
        if errors.is_empty() {
            if u64::from(self.producer_regs) > launch_regs {
                errors.push(finding(
                    Field::WarpRoles("producer_regs"),
                    self.producer_regs,
                    Rule::SetmaxnregDirection,
                    format!(
                        "the producers release registers with setmaxnreg.dec, which only lowers the count: \
                         a launch of {threads} threads x {} block(s) per SM runs with at most {launch_regs} per thread, \
                         so producer_regs is at most {launch_regs}",
                        self.blocks_per_sm
                    ),
                ));
            }
            if u64::from(self.consumer_regs) < launch_regs {
                errors.push(finding(
                    Field::WarpRoles("consumer_regs"),
                    self.consumer_regs,
                    Rule::SetmaxnregDirection,
                    format!(
                        "the consumers take registers with setmaxnreg.inc, which only raises the count: \
                         a launch of {threads} threads x {} block(s) per SM runs with up to {launch_regs} per thread, \
                         so consumer_regs is at least {launch_regs}",
                        self.blocks_per_sm
                    ),
                ));
            }
        }
        let used = 128
            * (u64::from(self.producer_warpgroups) * u64::from(self.producer_regs)
                + u64::from(self.consumer_warpgroups) * u64::from(self.consumer_regs));
        let pool = threads * launch_regs;
        if errors.is_empty() && used > pool {
            errors.push(finding(
                Field::WarpRoles("consumer_regs"),
                self.consumer_regs,
                Rule::RegisterBudget,
                format!(
                    "{} producer warpgroup(s) x {} + {} consumer warpgroup(s) x {} registers x 128 threads = {used} registers; \
                     a launch of {threads} threads x {} block(s) per SM gets at most {launch_regs} per thread, {pool} for the block \
                     (64K per SM): setmaxnreg.inc would wait forever",
                    self.producer_warpgroups,
                    self.producer_regs,
                    self.consumer_warpgroups,
                    self.consumer_regs,
                    self.blocks_per_sm
                ),
            ));
        }
        let mut ids = Vec::with_capacity(self.barriers.len());
        for (i, b) in self.barriers.iter().enumerate() {
            let field = || Field::NamedBarrier {
                name: b.name.clone(),
            };
            let id = u32::try_from(i + 1).unwrap_or(u32::MAX);
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
                errors.push(finding(
                    field(),
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
                Some((
                    b.name.clone(),
                    format!("this barrier and barrier `{other}` would both give the roles struct a `{ident}`"),
                ))
            } else if id > MAX_NAMED_BARRIER_ID {
                Some((
                    id.to_string(),
                    format!("named barrier ids are 1 to {MAX_NAMED_BARRIER_ID} (0 is __syncthreads): {} barriers do not fit", self.barriers.len()),
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
                errors.push(finding(field(), value, Rule::NamedBarrierIds, message));
            }
            ids.push(id);
        }
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
}

/// Registers per thread a launch of `threads` threads with `blocks` blocks per SM allocates at
/// most: 64K over them, rounded down to a multiple of 8, at most 256.
fn launch_regs(threads: u64, blocks: u64) -> u64 {
    match threads.checked_mul(blocks) {
        Some(t) if t > 0 => (REGISTER_FILE / t / 8 * 8).min(u64::from(SETMAXNREG_MAX)),
        _ => 0,
    }
}

/// Warp roles whose registers fit and whose named barriers have ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidWarpRoles {
    roles: WarpRoles,
    launch_regs: u64,
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
    /// Each named barrier with its id (1, 2, ...).
    pub fn barriers(&self) -> impl Iterator<Item = (&NamedBarrier, u32)> {
        self.roles.barriers.iter().zip(self.ids.iter().copied())
    }
}
