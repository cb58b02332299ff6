//! What a translation unit tells the runtime about its tiles: one comment line per tile,
//!
//! ```text
//! // tma-tile <id> <name> smem=<bytes> align=<bytes> target=<arch>
//! ```
//!
//! written by the renderer ([`crate::render::KernelSource`], [`crate::render::header`]) and
//! read back by tma-runtime from the source it compiles: a hang record names the tile by its
//! id, a launch is refused when its dynamic shared memory cannot hold the tiles
//! ([`crate::smem::min_dynamic_smem`]), a compile when its arch is not the tiles' target.
//! The CUDA compiler sees a comment. A hand-written line may stop after the name; the runtime
//! then checks nothing it does not say.
//!
//! ```
//! use tma_core::manifest::{declared_tiles, DeclaredTile};
//! use tma_core::{validate, Arch, DType, Swizzle, TileSpec};
//! let a = validate(&TileSpec::new("a", DType::BF16, [4096, 1024], [64, 64]).swizzle(Swizzle::B128))?;
//! let line = DeclaredTile::of(&a, 0).to_string();
//! assert_eq!(line, "// tma-tile 0 a smem=8192 align=1024 target=sm_90a");
//! let tiles = declared_tiles(&format!("{line}\n// tma-tile 1 b\nint x;\n"));
//! assert_eq!((tiles[0].smem_bytes, tiles[0].target), (Some(8192), Some(Arch::Sm90a)));
//! assert_eq!((tiles[1].name.as_str(), tiles[1].smem_bytes), ("b", None));
//! # Ok::<(), tma_core::SpecErrors>(())
//! ```

use std::fmt;

use crate::spec::Arch;
use crate::validate::ValidSpec;

/// What starts a tile line.
pub const TILE_LINE_PREFIX: &str = "// tma-tile ";

/// One tile a translation unit declares.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeclaredTile {
    /// The tile's index in the translation unit (the hang record's `tile_id`).
    pub id: u32,
    /// The tile's name as declared.
    pub name: String,
    /// Bytes of shared memory one helper call spans ([`crate::SmemPlan::footprint_bytes`]).
    pub smem_bytes: Option<u64>,
    /// Alignment its shared memory needs ([`crate::SmemPlan::align_bytes`]).
    pub align_bytes: Option<u64>,
    /// The arch the tile was validated for ([`crate::TileSpec::target`]).
    pub target: Option<Arch>,
}

impl DeclaredTile {
    /// Tile `id` of its translation unit, with everything the runtime checks.
    pub fn of(valid: &ValidSpec, id: u32) -> DeclaredTile {
        let plan = valid.plan();
        DeclaredTile {
            id,
            name: valid.spec().name.clone(),
            smem_bytes: Some(plan.footprint_bytes),
            align_bytes: Some(plan.align_bytes),
            target: Some(valid.spec().target),
        }
    }

    /// Reads one line (leading blanks allowed); `None` when it is not a tile line. A field
    /// whose value does not parse is left out; unknown fields are ignored.
    pub fn parse(line: &str) -> Option<DeclaredTile> {
        let rest = line.trim_start().strip_prefix(TILE_LINE_PREFIX)?;
        let mut words = rest.split_whitespace();
        let id = words.next()?.parse().ok()?;
        let name = words.next()?.to_string();
        let mut tile = DeclaredTile {
            id,
            name,
            smem_bytes: None,
            align_bytes: None,
            target: None,
        };
        for word in words {
            match word.split_once('=') {
                Some(("smem", v)) => tile.smem_bytes = v.parse().ok(),
                Some(("align", v)) => tile.align_bytes = v.parse().ok(),
                Some(("target", v)) => tile.target = Arch::parse(v),
                _ => {}
            }
        }
        Some(tile)
    }
}

/// The line, without a newline.
impl fmt::Display for DeclaredTile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TILE_LINE_PREFIX}{} {}", self.id, self.name)?;
        if let Some(b) = self.smem_bytes {
            write!(f, " smem={b}")?;
        }
        if let Some(a) = self.align_bytes {
            write!(f, " align={a}")?;
        }
        if let Some(t) = self.target {
            write!(f, " target={}", t.nvrtc_name())?;
        }
        Ok(())
    }
}

/// What starts a pipeline line:
///
/// ```text
/// // tma-pipeline <id> <name> stages=<n> cluster=<x>x<y>x<z> smem=<bytes>
/// ```
///
/// written by [`crate::render::KernelSource`] for each pipeline: a hang in a pipeline's wait
/// names it by id, and the runtime refuses a launch whose cluster shape is not the declared
/// one or whose dynamic shared memory is below `smem` (the pipeline's `DYNAMIC_SMEM_BYTES`).
/// A line may stop after the name (older sources, hand-written lines): what it does not say
/// is not checked.
///
/// ```
/// use tma_core::manifest::DeclaredPipeline;
/// let p = DeclaredPipeline::parse("// tma-pipeline 0 ring stages=4 cluster=2x1x1 smem=66640").unwrap();
/// assert_eq!((p.stages, p.cluster, p.dynamic_smem_bytes), (Some(4), Some([2, 1, 1]), Some(66640)));
/// assert_eq!(DeclaredPipeline::parse("// tma-pipeline 1 old stages=2").unwrap().cluster, None);
/// ```
pub const PIPELINE_LINE_PREFIX: &str = "// tma-pipeline ";

/// One pipeline a translation unit declares.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeclaredPipeline {
    /// The pipeline's index in the translation unit (the hang record's `value`).
    pub id: u32,
    pub name: String,
    pub stages: Option<u32>,
    /// The cluster shape (x, y, z) the pipeline was declared for (`[1, 1, 1]`: no cluster).
    pub cluster: Option<[u32; 3]>,
    /// The pipeline's `DYNAMIC_SMEM_BYTES`: what a launch must give it at least
    /// ([`crate::pipeline::ValidPipeline::dynamic_smem_bytes`]).
    pub dynamic_smem_bytes: Option<u64>,
}

impl DeclaredPipeline {
    /// Pipeline `id` of its translation unit, with everything the runtime checks.
    pub fn of(pipeline: &crate::pipeline::ValidPipeline, id: u32) -> DeclaredPipeline {
        DeclaredPipeline {
            id,
            name: pipeline.spec().name.clone(),
            stages: Some(pipeline.spec().stages),
            cluster: Some(pipeline.spec().cluster),
            dynamic_smem_bytes: Some(pipeline.dynamic_smem_bytes()),
        }
    }

    /// Reads one line; `None` when it is not a pipeline line. A field whose value does not
    /// parse is left out; unknown fields are ignored.
    pub fn parse(line: &str) -> Option<DeclaredPipeline> {
        let rest = line.trim_start().strip_prefix(PIPELINE_LINE_PREFIX)?;
        let mut words = rest.split_whitespace();
        let id = words.next()?.parse().ok()?;
        let name = words.next()?.to_string();
        let mut p = DeclaredPipeline {
            id,
            name,
            stages: None,
            cluster: None,
            dynamic_smem_bytes: None,
        };
        for word in words {
            match word.split_once('=') {
                Some(("stages", v)) => p.stages = v.parse().ok(),
                Some(("cluster", v)) => p.cluster = parse_cluster(v),
                Some(("smem", v)) => p.dynamic_smem_bytes = v.parse().ok(),
                _ => {}
            }
        }
        Some(p)
    }
}

/// `2x1x1` -> `[2, 1, 1]`; `None` unless three non-zero numbers.
fn parse_cluster(v: &str) -> Option<[u32; 3]> {
    let mut it = v
        .split('x')
        .map(|n| n.parse::<u32>().ok().filter(|&n| n > 0));
    let shape = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(shape)
}

/// The line, without a newline.
impl fmt::Display for DeclaredPipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PIPELINE_LINE_PREFIX}{} {}", self.id, self.name)?;
        if let Some(s) = self.stages {
            write!(f, " stages={s}")?;
        }
        if let Some([x, y, z]) = self.cluster {
            write!(f, " cluster={x}x{y}x{z}")?;
        }
        if let Some(b) = self.dynamic_smem_bytes {
            write!(f, " smem={b}")?;
        }
        Ok(())
    }
}

/// Every pipeline line of `source`, in order.
pub fn declared_pipelines(source: &str) -> Vec<DeclaredPipeline> {
    source.lines().filter_map(DeclaredPipeline::parse).collect()
}

/// Every tile line of `source`, in order.
pub fn declared_tiles(source: &str) -> Vec<DeclaredTile> {
    source.lines().filter_map(DeclaredTile::parse).collect()
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_partial_lines_parse() {
        let full = DeclaredTile {
            id: 3,
            name: "kv_tile".into(),
            smem_bytes: Some(16384),
            align_bytes: Some(1024),
            target: Some(Arch::Sm100a),
        };
        let line = full.to_string();
        assert_eq!(
            line,
            "// tma-tile 3 kv_tile smem=16384 align=1024 target=sm_100a"
        );
        assert_eq!(DeclaredTile::parse(&line), Some(full));
        let src = "  // tma-tile 0 a_tile\n// tma-tile 7 b smem=x align=128 color=red\n\
                   // tma-tile x bad\n// tma-tile 9\nint x; // tma-tile 1 not_at_start\n";
        let tiles = declared_tiles(src);
        let seen: Vec<_> = tiles
            .iter()
            .map(|t| (t.id, t.name.as_str(), t.smem_bytes, t.align_bytes, t.target))
            .collect();
        assert_eq!(
            seen,
            [
                (0, "a_tile", None, None, None),
                (7, "b", None, Some(128), None)
            ]
        );
    }

    #[test]
    fn pipeline_lines_round_trip_and_old_lines_parse() {
        let full = DeclaredPipeline {
            id: 1,
            name: "ring".into(),
            stages: Some(4),
            cluster: Some([2, 2, 1]),
            dynamic_smem_bytes: Some(99376),
        };
        let line = full.to_string();
        assert_eq!(
            line,
            "// tma-pipeline 1 ring stages=4 cluster=2x2x1 smem=99376"
        );
        assert_eq!(DeclaredPipeline::parse(&line), Some(full));
        let old = declared_pipelines(
            "// tma-pipeline 0 a stages=2\n// tma-pipeline 1 b cluster=2x0x1 smem=x\n\
             // tma-pipeline 2 c cluster=2x1 smem=5\n// tma-pipeline 3 d cluster=1x1x1x1\n",
        );
        let seen: Vec<_> = old
            .iter()
            .map(|p| (p.id, p.stages, p.cluster, p.dynamic_smem_bytes))
            .collect();
        assert_eq!(
            seen,
            [
                (0, Some(2), None, None),
                (1, None, None, None),
                (2, None, None, Some(5)),
                (3, None, None, None)
            ]
        );
    }
}
