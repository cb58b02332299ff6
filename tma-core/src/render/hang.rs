//! What a hang record's `tile_id` names: one tile, a group of tiles, or none.

use super::*;

/// What the `tile_id` of a hang record names: the one decoder of what the generated waits
/// write (`T::wait`, `tma_group<..>::wait`, a bare `tma_mbarrier_wait`).
///
/// ```
/// use tma_core::render::HangTiles;
/// assert_eq!(HangTiles::decode(0xffff_ffff), HangTiles::Unknown);
/// assert_eq!(HangTiles::decode(7), HangTiles::Tile(7));
/// assert_eq!(
///     HangTiles::decode(0x8000_0005),
///     HangTiles::Group { tiles: vec![0, 2], more: false }
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HangTiles {
    /// [`UNKNOWN_TILE_ID`]: the wait named no tile.
    Unknown,
    /// One tile: its id (`TILE_ID`).
    Tile(u32),
    /// The tiles of a `tma_group` (ids below [`GROUP_LISTED_TILES`], ascending); `more`: it
    /// also holds tiles whose ids are not listed.
    Group { tiles: Vec<u32>, more: bool },
}

impl HangTiles {
    /// Decodes a hang record's `tile_id`.
    pub fn decode(tile_id: u32) -> HangTiles {
        if tile_id == UNKNOWN_TILE_ID {
            HangTiles::Unknown
        } else if tile_id & GROUP_TILE_ID_FLAG == 0 {
            HangTiles::Tile(tile_id)
        } else {
            HangTiles::Group {
                tiles: (0..GROUP_LISTED_TILES)
                    .filter(|i| tile_id & (1 << i) != 0)
                    .collect(),
                more: tile_id & GROUP_MORE_TILES != 0,
            }
        }
    }
}
