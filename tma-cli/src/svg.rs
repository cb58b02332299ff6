//! `tma explain --svg`: one call's shared memory as a picture. One box per repeated box of
//! the call; in each, one line per 128 bytes (the 32 four-byte banks), one cell per 16-byte
//! chunk, coloured by the global row its first element comes from and labelled with its
//! index; bank numbers along the top. From the CPU model's placement of every element.

use std::collections::BTreeMap;
use std::fmt::Write;
use tma_core::model::{self, ModelOptions};
use tma_core::BoundSpec;

/// Bytes of one shared-memory line: 32 banks of 4 bytes.
const LINE_BYTES: u64 = 128;
const CHUNK_BYTES: u64 = 16;
const CELL_W: u64 = 84;
const CELL_H: u64 = 20;
const MARGIN: u64 = 56;
const BOX_GAP: u64 = 40;
/// Lines drawn per box at most.
const MAX_LINES: u64 = 256;

/// The SVG of the call at coordinates 0 (cells name indices within the call), or why not.
pub fn smem_svg(bound: &BoundSpec) -> Result<String, String> {
    let spec = bound.spec();
    let opts = ModelOptions::default();
    let zeros = vec![0i64; spec.rank()];
    let layout = model::smem_layout(bound, opts).map_err(|e| e.to_string())?;
    let elems = model::elements(bound, &zeros, opts).map_err(|e| e.to_string())?;
    // (box, chunk in the box) -> (offset of the element within the chunk, its index).
    let mut chunks: BTreeMap<(usize, u64), (u64, Vec<i64>)> = BTreeMap::new();
    let placements = bound.valid().repeat_placements();
    for e in elems {
        let box_start = placements.get(e.box_index).map_or(0, |p| p.smem_offset);
        let rel = e.smem.saturating_sub(box_start);
        let slot = chunks
            .entry((e.box_index, rel / CHUNK_BYTES))
            .or_insert((u64::MAX, Vec::new()));
        if rel % CHUNK_BYTES < slot.0 {
            *slot = (rel % CHUNK_BYTES, e.index);
        }
    }
    let boxes = placements.len().max(1) as u64;
    let lines = layout.box_extent.div_ceil(LINE_BYTES).clamp(1, MAX_LINES);
    let per_line = LINE_BYTES / CHUNK_BYTES;
    let box_w = per_line * CELL_W;
    let box_h = lines * CELL_H;
    let width = MARGIN + boxes * (box_w + BOX_GAP);
    let height = MARGIN + 40 + box_h + 30;
    let rank = spec.rank();
    // The global row of an element: its index along the dim outside the innermost.
    let row_of = |index: &[i64]| -> i64 {
        if rank >= 2 {
            index[rank - 2]
        } else {
            0
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="10">"#
    );
    let boxed: Vec<String> = spec.boxed.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        r#"<text x="8" y="16" font-size="13">tile {}: {} box [{}], swizzle {}, {} box(es) per call; cell = 16-byte chunk, label = index of its first element (user order), colour = its global row</text>"#,
        xml(&spec.name),
        spec.dtype,
        boxed.join(", "),
        spec.swizzle.name(),
        placements.len()
    );
    for (b, p) in placements.iter().enumerate() {
        let x0 = MARGIN + b as u64 * (box_w + BOX_GAP);
        let y0 = MARGIN + 20;
        let _ = writeln!(
            out,
            r#"<text x="{x0}" y="{}" font-size="11">box {:?} at smem +{} B</text>"#,
            y0 - 26,
            p.index,
            p.smem_offset
        );
        // Banks: each 16-byte chunk covers four 4-byte banks.
        for k in 0..per_line {
            let first = k * CHUNK_BYTES / 4;
            let _ = writeln!(
                out,
                r##"<text x="{}" y="{}" fill="#555">banks {}-{}</text>"##,
                x0 + k * CELL_W + 4,
                y0 - 6,
                first,
                first + 3
            );
        }
        for l in 0..lines {
            if b == 0 {
                let _ = writeln!(
                    out,
                    r##"<text x="4" y="{}" fill="#555">+{}</text>"##,
                    y0 + l * CELL_H + 14,
                    l * LINE_BYTES
                );
            }
            for k in 0..per_line {
                let (x, y) = (x0 + k * CELL_W, y0 + l * CELL_H);
                let (fill, label) = match chunks.get(&(b, l * per_line + k)) {
                    Some((_, idx)) => {
                        let parts: Vec<String> = idx.iter().map(i64::to_string).collect();
                        (colour(row_of(idx)), format!("({})", parts.join(",")))
                    }
                    None => ("#eeeeee".to_string(), "pad".to_string()),
                };
                let _ = writeln!(
                    out,
                    r##"<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" fill="{fill}" stroke="#ffffff"/><text x="{}" y="{}">{}</text>"##,
                    x + 4,
                    y + 14,
                    xml(&label)
                );
            }
        }
        let _ = writeln!(
            out,
            r##"<rect x="{x0}" y="{y0}" width="{box_w}" height="{box_h}" fill="none" stroke="#000" stroke-width="2"/>"##
        );
    }
    if layout.box_extent.div_ceil(LINE_BYTES) > MAX_LINES {
        let _ = writeln!(
            out,
            r#"<text x="{MARGIN}" y="{}">... {} more lines per box</text>"#,
            height - 8,
            layout.box_extent.div_ceil(LINE_BYTES) - MAX_LINES
        );
    }
    out.push_str("</svg>\n");
    Ok(out)
}

/// A light colour per global row (golden-angle hues: neighbouring rows differ).
fn colour(row: i64) -> String {
    let hue = (row.rem_euclid(360) * 137) % 360;
    format!("hsl({hue},70%,80%)")
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
