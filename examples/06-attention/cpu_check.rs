//! The plan checks that need no GPU: Q, K and V loaded by tma's CPU model of TMA at a random
//! place of a random [B H][S][D] tensor and read back through every descriptor the kernel
//! builds (tma's model of what wgmma reads: each consumer's 64-row block of Q, every k-slice of
//! K and of MN-major V), element for element against the tensor.

use tma::model;
use tma::spec::Major;
use tma::wgmma::read::{read_operand, ReadShape};
use tma::wgmma::OperandPlan;
use tma::ValidSpec;

use crate::kernel::{Plan, Res};
use crate::rng::Rng;

/// One operand tile of `rows` sequence rows at a random (head, row) of a random tensor:
/// returns the elements read back, or the first that differs.
fn reads_back(valid: &ValidSpec, rows: u64, d: u64, rng: &mut Rng) -> Res<u64> {
    let name = &valid.spec().name;
    let plan = OperandPlan::new(valid).ok_or("not an operand tile")?;
    let (heads, seq) = (3u64, 3 * rows);
    let global = [heads, seq, d];
    let bound = valid.bind(&global, None)?;
    let e = plan.kind.bytes();
    let bytes: Vec<u8> = (0..heads * seq * d * e).map(|_| rng.next() as u8).collect();
    let (head, row0) = (1 + rng.below(heads - 1), rng.below(seq - rows + 1));
    let smem = model::load(&bound, &bytes, &[head as i64, row0 as i64, 0])?;
    let base = 1024 * 41;
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
            for r in 0..shape.rows() {
                for k in 0..shape.k() {
                    // [row][k] of the instruction: Q and K are [seq][d] (K-major), V's MN is d.
                    let (s, c) = match plan.operand.major {
                        Major::K => (row0 + block * 64 + r, slice * plan.shape.k + k),
                        Major::MN => (row0 + slice * plan.shape.k + k, r),
                    };
                    let at = (((head * seq + s) * d + c) * e) as usize;
                    if got[(r * shape.k() + k) as usize] != bytes[at..at + e as usize] {
                        return Err(format!(
                            "tile {name}: block {block} k-slice {slice} reads the wrong element at row {r}, k {k}"
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

/// Every operand of the plan read back; returns the elements checked.
pub fn check_plan(p: &Plan, rng: &mut Rng) -> Res<u64> {
    let c = &p.config;
    let d = u64::from(c.d);
    let mut n = reads_back(&p.q, u64::from(c.bm()), d, rng)?;
    n += reads_back(&p.k, u64::from(c.bn), d, rng)?;
    n += reads_back(&p.v, u64::from(c.bn), d, rng)?;
    // The numbers the kernel's static_asserts restate, from the same declarations.
    let (q, k, v) = (
        OperandPlan::new(&p.q).ok_or("q")?,
        OperandPlan::new(&p.k).ok_or("k")?,
        OperandPlan::new(&p.v).ok_or("v")?,
    );
    if q.m_blocks != u64::from(c.consumers()) || k.mn != u64::from(c.bn) || v.mn != d {
        return Err(format!(
            "{c}: Q has {} blocks, K N {}, V N {}",
            q.m_blocks, k.mn, v.mn
        )
        .into());
    }
    if q.k_slices * 16 != d || v.k_slices * 16 != u64::from(c.bn) {
        return Err(format!("{c}: k-slices Q {} V {}", q.k_slices, v.k_slices).into());
    }
    Ok(n)
}
