//! The plan checks that need no GPU: every configuration's A and B tiles loaded by tma's CPU
//! model of TMA and read back through the descriptors the kernel builds (tma's model of what
//! wgmma reads), the pipeline's numbers, and D's staging offsets against what stmatrix needs.

use tma::model;
use tma::smem::ElementOffsets;
use tma::wgmma::read::{read_operand, ReadShape};
use tma::wgmma::OperandPlan;
use tma::ValidSpec;

use crate::kernel::{Kind, Plan, Res, BK};
use crate::rng::Rng;

/// One operand tile: loaded by the TMA model at (rows, BK) of a random matrix three tiles
/// tall and three k-blocks wide, read through every descriptor (each 64-row block, each
/// k-slice) at a 1024-aligned base; returns the elements read.
fn operand_reads_back(valid: &ValidSpec, rows: u64, rng: &mut Rng) -> Res<u64> {
    let plan = OperandPlan::new(valid).ok_or("not an operand tile")?;
    let global = [3 * rows, 3 * u64::from(BK)];
    let bound = valid.bind(&global, None)?;
    let e = plan.kind.bytes();
    let mut bytes = vec![0u8; (global[0] * global[1] * e) as usize];
    for b in bytes.iter_mut() {
        *b = rng.next() as u8;
    }
    let origin = [rows as i64, i64::from(BK)];
    let smem = model::load(&bound, &bytes, &origin)?;
    if plan.mn != rows || plan.sbo != 1024 {
        return Err(format!(
            "tile {}: {} rows, SBO {} (want {rows}, 1024)",
            valid.spec().name,
            plan.mn,
            plan.sbo
        )
        .into());
    }
    let base = 1024 * 37;
    let shape = ReadShape {
        operand: plan.operand.operand,
        major: plan.operand.major,
        kind: plan.kind,
        n: plan.mn,
    };
    let mut read = 0;
    for block in 0..plan.m_blocks {
        for slice in 0..plan.k_slices {
            let desc = plan.descriptor(valid, base, slice, block)?.encode()?;
            let got = read_operand(desc, &shape, &smem, base)?;
            for row in 0..shape.rows() {
                for k in 0..shape.k() {
                    let (gr, gk) = (
                        origin[0] as u64 + block * 64 + row,
                        origin[1] as u64 + slice * plan.shape.k + k,
                    );
                    let at = ((gr * global[1] + gk) * e) as usize;
                    if got[(row * shape.k() + k) as usize] != bytes[at..at + e as usize] {
                        return Err(format!(
                            "tile {}: block {block} k-slice {slice} reads the wrong element at row {row}, k {k}",
                            valid.spec().name
                        )
                        .into());
                    }
                    read += 1;
                }
            }
        }
    }
    Ok(read)
}

/// D's staging: every position lands once inside the call's shared memory, and each run of 16
/// bytes (8 16-bit elements: one stmatrix row; 4 f32: two float2 stores) stays contiguous.
fn staging_offsets(d: &ValidSpec) -> Res<u64> {
    let offs = ElementOffsets::new(d).ok_or("no element offsets")?;
    let e = d
        .spec()
        .dtype
        .smem_bytes(1u64)
        .get()
        .ok_or("element size")?;
    let n = offs.positions();
    let mut seen = vec![false; (d.plan().footprint_bytes / e) as usize];
    for i in 0..n {
        let p = offs.position(i);
        let o = offs.offset(&p, 0).ok_or("offset")?;
        let slot = seen
            .get_mut((o / e) as usize)
            .ok_or("offset past the footprint")?;
        if *slot || o % e != 0 {
            return Err(format!("D position {p:?} at {o}: taken twice or misaligned").into());
        }
        *slot = true;
        let (col, run) = (p[1], 16 / e);
        if col % run == 0 {
            for j in 1..run {
                let q = [p[0], col + j];
                if offs.offset(&q, 0) != Some(o + j * e) {
                    return Err(format!(
                        "D row {} columns {col}..+{run} are not 16 contiguous bytes",
                        p[0]
                    )
                    .into());
                }
            }
            if o % 16 != 0 {
                return Err(format!("D position {p:?}: a 16-byte run starts at {o}").into());
            }
        }
    }
    if seen.iter().any(|s| !s) {
        return Err("D's staging has holes".into());
    }
    Ok(n)
}

/// Every check of one plan; a one-line summary.
pub fn check(plan: &Plan, rng: &mut Rng) -> Res<String> {
    let c = &plan.config;
    let p = &plan.pipeline;
    let layout = p.layout();
    let tx = plan.a.plan().tx_bytes + plan.b.plan().tx_bytes;
    let stage_data = u64::from(c.bm + c.bn) * u64::from(BK) * 2;
    if p.stage_tx_bytes() != tx || tx != stage_data {
        return Err(format!(
            "{c}: STAGE_TX_BYTES {} (tiles {tx}, want {stage_data})",
            p.stage_tx_bytes()
        )
        .into());
    }
    if layout.stage_stride % 1024 != 0 || layout.stage.offsets.iter().any(|o| o % 1024 != 0) {
        return Err(format!("{c}: a stage's tile is not 1024-aligned").into());
    }
    // Each releasing warpgroup's 4 warps (or its thread 0): all consumers, or the ping-pong
    // consumer that took the stage.
    let releasers = if c.kind == Kind::PingPong {
        1
    } else {
        c.consumers()
    };
    let per_cta = if c.wg_release { 1 } else { 4 } * releasers;
    if p.empty_arrivals() != per_cta * p.peers() {
        return Err(format!("{c}: empty barrier counts {}", p.empty_arrivals()).into());
    }
    // The maps of ragged shapes bind (boxes may pass the tensor: TMA fills and clips).
    for (m, n, k) in [(8u64, 8u64, 8u64), (136, 264, 72), (8192, 8192, 8192)] {
        plan.a.bind(&[m, k], None)?;
        plan.b.bind(&[n, k], None)?;
        if let Some(d) = &plan.d {
            d.bind(&[m, n], None)?;
        }
    }
    let ra = operand_reads_back(&plan.a, u64::from(c.bm), rng)?;
    let rb = operand_reads_back(&plan.b, u64::from(c.bn), rng)?;
    let rd = match &plan.d {
        Some(d) => staging_offsets(d)?,
        None => 0,
    };
    Ok(format!(
        "STAGE_TX_BYTES {} x {} stages, smem {} B, wgmma reads A {ra} + B {rb} elements exact{}",
        p.stage_tx_bytes(),
        c.stages,
        plan.kernel.launch().dynamic_smem_bytes,
        if rd > 0 {
            format!(", D staging {rd} positions")
        } else {
            String::new()
        }
    ))
}
