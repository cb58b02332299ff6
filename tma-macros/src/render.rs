//! The one place a tile's CUDA helper source is produced at expansion time.
//!
//! `tma_core::render::TileCode` renders it; this module only adapts its result to what
//! the expansion embeds (`CUDA_NAME`, `CUDA_SOURCE`).

use tma_core::ValidSpec;

/// A tile's rendered CUDA helpers.
pub struct TileCuda {
    /// The helper's struct/namespace name, `tma_<name>`.
    pub cuda_name: String,
    pub source: String,
}

/// Renders the helpers of tile `tile_id` of a translation unit.
pub fn tile(valid: &ValidSpec, tile_id: u32) -> Result<TileCuda, String> {
    imp::tile(valid, tile_id)
}

/// Until `tma_core::render` lands: the name the contract fixes and a marker comment.
mod imp {
    use super::TileCuda;
    use tma_core::ValidSpec;

    pub fn tile(valid: &ValidSpec, tile_id: u32) -> Result<TileCuda, String> {
        let name = &valid.spec().name;
        Ok(TileCuda {
            cuda_name: format!("tma_{name}"),
            source: format!("// tma-tile {tile_id} {name}\n"),
        })
    }
}
