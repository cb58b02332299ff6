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

mod imp {
    use super::TileCuda;
    use tma_core::render::TileCode;
    use tma_core::ValidSpec;

    pub fn tile(valid: &ValidSpec, tile_id: u32) -> Result<TileCuda, String> {
        let code = TileCode::new(valid, tile_id).map_err(|e| e.to_string())?;
        Ok(TileCuda {
            cuda_name: code.cuda_name(),
            source: code.source().to_owned(),
        })
    }
}
