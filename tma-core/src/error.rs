//! Validation findings: each names the field (with the user's dim index and name),
//! the value, and the rule in words.

use std::fmt;

/// Which part of a spec a finding is about. Dim indices are the user's (outer -> inner).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    Name,
    /// `dim_names[dim]`.
    DimName {
        dim: usize,
    },
    Rank,
    DType,
    /// `global[dim]`.
    Global {
        dim: usize,
        name: Option<String>,
    },
    /// `strides[dim]`.
    Stride {
        dim: usize,
        name: Option<String>,
    },
    /// `boxed[dim]`.
    Box {
        dim: usize,
        name: Option<String>,
    },
    /// `element_strides[dim]`.
    ElementStride {
        dim: usize,
        name: Option<String>,
    },
    /// `repeat[dim]`.
    Repeat {
        dim: usize,
        name: Option<String>,
    },
    /// The coordinate of `dim` passed to a copy (user order).
    Coord {
        dim: usize,
        name: Option<String>,
    },
    /// A per-dim list whose length is wrong (`"strides"`, `"boxed"`, ...).
    List(&'static str),
    SmemStride,
    Interleave,
    Swizzle,
    L2Promotion,
    OobFill,
    Target,
    /// The global base address of the bound buffer.
    BaseAddress,
    /// The shared-memory destination address.
    SmemAddress,
    /// The whole shared-memory footprint of one helper call.
    SmemFootprint,
    // ---- pipelines and warp roles (tma_core::pipeline) ----
    /// The pipeline's `stages`.
    Stages,
    /// A work queue's `slots` ([`crate::pipeline::WorkQueue`]).
    Slots,
    /// The pipeline's tile list as a whole (`tiles`).
    Tiles,
    /// Tile `index` of a pipeline's stage, by its member name.
    StageTile {
        index: usize,
        member: String,
    },
    /// The multicast of tile `index` of a pipeline's stage.
    Multicast {
        index: usize,
        member: String,
    },
    /// Who releases a pipeline's stage (`consumers`).
    Consumers,
    /// `cluster[axis]` (0 = x, 1 = y, 2 = z).
    Cluster {
        axis: usize,
    },
    /// The shared memory the rest of the kernel reserves beside a pipeline.
    ReserveSmem,
    /// A field of the warp roles (`producer_regs`, `consumer_warpgroups`, ...).
    WarpRoles(&'static str),
    /// The named barrier `name`.
    NamedBarrier {
        name: String,
    },
    /// The tile's wgmma operand declaration (`wgmma = a_k_major`).
    Wgmma,
    // ---- launches and wgmma descriptors ----
    /// `grid[axis]` of a launch (0 = x, 1 = y, 2 = z).
    Grid {
        axis: usize,
    },
    /// `block[axis]` of a launch (0 = x, 1 = y, 2 = z).
    Block {
        axis: usize,
    },
    /// A launch's block as a whole: its threads.
    BlockThreads,
    /// The k-slice a wgmma descriptor is asked for.
    KSlice,
    /// The 64-row block of A a wgmma descriptor is asked for.
    MBlock,
    // ---- kernel plans (tma_core::plan) ----
    /// A field of a kernel plan as a whole (`block_threads`, `cluster`, `smem`).
    Plan(&'static str),
    /// A part of a kernel plan: `what` is `pipeline`, `tile set`, `staging`, `scratch` or
    /// `tile`, `name` its name in the plan.
    PlanPart {
        what: &'static str,
        name: String,
    },
    // ---- im2col tiles ----
    /// One entry of an im2col spatial list (`lower_corner`, `upper_corner`,
    /// `element_strides`, a call's `offsets`): `index` counts the spatial dims (user order),
    /// `name` is the dim's.
    Spatial {
        list: &'static str,
        index: usize,
        name: Option<String>,
    },
    /// An im2col tile's `channels_per_pixel`.
    ChannelsPerPixel,
    /// An im2col tile's `pixels_per_column`.
    PixelsPerColumn,
}

impl Field {
    /// The per-dim index, if the field is one dim of a list.
    pub fn dim(&self) -> Option<usize> {
        match self {
            Field::Global { dim, .. }
            | Field::Stride { dim, .. }
            | Field::Box { dim, .. }
            | Field::ElementStride { dim, .. }
            | Field::Repeat { dim, .. }
            | Field::Coord { dim, .. }
            | Field::DimName { dim } => Some(*dim),
            _ => None,
        }
    }
}

fn dim_label(
    f: &mut fmt::Formatter<'_>,
    list: &str,
    dim: usize,
    name: &Option<String>,
) -> fmt::Result {
    match name {
        Some(n) => write!(f, "{list}[{dim}] ({n})"),
        None => write!(f, "{list}[{dim}]"),
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Name => f.write_str("name"),
            Field::DimName { dim } => write!(f, "dim_names[{dim}]"),
            Field::Rank => f.write_str("rank"),
            Field::DType => f.write_str("dtype"),
            Field::Global { dim, name } => dim_label(f, "global", *dim, name),
            Field::Stride { dim, name } => dim_label(f, "strides", *dim, name),
            Field::Box { dim, name } => dim_label(f, "boxed", *dim, name),
            Field::ElementStride { dim, name } => dim_label(f, "element_strides", *dim, name),
            Field::Repeat { dim, name } => dim_label(f, "repeat", *dim, name),
            Field::Coord { dim, name } => dim_label(f, "coords", *dim, name),
            Field::List(l) => f.write_str(l),
            Field::SmemStride => f.write_str("smem_stride"),
            Field::Interleave => f.write_str("interleave"),
            Field::Swizzle => f.write_str("swizzle"),
            Field::L2Promotion => f.write_str("l2_promotion"),
            Field::OobFill => f.write_str("oob_fill"),
            Field::Target => f.write_str("target"),
            Field::BaseAddress => f.write_str("base address"),
            Field::SmemAddress => f.write_str("shared-memory address"),
            Field::SmemFootprint => f.write_str("shared-memory footprint"),
            Field::Stages => f.write_str("stages"),
            Field::Slots => f.write_str("slots"),
            Field::Tiles => f.write_str("tiles"),
            Field::StageTile { index, member } => write!(f, "tiles[{index}] ({member})"),
            Field::Multicast { index, member } => write!(f, "tiles[{index}] ({member}).multicast"),
            Field::Consumers => f.write_str("consumers"),
            Field::Cluster { axis } => write!(f, "cluster[{axis}]"),
            Field::ReserveSmem => f.write_str("reserve_smem"),
            Field::WarpRoles(field) => f.write_str(field),
            Field::NamedBarrier { name } => write!(f, "named barrier `{name}`"),
            Field::Wgmma => f.write_str("wgmma"),
            Field::Grid { axis } => write!(f, "grid[{axis}]"),
            Field::Block { axis } => write!(f, "block[{axis}]"),
            Field::BlockThreads => f.write_str("block threads"),
            Field::KSlice => f.write_str("k_slice"),
            Field::MBlock => f.write_str("m_block"),
            Field::Plan(field) => f.write_str(field),
            Field::PlanPart { what, name } => write!(f, "{what} `{name}`"),
            Field::Spatial { list, index, name } => dim_label(f, list, *index, name),
            Field::ChannelsPerPixel => f.write_str("channels_per_pixel"),
            Field::PixelsPerColumn => f.write_str("pixels_per_column"),
        }
    }
}

/// Errors stop a spec; warnings ride along on the [`crate::ValidSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    Error,
    Warning,
}

/// One broken (or, for warnings, worrying) rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpecError {
    pub field: Field,
    /// The offending value as the user would recognise it.
    pub value: String,
    /// Which rule; tests match on this.
    pub rule: crate::rules::Rule,
    /// The rule in words, with the numbers that apply.
    pub message: String,
    pub severity: Severity,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "",
            Severity::Warning => "warning: ",
        };
        write!(
            f,
            "{level}{} = {}: {}",
            self.field, self.value, self.message
        )
    }
}

impl std::error::Error for SpecError {}

/// Every violation of a spec, reported at once.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SpecErrors {
    /// The tile's name, for the heading.
    pub tile: String,
    pub errors: Vec<SpecError>,
}

impl SpecErrors {
    /// The findings about one field.
    pub fn for_field(&self, field: &Field) -> impl Iterator<Item = &SpecError> {
        let field = field.clone();
        self.errors.iter().filter(move |e| e.field == field)
    }
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_breaks(
            f,
            format_args!("tile `{}`", self.tile),
            "TMA rule",
            &self.errors,
        )
    }
}

/// `{what} breaks {n} {rule}s:` (`rule` alone for one), then a `  - ` line per finding: the
/// report of every finding of a declaration.
pub(crate) fn write_breaks(
    f: &mut fmt::Formatter<'_>,
    what: impl fmt::Display,
    rule: &str,
    errors: &[SpecError],
) -> fmt::Result {
    write!(
        f,
        "{what} breaks {} {rule}{}:",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    )?;
    for e in errors {
        write!(f, "\n  - {e}")?;
    }
    Ok(())
}
