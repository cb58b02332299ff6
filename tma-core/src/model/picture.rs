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
use crate::validate::BoundSpec;
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
    let per_line = line_bytes / 16;
    let lines = layout.box_extent.div_ceil(line_bytes);
    let show_chunks = per_line.min(MAX_CHUNKS);
    let show_lines = lines.min(MAX_LINES);
    let cell = |c: u64| -> String {
        match chunks.get(&c) {
            Some((_, idx)) => {
                let parts: Vec<String> = idx.iter().map(i64::to_string).collect();
                format!("({})", parts.join(","))
            }
            None => "-".to_string(),
        }
    };
    let mut width = 6;
    for l in 0..show_lines {
        for k in 0..show_chunks {
            width = width.max(cell(l * per_line + k).len());
        }
    }
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
    out
}
