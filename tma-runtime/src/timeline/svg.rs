//! A [`Trace`] as an SVG picture: for a few blocks, one row per warp role, time to the right;
//! red where a producer waits for an empty stage, orange where a consumer waits for a full
//! one, green where it holds a stage (wait end -> release), blue ticks where the producer
//! loads. Each mark has a `<title>` (its pipeline, stage, pass and times) for a hover.

use std::fmt::Write;

use tma_core::timeline::TimelineKind;

use super::trace::Trace;

/// What an SVG picture shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SvgOptions {
    /// The first blocks with events to draw.
    pub blocks: usize,
    /// Width of the time axis, in pixels.
    pub width: u32,
    /// Draw only the first microseconds of the shown blocks (None: all of it).
    pub until_us: Option<f64>,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            blocks: 2,
            width: 1600,
            until_us: None,
        }
    }
}

const ACQUIRE: &str = "#d62728";
const WAIT: &str = "#ff7f0e";
const HELD: &str = "#2ca02c";
const LOAD: &str = "#1f77b4";
const LEFT: f64 = 250.0;
const ROW: f64 = 16.0;
const TOP: f64 = 64.0;

/// A row of the picture: a block's warp, as producer (0) or consumer (1).
type Row = (u32, u32, u8);

impl Trace {
    /// The picture, as SVG text (a picture of nothing when there are no events).
    pub fn svg(&self, options: &SvgOptions) -> String {
        let shown: Vec<u32> = self.blocks().into_iter().take(options.blocks).collect();
        let trace = self.filter_blocks(|b| shown.contains(&b));
        let (t0, mut t1) = trace.span_ns().unwrap_or((0, 1));
        if let Some(until) = options.until_us {
            t1 = t1.min(t0.saturating_add((until.max(0.0) * 1e3) as u64));
        }
        let span = (t1.saturating_sub(t0)).max(1) as f64;
        let width = f64::from(options.width.max(100));
        let x = |ns: u64| LEFT + (ns.saturating_sub(t0).min(t1 - t0)) as f64 / span * width;
        let role = |k: TimelineKind| u8::from(!k.is_producer());
        let mut rows: Vec<Row> = trace
            .events
            .iter()
            .map(|e| (e.block, e.warp, role(e.kind)))
            .collect();
        rows.sort_unstable();
        rows.dedup();
        // A gap before each block's rows for its label.
        let mut y_of = std::collections::BTreeMap::new();
        let mut y = TOP;
        let mut labels = String::new();
        let mut last_block = None;
        for r in &rows {
            if last_block != Some(r.0) {
                y += ROW;
                let sm = trace
                    .events
                    .iter()
                    .find(|e| e.block == r.0)
                    .map_or(0, |e| e.sm);
                let _ = writeln!(
                    labels,
                    r#"<text x="4" y="{:.1}" font-weight="bold">block {} (SM {sm})</text>"#,
                    y - 3.0,
                    r.0
                );
                last_block = Some(r.0);
            }
            let _ = writeln!(
                labels,
                r#"<text x="12" y="{:.1}">warp {} {}</text>"#,
                y + ROW - 4.0,
                r.1,
                if r.2 == 0 { "producer" } else { "consumer" }
            );
            y_of.insert(*r, y);
            y += ROW;
        }
        let height = y + 40.0;
        let total = LEFT + width + 20.0;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{total:.0}" height="{height:.0}" viewBox="0 0 {total:.0} {height:.0}" font-family="monospace" font-size="11">"#
        );
        let _ = writeln!(
            out,
            r#"<text x="4" y="16" font-size="13">tma timeline: {} of {} block(s), {:.2} us from the first event{}</text>"#,
            shown.len(),
            self.blocks().len(),
            (t1 - t0) as f64 / 1e3,
            if self.dropped > 0 {
                format!(", {} event(s) dropped", self.dropped)
            } else {
                String::new()
            }
        );
        for (i, (color, what)) in [
            (ACQUIRE, "producer waits for an empty stage (acquire)"),
            (LOAD, "producer issues a stage (load)"),
            (WAIT, "consumer waits for a full stage (wait)"),
            (HELD, "consumer holds the stage (wait end -> release)"),
        ]
        .iter()
        .enumerate()
        {
            let lx = 4.0 + i as f64 * 380.0;
            let _ = writeln!(
                out,
                r#"<rect x="{lx:.0}" y="26" width="12" height="10" fill="{color}"/><text x="{:.0}" y="35">{what}</text>"#,
                lx + 16.0
            );
        }
        // The time axis: about ten ticks at a round step.
        let step = round_step((t1 - t0) as f64 / 1e3 / 10.0);
        let mut tick = 0.0;
        while tick * 1e3 <= (t1 - t0) as f64 && step > 0.0 {
            let tx = LEFT + tick * 1e3 / span * width;
            let _ = writeln!(
                out,
                r##"<line x1="{tx:.1}" y1="{:.0}" x2="{tx:.1}" y2="{:.0}" stroke="#ddd"/><text x="{tx:.1}" y="{:.0}" text-anchor="middle">{} us</text>"##,
                TOP - 6.0,
                y,
                TOP - 8.0,
                trim(tick)
            );
            tick += step;
        }
        out.push_str(&labels);
        let mark = |out: &mut String, row: Row, from: u64, to: u64, color: &str, title: String| {
            let (Some(ry), true) = (y_of.get(&row), from <= t1) else {
                return;
            };
            // An instant (a load) as a 2-pixel tick; a span at least half a pixel wide.
            let (a, b) = (x(from), if to == from { x(from) + 2.0 } else { x(to) });
            let _ = writeln!(
                out,
                r#"<rect x="{a:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{color}"><title>{}</title></rect>"#,
                ry + 2.0,
                (b - a).max(0.5),
                ROW - 4.0,
                xml(&title)
            );
        };
        for h in trace.held() {
            mark(
                &mut out,
                (h.block, h.warp, 1),
                h.from_ns,
                h.to_ns,
                HELD,
                format!(
                    "{} stage {} pass {}: held {:.3} us (wait end -> release)",
                    trace.pipeline_name(h.pipeline),
                    h.stage,
                    h.pass,
                    (h.to_ns - h.from_ns) as f64 / 1e3
                ),
            );
        }
        for e in &trace.events {
            let row = (e.block, e.warp, role(e.kind));
            let title = format!(
                "{} {} stage {} pass {}: at {:.3} us{}",
                trace.pipeline_name(e.pipeline),
                e.kind.name(),
                e.stage,
                e.pass,
                (e.start_ns - t0) as f64 / 1e3,
                if e.kind.is_wait() {
                    format!(", waited {:.3} us", f64::from(e.duration_ns) / 1e3)
                } else {
                    String::new()
                }
            );
            match e.kind {
                TimelineKind::Acquire => {
                    mark(&mut out, row, e.start_ns, e.end_ns(), ACQUIRE, title)
                }
                TimelineKind::Wait => mark(&mut out, row, e.start_ns, e.end_ns(), WAIT, title),
                TimelineKind::Load => mark(&mut out, row, e.start_ns, e.start_ns, LOAD, title),
                TimelineKind::Release => {}
            }
        }
        out.push_str("</svg>\n");
        out
    }
}

/// A round step (1, 2 or 5 times a power of ten) at or above `raw`.
fn round_step(raw: f64) -> f64 {
    if raw.is_nan() || raw <= 0.0 {
        return 0.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

/// A tick's label: no trailing zeros.
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Text for SVG: the five XML specials escaped.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
mod tests {
    use super::super::trace::tests::sample;
    use super::*;

    /// The picture parsed as XML: its elements, or the parser's complaint.
    fn well_formed(svg: &str) -> Result<usize, String> {
        let doc = roxmltree::Document::parse(svg).map_err(|e| e.to_string())?;
        if doc.root_element().tag_name().name() != "svg" {
            return Err("the root is no <svg>".into());
        }
        Ok(doc.descendants().filter(|n| n.is_element()).count())
    }

    #[test]
    fn the_picture_is_well_formed_with_a_row_per_role() {
        let (shape, bytes) = sample();
        let t = Trace::decode(&bytes, shape, 1, vec!["a<b>&\"c\"".into()]).unwrap();
        let svg = t.svg(&SvgOptions::default());
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(svg.contains("1 event(s) dropped"));
        // 2 blocks x (producer + consumer rows); 3 passes each of acquire, load, wait, held.
        assert_eq!(svg.matches(">warp 0 producer<").count(), 2);
        assert_eq!(svg.matches(">warp 1 consumer<").count(), 2);
        for color in [ACQUIRE, WAIT, HELD, LOAD] {
            assert_eq!(
                svg.matches(&format!("fill=\"{color}\"><title>")).count(),
                6,
                "{color}"
            );
        }
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&quot; wait stage 0 pass 0"));
        // One block, and the first 1.2 us: marks after it are left out.
        let one = t.svg(&SvgOptions {
            blocks: 1,
            until_us: Some(1.2),
            ..SvgOptions::default()
        });
        well_formed(&one).unwrap();
        assert!(one.contains("block 0 (SM 7)") && !one.contains("block 1 (SM 8)"));
        assert_eq!(
            one.matches(&format!("fill=\"{ACQUIRE}\"><title>")).count(),
            2
        );
        // The titles read back unescaped.
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert!(doc.descendants().any(|n| n.has_tag_name("title")
            && n.text() == Some("a<b>&\"c\" wait stage 0 pass 0: at 0.100 us, waited 0.050 us")));
        // A checker that can fail: an unclosed element is caught.
        assert!(well_formed("<svg><g></svg>").is_err());
        // Nothing recorded: still a picture.
        well_formed(&Trace::default().svg(&SvgOptions::default())).unwrap();
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(round_step(0.13), 0.2);
        assert_eq!(round_step(3.0), 5.0);
        assert_eq!(round_step(70.0), 100.0);
        assert_eq!(trim(2.5), "2.5");
        assert_eq!(trim(20.0), "20");
    }
}
