//! `tma explain --svg`: one call's shared memory as a picture. One box per repeated box of
//! the call; in each, one line per 128 bytes (the 32 four-byte banks), one cell per 16-byte
//! chunk, coloured by the global row its first element comes from and labelled with its
//! index; bank numbers along the top. From the CPU model's placement of every element.

use std::collections::BTreeMap;
use std::fmt::Write;
use tma_core::model::{self, ModelOptions};
use tma_core::{BoundIm2col, BoundSpec};

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
    let rank = spec.rank();
    // The global row of an element: its index along the dim outside the innermost.
    let row_of = |index: &[i64]| -> i64 {
        if rank >= 2 {
            index[rank - 2]
        } else {
            0
        }
    };
    let boxed: Vec<String> = spec.boxed.iter().map(u32::to_string).collect();
    let title = format!(
        "tile {}: {} box [{}], swizzle {}, {} box(es) per call; cell = 16-byte chunk, label = index of its first element (user order), colour = its global row",
        spec.name,
        spec.dtype,
        boxed.join(", "),
        spec.swizzle.name(),
        placements.len()
    );
    let boxes: Vec<DrawnBox> = (0..placements.len().max(1))
        .map(|b| DrawnBox {
            label: placements.get(b).map_or_else(String::new, |p| {
                format!("box {:?} at smem +{} B", p.index, p.smem_offset)
            }),
            cells: chunks
                .iter()
                .filter(|((bb, _), _)| *bb == b)
                .map(|((_, c), (_, idx))| (*c, (idx.clone(), row_of(idx))))
                .collect(),
        })
        .collect();
    Ok(draw(&title, &boxes, layout.box_extent))
}

/// One box of a picture: its caption and its cells, chunk -> (the index its label shows, the
/// row its colour says).
struct DrawnBox {
    label: String,
    cells: BTreeMap<u64, (Vec<i64>, i64)>,
}

/// The SVG of `boxes` side by side, each `extent` bytes: one line per 128 bytes (the 32 banks),
/// one cell per 16-byte chunk.
fn draw(title: &str, boxes: &[DrawnBox], extent: u64) -> String {
    let n = boxes.len().max(1) as u64;
    let lines = extent.div_ceil(LINE_BYTES).clamp(1, MAX_LINES);
    let per_line = LINE_BYTES / CHUNK_BYTES;
    let box_w = per_line * CELL_W;
    let box_h = lines * CELL_H;
    let width = MARGIN + n * (box_w + BOX_GAP);
    let height = MARGIN + 40 + box_h + 30;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="10">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="8" y="16" font-size="13">{}</text>"#,
        xml(title)
    );
    for (b, drawn) in boxes.iter().enumerate() {
        let x0 = MARGIN + b as u64 * (box_w + BOX_GAP);
        let y0 = MARGIN + 20;
        let _ = writeln!(
            out,
            r#"<text x="{x0}" y="{}" font-size="11">{}</text>"#,
            y0 - 26,
            xml(&drawn.label)
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
                let (fill, label) = match drawn.cells.get(&(l * per_line + k)) {
                    Some((idx, row)) => {
                        let parts: Vec<String> = idx.iter().map(i64::to_string).collect();
                        (colour(*row), format!("({})", parts.join(",")))
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
    if extent.div_ceil(LINE_BYTES) > MAX_LINES {
        let _ = writeln!(
            out,
            r#"<text x="{MARGIN}" y="{}">... {} more lines per box</text>"#,
            height - 8,
            extent.div_ceil(LINE_BYTES) - MAX_LINES
        );
    }
    out.push_str("</svg>\n");
    out
}

/// The SVG of one im2col load at `coords` / `offsets` (the CPU model's placement of every
/// element): cells labelled with the tensor index (user order) starting each 16-byte chunk,
/// coloured by the load's pixel (its row in shared memory), or why not.
pub fn im2col_svg(bound: &BoundIm2col, coords: &[i64], offsets: &[i64]) -> Result<String, String> {
    let spec = bound.spec();
    let elems = model::im2col::elements(bound, coords, offsets).map_err(|e| e.to_string())?;
    let mut cells: BTreeMap<u64, (u64, Vec<i64>, i64)> = BTreeMap::new();
    for e in elems {
        let slot = cells
            .entry(e.smem / CHUNK_BYTES)
            .or_insert((u64::MAX, Vec::new(), 0));
        if e.smem % CHUNK_BYTES < slot.0 {
            *slot = (e.smem % CHUNK_BYTES, e.index, e.pixel as i64);
        }
    }
    let title = format!(
        "im2col tile {}: {} [{} pixels][{} channels], swizzle {}; one load at coords {:?}, offsets {:?}; cell = 16-byte chunk, label = tensor index of its first element (user order), colour = its pixel",
        spec.name,
        spec.dtype,
        spec.pixels_per_column,
        spec.channels_per_pixel,
        spec.swizzle.name(),
        coords,
        offsets
    );
    let drawn = DrawnBox {
        label: "one load".to_string(),
        cells: cells
            .into_iter()
            .map(|(c, (_, idx, pixel))| (c, (idx, pixel)))
            .collect(),
    };
    Ok(draw(&title, &[drawn], bound.plan().footprint_bytes))
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
