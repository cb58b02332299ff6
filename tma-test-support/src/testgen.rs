//! Random valid specs for tests (CPU property tests and GPU comparisons), from a tiny
//! deterministic RNG: the same seed gives the same specs on every machine.

use tma_core::dtype::DType;
use tma_core::model::{self, ModelOptions};
use tma_core::smem::{self as swz, InnerRowLayout};
use tma_core::spec::{Arch, Extent, Interleave, OobFill, Swizzle, TileSpec};
use tma_core::validate::{validate, BoundSpec, ValidSpec};

mod units;
pub use units::{name_pools, random_name, random_unit, NamePools, RandomUnit, Taken};

/// The seed of a GPU test's fresh random data: `TMA_GPU_SEED` when set (to replay a failing
/// run), else the clock mixed with the process id. Callers print it.
pub fn gpu_seed() -> u64 {
    std::env::var("TMA_GPU_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                ^ u64::from(std::process::id())
        })
}

/// xorshift64* — small, fast, deterministic. Not for anything but tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XorShift {
    state: u64,
}

impl XorShift {
    /// A generator from `seed` (any value; 0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> XorShift {
        let state = seed ^ 0x9e37_79b9_7f4a_7c15;
        XorShift {
            state: if state == 0 {
                0x2545_f491_4f6c_dd1d
            } else {
                state
            },
        }
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (`0` when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }
    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    /// A uniformly chosen item (`None` for an empty slice).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len() as u64) as usize)
    }
    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Whole-byte element types, by size.
const DTYPES: [DType; 12] = [
    DType::U8,
    DType::U16,
    DType::F16,
    DType::BF16,
    DType::U32,
    DType::I32,
    DType::F32,
    DType::F32Ftz,
    DType::TF32,
    DType::U64,
    DType::I64,
    DType::F64,
];

/// Largest tensor the generator makes, in bytes.
pub const MAX_TENSOR_BYTES: u64 = 256 * 1024;

/// A random spec that validates and binds for `arch`, and coordinates for one call.
///
/// Covers ranks 1-5, element sizes 1/2/4/8, every swizzle `arch` has (inner boxes from 16 B up
/// to the span, so narrower-than-span rows too), element strides, repeats,
/// explicit smem strides, padded global strides, NaN fill, and one spec in eight interleaved
/// (16B or 32B chunks, the inner dim in chunks, any chunk coordinate); coordinates straddle
/// every edge (negative, inside, past the end). Tensors stay below [`MAX_TENSOR_BYTES`]. Specs
/// whose repeated boxes would overlap under either [`InnerRowLayout`] are not generated, so
/// [`tma_core::model`] accepts every one.
pub fn random_valid_spec(rng: &mut XorShift, arch: Arch) -> (BoundSpec, Vec<i64>) {
    loop {
        if let Some(found) = attempt(rng, arch) {
            return found;
        }
    }
}

fn attempt(rng: &mut XorShift, arch: Arch) -> Option<(BoundSpec, Vec<i64>)> {
    let dtype = *rng.pick(&DTYPES)?;
    let esize = dtype.size_bytes()?;
    let interleave = if rng.chance(1, 8) {
        *rng.pick(&[Interleave::B16, Interleave::B32])?
    } else {
        Interleave::None
    };
    let rank = if interleave == Interleave::None {
        rng.range(1, 5) as usize
    } else {
        rng.range(3, 5) as usize
    };
    let mut swizzles = vec![Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128];
    if arch.is_blackwell() {
        swizzles.extend([
            Swizzle::B128Atom32B,
            Swizzle::B128Atom32BFlip8B,
            Swizzle::B128Atom64B,
        ]);
    }
    let swizzle = if interleave == Interleave::B32 {
        Swizzle::B32
    } else {
        *rng.pick(&swizzles)?
    };
    let inner = rank - 1;

    // Innermost dim: global extent and box (chunks with interleave).
    let (g_inner, b_inner) = match interleave.chunk_bytes() {
        Some(_) => {
            // The driver checks box x element size as if the box counted elements: a
            // multiple of 16 bytes, so the chunk count is a multiple of 16 / esize.
            let step = (16 / esize).max(1);
            let b = (step * rng.range(1, 3)).min(256 / step * step);
            let g = match rng.below(3) {
                0 => b,
                1 => rng.range(1, b),
                _ => rng.range(b, 2 * b),
            };
            (g.max(1), b)
        }
        None => {
            let max_box_bytes = swizzle.span_bytes().unwrap_or(128);
            let box_bytes = 16 * rng.range(1, max_box_bytes / 16);
            let b = (box_bytes / esize).clamp(1, 256);
            let g = match rng.below(4) {
                0 => b,
                1 => rng.range(1, b),
                _ => rng.range(b, 3 * b),
            };
            (g.max(1), b)
        }
    };
    let mut global = vec![0u64; rank];
    let mut boxed = vec![0u32; rank];
    let mut estrides = vec![1u32; rank];
    global[inner] = g_inner;
    boxed[inner] = b_inner as u32;
    let outer_max: u64 = match rank {
        1 | 2 => 24,
        3 => 10,
        _ => 6,
    };
    for d in 0..inner {
        global[d] = rng.range(1, outer_max);
        boxed[d] = rng.range(1, (global[d] + 2).min(12)) as u32;
        if rng.chance(1, 5) {
            estrides[d] = rng.range(2, 3) as u32;
        }
    }
    if interleave != Interleave::None {
        // One position along dim 1 per copy (the hardware ignores a larger box there).
        boxed[1] = 1;
        if rng.chance(1, 5) {
            estrides[inner] = rng.range(2, 3) as u32;
        }
    }
    // Global strides (elements): dense or padded, byte strides multiples of the alignment.
    let align = if interleave == Interleave::B32 {
        32
    } else {
        16
    };
    let mut strides = vec![1u64; rank];
    let inner_unit = interleave.chunk_bytes().map_or(1, |c| c / esize);
    for d in (0..inner).rev() {
        let unit = if d + 1 == inner { inner_unit } else { 1 };
        let span_bytes = strides[d + 1] * unit * global[d + 1] * esize;
        let mut bytes = span_bytes.next_multiple_of(align);
        if rng.chance(1, 4) {
            bytes += align * rng.range(1, 3);
        }
        strides[d] = bytes / esize;
    }
    let tensor_bytes = strides[0] * global[0] * esize;
    if tensor_bytes > MAX_TENSOR_BYTES {
        return None;
    }
    let mut repeat = vec![1u32; rank];
    if rng.chance(1, 4) {
        let d = rng.below(rank as u64) as usize;
        repeat[d] = rng.range(2, 3) as u32;
        if rng.chance(1, 3) {
            let e = rng.below(rank as u64) as usize;
            repeat[e] = repeat[e].max(2);
        }
    }
    let oob_fill = if dtype.is_float() && rng.chance(1, 3) {
        OobFill::NanRequestZeroFma
    } else {
        OobFill::Zero
    };
    let mut spec = TileSpec::new("gen", dtype, global.clone(), boxed.clone())
        .strides(strides.clone())
        .element_strides(estrides.clone())
        .interleave(interleave)
        .swizzle(swizzle)
        .oob_fill(oob_fill)
        .repeat(repeat.clone())
        .target(arch);
    // Explicit smem stride: always when padded rows would outgrow the default one, and
    // sometimes anyway (one extra aligned block).
    let padded = {
        let rows: u64 = (0..inner)
            .map(|d| u64::from(boxed[d]).div_ceil(u64::from(estrides[d])))
            .product();
        swz::row_pitch_bytes(&spec, InnerRowLayout::PadToSpan) * rows
    };
    let boxes: u64 = repeat.iter().map(|&r| u64::from(r)).product();
    let align_bytes = swizzle.period_bytes().max(tma_core::limits::SMEM_ALIGN);
    if let (true, Some(mut stride_bytes)) = (boxes > 1, padded.next_multiple_of(align_bytes).get())
    {
        if rng.chance(1, 3) {
            stride_bytes += align_bytes;
        }
        if stride_bytes % esize == 0 {
            spec = spec.smem_stride(stride_bytes / esize);
        }
    }
    let bound = validate(&spec).ok()?.bind(&global, Some(&strides)).ok()?;
    for inner_rows in [InnerRowLayout::PadToSpan, InnerRowLayout::Dense] {
        model::smem_layout(&bound, ModelOptions { inner_rows }).ok()?;
    }
    let inner_multiple = bound.valid().inner_coord_multiple() as i64;
    let coords = (0..rank)
        .map(|d| {
            let g = global[d] as i64;
            let reach = i64::from(boxed[d]) * i64::from(repeat[d]);
            match rng.below(6) {
                0 => -(rng.range(1, reach as u64 + 1) as i64),
                1 => g - rng.range(0, reach as u64) as i64,
                2 => g + rng.range(0, 3) as i64,
                _ => rng.range(0, g.max(1) as u64 - 1) as i64,
            }
        })
        .enumerate()
        // The innermost coordinate sits on 16 bytes, as the hardware requires.
        .map(|(d, c): (usize, i64)| {
            if d == rank - 1 {
                c - c.rem_euclid(inner_multiple)
            } else {
                c
            }
        })
        .collect();
    Some((bound, coords))
}

/// A valid spec with run-time dims, and run-time values that bind it (user order).
#[derive(Clone, Debug)]
pub struct RuntimeSpec {
    /// Some global dims (at least one) are [`Extent::Runtime`]; declared strides too, at
    /// random, or none declared (dense row-major).
    pub valid: ValidSpec,
    /// Every global dim, static ones as declared: a shape that binds.
    pub global: Vec<u64>,
    /// Every stride (elements), when the spec declares strides: ones that bind.
    pub strides: Option<Vec<u64>>,
}

/// A random spec of [`random_valid_spec`]'s kinds (on Blackwell, one in four of a packed
/// sub-byte type instead) with a random set of its global dims (at least one) and declared
/// strides made run-time ones; one in three declares no strides (dense row-major). Named
/// `name`; one spec in three names its dims.
pub fn random_runtime_spec(rng: &mut XorShift, arch: Arch, name: &str) -> RuntimeSpec {
    loop {
        let spec = if arch.is_blackwell() && rng.chance(1, 4) {
            match packed_spec(rng, arch) {
                Some(s) => s,
                None => continue,
            }
        } else {
            random_valid_spec(rng, arch).0.spec().clone()
        };
        if let Some(found) = runtime_variant(rng, spec, name) {
            return found;
        }
    }
}

/// A rank 1-3 spec of a packed sub-byte type (Blackwell only), or `None` when the random
/// shape breaks a rule.
fn packed_spec(rng: &mut XorShift, arch: Arch) -> Option<TileSpec> {
    let dtype = *rng.pick(&[
        DType::U4x16Align8B,
        DType::U4x16Align16B,
        DType::U6x16Align16B,
    ])?;
    let rank = rng.range(1, 3) as usize;
    let inner = rank - 1;
    let mut global: Vec<u64> = (0..rank).map(|_| rng.range(1, 12)).collect();
    let mut boxed: Vec<u32> = global.iter().map(|&g| rng.range(1, g) as u32).collect();
    boxed[inner] = 128 * rng.range(1, 2) as u32;
    global[inner] = 128 * rng.range(1, 4);
    let swizzle = *rng.pick(&[Swizzle::None, Swizzle::B64, Swizzle::B128])?;
    let spec = TileSpec::new("packed", dtype, global, boxed)
        .swizzle(swizzle)
        .target(arch);
    validate(&spec).ok().map(|v| v.spec().clone())
}

/// `spec` (valid and bound with static dims) with run-time dims and strides, or `None` when
/// the variant does not validate.
fn runtime_variant(rng: &mut XorShift, mut spec: TileSpec, name: &str) -> Option<RuntimeSpec> {
    let rank = spec.rank();
    let global: Vec<u64> = spec.global.iter().map(|e| e.get()).collect::<Option<_>>()?;
    spec.name = name.to_string();
    let first = rng.below(rank as u64) as usize;
    for (d, e) in spec.global.iter_mut().enumerate() {
        if d == first || rng.chance(1, 2) {
            *e = Extent::Runtime;
        }
    }
    let strides = if rng.chance(1, 3) {
        spec.strides = None;
        None
    } else {
        let inner_unit = spec.inner_unit_elements();
        let declared = spec.strides.get_or_insert_with(Vec::new);
        if declared.is_empty() {
            let dense = tma_core::validate::dense_strides(&global, inner_unit)?;
            *declared = dense.into_iter().map(Extent::Static).collect();
        }
        let values: Vec<u64> = declared.iter().map(|e| e.get()).collect::<Option<_>>()?;
        for e in declared.iter_mut() {
            if rng.chance(1, 2) {
                *e = Extent::Runtime;
            }
        }
        Some(values)
    };
    if rng.chance(1, 3) {
        let labels = ["n", "c", "h", "w", "k"];
        spec = spec.dim_names(labels[labels.len() - rank..].iter().copied());
    }
    let valid = validate(&spec).ok()?;
    valid.bind(&global, strides.as_deref()).ok()?;
    Some(RuntimeSpec {
        valid,
        global,
        strides,
    })
}

/// Every operand combination wgmma takes from shared memory: (dtype, operand, major,
/// swizzle), MN-major only for the 16-bit types ([`tma_core::Rule::WgmmaMajor`]). 56 in all.
pub fn operand_combinations() -> Vec<(DType, tma_core::WgmmaOperand, Swizzle)> {
    use tma_core::operand::{Major, Operand, WgmmaOperand, WgmmaType};
    let mut out = Vec::new();
    for dtype in [
        DType::BF16,
        DType::F16,
        DType::TF32,
        DType::E4M3,
        DType::E5M2,
    ] {
        let Some(kind) = WgmmaType::of(dtype) else {
            continue;
        };
        for operand in [Operand::A, Operand::B] {
            for major in [Major::K, Major::MN] {
                if major == Major::MN && !kind.allows_mn_major() {
                    continue;
                }
                for swizzle in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
                    out.push((dtype, WgmmaOperand { operand, major }, swizzle));
                }
            }
        }
    }
    out
}

/// One shape of the register-fragment tests (the pieces of an attention forward on one
/// warpgroup): `S = Q K^T` (64 x `n_kv`, K = `d`), then `O = P V` (64 x `d`, K = `n_kv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub dtype: DType,
    pub n_kv: u64,
    pub d: u64,
}

/// The register-fragment tests' shapes: every `n_kv` from 16 to 256 in steps of 16, bf16 and
/// f16; `d` is a permutation of the same 16 values for each type (bf16 `272 - n_kv`, f16 7
/// times around), so every N of both products is run in both types, and Q, K and V of one
/// shape fit one block's shared memory (at most 182 KB). 32 in all.
pub fn attention_shapes() -> Vec<AttentionShape> {
    let mut out = Vec::new();
    for dtype in [DType::BF16, DType::F16] {
        for n_kv in (16..=256u64).step_by(16) {
            let d = match dtype {
                DType::BF16 => 272 - n_kv,
                _ => (n_kv / 16 * 7 % 16 + 1) * 16,
            };
            out.push(AttentionShape { dtype, n_kv, d });
        }
    }
    out
}

/// The Q, K and V tiles of `shape`, as an attention kernel declares them, on global tensors of
/// two blocks each (`[128, d]` for Q, `[2 n_kv, d]` for K and V; dims `S`, `D`): Q an A operand
/// (64 x d, K-major), K a B operand (`n_kv` rows, K-major), V a B operand read MN-major (its
/// rows are K = `n_kv`, its contiguous `d` is N). K-major tiles take boxes of 4, 2 or 1
/// k-slices (the most that divide `d / 16`) in the swizzle of that width; V the widest swizzle
/// whose span divides a row of `d`.
pub fn attention_tiles(shape: AttentionShape) -> Result<[ValidSpec; 3], tma_core::SpecErrors> {
    use tma_core::operand::{Major, Operand};
    let AttentionShape { dtype, n_kv, d } = shape;
    let e = dtype.size_bytes().unwrap_or(2);
    let k_slices = d / 16;
    // Boxes of 4, 2 or 1 k-slices (128, 64 or 32 bytes a row), each in the swizzle of its
    // width: no row padded.
    let (per_box, k_swizzle) = [(4, Swizzle::B128), (2, Swizzle::B64), (1, Swizzle::B32)]
        .into_iter()
        .find(|(j, _)| k_slices % j == 0)
        .unwrap_or((1, Swizzle::B32));
    let k_box = per_box * 16;
    let k_major = |name: &str, rows: u64, operand: Operand| {
        TileSpec::new(name, dtype, [2 * rows, d], [rows as u32, k_box as u32])
            .dim_names(["S", "D"])
            .swizzle(k_swizzle)
            .repeat([1, (d / k_box) as u32])
            .wgmma(operand, Major::K)
    };
    let swizzle = [Swizzle::B128, Swizzle::B64, Swizzle::B32]
        .into_iter()
        .find(|s| s.span_bytes().is_some_and(|span| (d * e) % span == 0))
        .unwrap_or(Swizzle::None);
    let inner = swizzle.span_bytes().unwrap_or(16) / e;
    let v = TileSpec::new("v", dtype, [2 * n_kv, d], [n_kv as u32, inner as u32])
        .dim_names(["S", "D"])
        .swizzle(swizzle)
        .repeat([1, (d / inner) as u32])
        .wgmma(Operand::B, Major::MN);
    Ok([
        validate(&k_major("q", 64, Operand::A))?,
        validate(&k_major("k", n_kv, Operand::B))?,
        validate(&v)?,
    ])
}

/// Byte ranges of the integer literals of `text` (a `-` and a suffix included; not the
/// digits of a name such as `tma_2d` or `bf16`): the places the declaration-syntax property
/// tests and the fuzz target rewrite with boundary values.
pub fn integer_literals(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let in_name = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if b[i].is_ascii_digit() && !in_name {
            let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            out.push((start, j));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Every unsigned decimal literal (`<digits>u`, not `ull`) of generated CUDA, as written
/// (saturated at `u128::MAX`): tests check none passes `u32::MAX`, so no rendered 32-bit
/// constant, box offset or offset term wrapped.
pub fn unsigned_literals(source: &str) -> Vec<u128> {
    let b = source.as_bytes();
    let ident = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() || (i > 0 && ident(&b[i - 1])) {
            i += 1;
            continue;
        }
        let j = (i..b.len())
            .find(|&j| !b[j].is_ascii_digit())
            .unwrap_or(b.len());
        if b.get(j) == Some(&b'u') && !b.get(j + 1).is_some_and(ident) {
            out.push(source[i..j].parse().unwrap_or(u128::MAX));
        }
        i = j;
    }
    out
}

/// A wgmma operand tile of `dtype`, declared `w`, with `swizzle`: `mn` rows of the operand
/// (a multiple of 64 for A, of 8 for B; rounded up to whole boxes along an MN-major inner
/// dim) and `k_slices` instructions along K, the boxes split at random where the rules allow
/// (K-major: slices per box; K-major swizzled with K one box: the rows in 1, 2 or 4 repeated
/// boxes; a batch dim of box 1 one time in four). Returns the bound spec
/// and the coordinates (user order) of one call, in bounds, or `None` where the shape breaks a
/// rule or the footprint passes [`MAX_OPERAND_SMEM_BYTES`] (the caller picks another).
pub fn operand_case(
    rng: &mut XorShift,
    dtype: DType,
    w: tma_core::WgmmaOperand,
    swizzle: Swizzle,
    mn: u64,
    k_slices: u64,
) -> Option<(BoundSpec, Vec<i64>)> {
    use tma_core::operand::{Major, WgmmaType, K_BYTES};
    let e = WgmmaType::of(dtype)?.bytes();
    // (box, repeat) per matrix dim: [outer, inner] user order.
    let (outer_box, inner_box, inner_repeat) = match (w.major, swizzle.span_bytes()) {
        (Major::K, None) => (mn, 16 / e, 2 * k_slices),
        (Major::K, Some(span)) => {
            let fits: Vec<u64> = (1..=span / K_BYTES).filter(|j| k_slices % j == 0).collect();
            let per_box = *rng.pick(&fits)?;
            (mn, per_box * K_BYTES / e, k_slices / per_box)
        }
        (Major::MN, span) => {
            let inner = span.unwrap_or(16) / e;
            (k_slices * K_BYTES / e, inner, mn.div_ceil(inner))
        }
    };
    // A K-major swizzled tile whose K is one box may split its rows into repeated boxes of
    // whole 8-row groups (how a multicast pipeline shares a tile over cluster CTAs).
    let outer_repeat = match (w.major, swizzle.span_bytes()) {
        (Major::K, Some(_)) if inner_repeat == 1 => {
            let splits: Vec<u64> = [1, 2, 4]
                .into_iter()
                .filter(|r| mn % (8 * r) == 0)
                .collect();
            *rng.pick(&splits)?
        }
        _ => 1,
    };
    let outer_box = outer_box / outer_repeat;
    let batch = rng.chance(1, 4);
    let mut boxed = vec![
        u32::try_from(outer_box).ok()?,
        u32::try_from(inner_box).ok()?,
    ];
    let mut repeat = vec![
        u32::try_from(outer_repeat).ok()?,
        u32::try_from(inner_repeat).ok()?,
    ];
    let extents = [outer_box * outer_repeat, inner_box * inner_repeat];
    let mut global: Vec<u64> = extents.iter().map(|x| x * rng.range(1, 3)).collect();
    let mut coords: Vec<i64> = (0..2)
        .map(|d| (extents[d] * rng.below(global[d] / extents[d])) as i64)
        .collect();
    if batch {
        boxed.insert(0, 1);
        repeat.insert(0, 1);
        let b = rng.range(2, 3);
        global.insert(0, b);
        coords.insert(0, rng.below(b) as i64);
    }
    let spec = TileSpec::new(format!("op_{}", w.name()), dtype, global.clone(), boxed)
        .swizzle(swizzle)
        .repeat(repeat)
        .wgmma(w.operand, w.major);
    let bound = validate(&spec).ok()?.bind(&global, None).ok()?;
    // Room beside it in one block (and for the descriptors' 18-bit addresses).
    if bound.plan().footprint_bytes > MAX_OPERAND_SMEM_BYTES {
        return None;
    }
    Some((bound, coords))
}

/// Largest shared-memory footprint [`operand_case`] makes: 128 KB.
pub const MAX_OPERAND_SMEM_BYTES: u64 = 128 * 1024;

/// A random valid im2col spec (ranks 3-5, element sizes 1/2/4/8, every sm_90 swizzle, corners
/// over their whole range but kept small enough for small tensors, traversal strides 1-8, NaN
/// or zero fill), bound to a small random tensor, and a random load of it: coordinates (user
/// order: N, the spatial dims inside the bounding box, C on 16 bytes, past the channels
/// sometimes) and offsets (filter taps, within the rank's range, past the tensor sometimes).
/// Every spec fits one block's shared memory.
pub fn random_im2col(rng: &mut XorShift) -> (tma_core::BoundIm2col, Vec<i64>, Vec<i64>) {
    use tma_core::limits::{im2col_corner_range, im2col_offset_max};
    use tma_core::{validate_im2col, Im2colSpec};
    loop {
        let rank = rng.range(3, 5) as usize;
        let k = rank - 2;
        let dtype = *rng
            .pick(&[
                DType::U8,
                DType::U16,
                DType::F16,
                DType::BF16,
                DType::F32,
                DType::TF32,
                DType::U64,
                DType::F64,
                DType::E4M3,
            ])
            .unwrap_or(&DType::F16);
        let esize = dtype.size_bytes().unwrap_or(2);
        let swizzle = *rng
            .pick(&[Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128])
            .unwrap_or(&Swizzle::None);
        let span = swizzle.span_bytes().unwrap_or(256);
        // Channels: a multiple of 16 bytes within the span (and 256 elements).
        let unit = (16 / esize).max(1);
        let max_units = (span / 16).min(256 / unit).max(1);
        let channels = (unit * rng.range(1, max_units)) as u32;
        let c_extent = if rng.chance(1, 4) {
            u64::from(channels) * rng.range(1, 3)
        } else {
            // Channel counts of 16 bytes that may be fewer than one load's channels.
            unit * rng.range(1, 2 * max_units)
        };
        let mut global = vec![rng.range(1, 3)];
        for _ in 0..k {
            global.push(rng.range(1, if k == 3 { 6 } else { 12 }));
        }
        global.push(c_extent);
        let (lo, hi) = im2col_corner_range(k);
        let mut lower = Vec::new();
        let mut upper = Vec::new();
        let mut estrides = Vec::new();
        for i in 0..k {
            let dim = global[i + 1] as i64;
            // Mostly convolution-like corners (pad 0-3, filters 1-5), now and then the edges.
            let (l, u) = if rng.chance(1, 10) {
                (
                    rng.range(0, (hi - lo) as u64) as i64 + i64::from(lo),
                    rng.range(0, (hi - lo) as u64) as i64 + i64::from(lo),
                )
            } else {
                let pad = rng.range(0, 3) as i64;
                let taps = rng.range(1, 5) as i64;
                (-pad, pad - (taps - 1))
            };
            let l = l.clamp(i64::from(lo), i64::from(hi));
            let u = u.clamp(i64::from(lo), i64::from(hi));
            if dim + u - l < 1 {
                lower.push(0);
                upper.push(0);
            } else {
                lower.push(l as i32);
                upper.push(u as i32);
            }
            estrides.push(if rng.chance(1, 2) {
                1
            } else {
                rng.range(1, 8) as u32
            });
        }
        let pixels = *rng
            .pick(&[1u32, 2, 7, 8, 16, 31, 32, 64, 100, 128, 256])
            .unwrap_or(&16);
        let oob = if dtype.is_float() && rng.chance(1, 3) {
            OobFill::NanRequestZeroFma
        } else {
            OobFill::Zero
        };
        let spec = Im2colSpec::new("im2col", dtype, global.clone(), channels, pixels)
            .corners(lower.clone(), upper.clone())
            .element_strides(estrides)
            .swizzle(swizzle)
            .oob_fill(oob);
        let Ok(valid) = validate_im2col(&spec) else {
            continue;
        };
        let Some(bound) = valid.bound() else { continue };
        if bound.plan().footprint_bytes > 100 * 1024 {
            continue;
        }
        let mut coords = vec![rng.below(global[0]) as i64];
        for i in 0..k {
            let (l, h) = bound.bounding_box(i);
            coords.push(l + rng.below((h - l) as u64) as i64);
        }
        let c = unit as i64 * (rng.range(0, (c_extent / unit).max(1) + 1) as i64);
        coords.push(if rng.chance(1, 8) { -(unit as i64) } else { c });
        let max = i64::from(im2col_offset_max(k));
        let offsets: Vec<i64> = (0..k)
            .map(|_| {
                if rng.chance(1, 10) {
                    rng.range(0, max as u64) as i64
                } else {
                    rng.range(0, 5) as i64
                }
            })
            .collect();
        if bound.check_call(&coords, &offsets).is_ok() {
            return (bound, coords, offsets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_valid_for_every_arch() {
        for arch in [Arch::Sm90a, Arch::Sm100a] {
            let mut a = XorShift::new(7);
            let mut b = XorShift::new(7);
            let mut interleaved = [0usize; 2];
            for _ in 0..400 {
                let (x, cx) = random_valid_spec(&mut a, arch);
                let (y, cy) = random_valid_spec(&mut b, arch);
                assert_eq!((x.spec(), &cx), (y.spec(), &cy));
                assert!(x.extent_bytes() <= MAX_TENSOR_BYTES);
                if arch == Arch::Sm90a {
                    assert!(!x.spec().swizzle.is_blackwell_only());
                }
                match x.spec().interleave {
                    Interleave::B16 => interleaved[0] += 1,
                    Interleave::B32 => interleaved[1] += 1,
                    Interleave::None => {}
                }
            }
            // About one spec in eight is interleaved, both chunk sizes.
            assert!(
                interleaved[0] >= 15 && interleaved[1] >= 5,
                "{interleaved:?}"
            );
        }
    }
}
