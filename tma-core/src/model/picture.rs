//! A human view of where a box lands in shared memory: which global element starts each
//! 16-byte chunk, so a user can see what a swizzle does.
//!
//! ```
//! use tma_core::{model::picture::smem_picture, validate, DType, Swizzle, TileSpec};
//! let spec = TileSpec::new("a", DType::BF16, [4096, 1024], [64, 64]).swizzle(Swizzle::B128);
//! let bound = validate(&spec)?.bind(&[4096, 1024], None)?;
//! let text = smem_picture(&bound);
//! // Line 1 of the 128B swizzle holds row 1; its chunk 0 (columns 0..8) moved to chunk 1.
//! assert!(text.contains("(1,8)  (1,0)"));
//! # Ok::<(), tma_core::SpecErrors>(())
//! ```

use crate::model::{self, ModelOptions};
use crate::validate::{BoundIm2col, BoundSpec};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Lines and chunks per line the picture shows at most.
const MAX_LINES: u64 = 8;
const MAX_CHUNKS: u64 = 8;

/// Renders the first box of one call (coordinates taken as 0, so cells are indices within the
/// box, user order) as aligned text: one text row per shared-memory line (the swizzle span, or
/// the row pitch without swizzle), one cell per 16-byte chunk naming the global element that
/// starts it; `-` marks padding. Shows at most 8 lines x 8 chunks.
pub fn smem_picture(bound: &BoundSpec) -> String {
    smem_picture_with(bound, ModelOptions::default())
}

/// [`smem_picture`] under explicit model options.
pub fn smem_picture_with(bound: &BoundSpec, opts: ModelOptions) -> String {
    let spec = bound.spec();
    let mut out = String::new();
    let zeros = vec![0i64; spec.rank()];
    let (layout, elems) = match (
        model::smem_layout(bound, opts),
        model::elements(bound, &zeros, opts),
    ) {
        (Ok(l), Ok(e)) => (l, e),
        (Err(e), _) | (_, Err(e)) => {
            let _ = writeln!(out, "tile `{}`: no picture: {e}", spec.name);
            return out;
        }
    };
    // chunk -> (byte offset within the chunk, global index) of its first element.
    let mut chunks: BTreeMap<u64, (u64, Vec<i64>)> = BTreeMap::new();
    for e in elems.into_iter().filter(|e| e.box_index == 0) {
        let (chunk, within) = (e.smem / 16, e.smem % 16);
        let slot = chunks.entry(chunk).or_insert((u64::MAX, Vec::new()));
        if within < slot.0 {
            *slot = (within, e.index);
        }
    }
    let line_bytes = spec
        .swizzle
        .span_bytes()
        .unwrap_or(layout.row_pitch)
        .max(16);
    let boxed: Vec<String> = spec.boxed.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "tile `{}`: {} box [{}], swizzle {}, {} B per box row, rows {} B apart",
        spec.name,
        spec.dtype,
        boxed.join(", "),
        spec.swizzle.name(),
        layout.row_bytes,
        layout.row_pitch
    );
    let _ = writeln!(
        out,
        "each cell: the box index (user order) of the element starting a 16-byte chunk; one line = {line_bytes} B of shared memory"
    );
    let cells = chunks
        .into_iter()
        .map(|(c, (_, idx))| (c, index_text(&idx)))
        .collect();
    draw(&mut out, &cells, line_bytes, layout.box_extent);
    out
}

/// `(0,8)`: an index as the picture's cells show it.
fn index_text(index: &[i64]) -> String {
    let parts: Vec<String> = index.iter().map(i64::to_string).collect();
    format!("({})", parts.join(","))
}

/// The grid: one text row per `line_bytes` of the `extent` bytes, one cell per 16-byte chunk
/// (`cells`' label, `-` for padding), at most 8 x 8.
fn draw(out: &mut String, cells: &BTreeMap<u64, String>, line_bytes: u64, extent: u64) {
    let per_line = line_bytes / 16;
    let lines = extent.div_ceil(line_bytes);
    let show_chunks = per_line.min(MAX_CHUNKS);
    let show_lines = lines.min(MAX_LINES);
    let cell = |c: u64| -> String { cells.get(&c).cloned().unwrap_or_else(|| "-".to_string()) };
    let mut width = 6;
    for l in 0..show_lines {
        for k in 0..show_chunks {
            width = width.max(cell(l * per_line + k).len());
        }
    }
    let _ = write!(out, "{:>6} ", "smem");
    for k in 0..show_chunks {
        let _ = write!(out, " {:<width$}", format!("+{}", k * 16));
    }
    if per_line > show_chunks {
        let _ = write!(out, " ...");
    }
    let trimmed = out.trim_end_matches(' ').len();
    out.truncate(trimmed);
    out.push('\n');
    for l in 0..show_lines {
        let _ = write!(out, "{:>6} ", l * line_bytes);
        for k in 0..show_chunks {
            let _ = write!(out, " {:<width$}", cell(l * per_line + k));
        }
        if per_line > show_chunks {
            let _ = write!(out, " ...");
        }
        let trimmed = out.trim_end_matches(' ').len();
        out.truncate(trimmed);
        out.push('\n');
    }
    if lines > show_lines {
        let _ = writeln!(out, "   ... {} more lines", lines - show_lines);
    }
}

/// Where one im2col load lands in shared memory (the `[pixels][channels]` rows of
/// [`crate::model::im2col::elements`], padded and swizzled as a tiled box): one text row per
/// shared-memory line (the swizzle span, or the row pitch), one cell per 16-byte chunk naming
/// the tensor element that starts it (user order: n, the spatial position after the offsets,
/// c; an index outside the tensor is filled), `-` for padding. At most 8 lines x 8 chunks.
pub fn im2col_picture(bound: &BoundIm2col, coords: &[i64], offsets: &[i64]) -> String {
    let spec = bound.spec();
    let mut out = String::new();
    let elems = match model::im2col::elements(bound, coords, offsets) {
        Ok(e) => e,
        Err(e) => {
            let _ = writeln!(out, "im2col tile `{}`: no picture: {e}", spec.name);
            return out;
        }
    };
    let mut chunks: BTreeMap<u64, (u64, Vec<i64>)> = BTreeMap::new();
    for e in elems {
        let (chunk, within) = (e.smem / 16, e.smem % 16);
        let slot = chunks.entry(chunk).or_insert((u64::MAX, Vec::new()));
        if within < slot.0 {
            *slot = (within, e.index);
        }
    }
    let view = spec.smem_view();
    let esize = spec.dtype.size_bytes().unwrap_or(1);
    let row_bytes = u64::from(spec.channels_per_pixel) * esize;
    let pitch = crate::smem::row_pitch_bytes(&view, crate::smem::DEFAULT_INNER_ROW_LAYOUT)
        .get()
        .unwrap_or(row_bytes);
    let line_bytes = spec.swizzle.span_bytes().unwrap_or(pitch).max(16);
    let _ = writeln!(
        out,
        "im2col tile `{}`: {} [{} pixels][{} channels], swizzle {}, {row_bytes} B per pixel, rows {pitch} B apart",
        spec.name,
        spec.dtype,
        spec.pixels_per_column,
        spec.channels_per_pixel,
        spec.swizzle.name(),
    );
    let _ = writeln!(
        out,
        "each cell: the tensor index (user order) of the element starting a 16-byte chunk; one line = {line_bytes} B of shared memory"
    );
    let cells = chunks
        .into_iter()
        .map(|(c, (_, idx))| (c, index_text(&idx)))
        .collect();
    draw(
        &mut out,
        &cells,
        line_bytes,
        u64::from(spec.pixels_per_column) * pitch,
    );
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod im2col_tests {
    use super::*;
    use crate::{validate_im2col, DType, Im2colSpec, Swizzle};

    /// NHWC bf16 [1][4][4][8], 8 channels (16 B: one chunk a pixel), pad 1: the load at
    /// (0, -1, -1, 0) with offsets (1, 1) starts at pixel (0, 0) and walks W, then wraps to the
    /// next row at the box's end (extent 4 + upper -1 = 3).
    #[test]
    fn cells_name_the_tensor_index_of_each_pixel() {
        let spec =
            Im2colSpec::new("act", DType::BF16, [1, 4, 4, 8], 8, 8).corners([-1, -1], [-1, -1]);
        let bound = validate_im2col(&spec).unwrap().bound().unwrap();
        let text = im2col_picture(&bound, &[0, -1, -1, 0], &[1, 1]);
        // No swizzle: one 16-byte line per pixel; positions W = -1, 0, 1, 2 (the box [-1, 3)),
        // then the next row; the pixel is the position plus the offset.
        let rows: Vec<&str> = text.lines().skip(3).collect();
        assert!(rows[0].trim_end().ends_with("(0,0,0,0)"), "{text}");
        assert!(rows[3].trim_end().ends_with("(0,0,3,0)"), "{text}");
        assert!(rows[4].trim_end().ends_with("(0,1,0,0)"), "{text}");
        // A call the model refuses says why.
        let bad = im2col_picture(&bound, &[0, -1, -1, 0], &[300, 0]);
        assert!(bad.contains("no picture"), "{bad}");
        // The 128B swizzle: pixel 1 (line 1) has its chunks 0 and 1 swapped.
        let sw = Im2colSpec::new("act", DType::BF16, [1, 4, 4, 64], 64, 8).swizzle(Swizzle::B128);
        let b = validate_im2col(&sw).unwrap().bound().unwrap();
        let t = im2col_picture(&b, &[0, 0, 0, 0], &[0, 0]);
        assert!(t.contains("(0,0,1,8)  (0,0,1,0)"), "{t}");
    }
}
