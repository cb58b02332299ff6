//! An im2col box as wgmma's A operand (`Im2colSpec::wgmma`) and as a pipeline member
//! (`PipelineSpec::im2col_tile`), on the CPU: the operand rules name the im2col fields, the
//! descriptors are a tiled `[pixels][channels]` operand's, and the proof an implicit GEMM rests
//! on: random convolutions (padding, stride, dilation, ragged channels) loaded by the im2col
//! model (one load per filter tap and 64-channel chunk, the tap as the offsets, the corners
//! from padding and dilation) and read back through the descriptors by the wgmma read model
//! give exactly the convolution's im2col matrix, zeros where the filter leaves the image.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma_core::model::im2col;
use tma_core::pipeline::{ClusterAxis, Consumers, PipelineSpec};
use tma_core::render::KernelSource;
use tma_core::wgmma::read::{read_operand, ReadShape};
use tma_core::wgmma::OperandPlan;
use tma_core::{validate, validate_im2col, DType, Im2colSpec, Rule, Swizzle, TileSpec};
use tma_core::{Major, Operand};
use tma_test_support::testgen::XorShift;

/// One random 2-D convolution: input [n][h][w][c], filter r x s, padding, stride, dilation.
#[derive(Clone, Copy, Debug)]
struct Conv {
    n: u64,
    h: u64,
    w: u64,
    c: u64,
    r: u64,
    s: u64,
    pad: [u64; 2],
    stride: [u64; 2],
    dil: [u64; 2],
}

impl Conv {
    fn out(&self) -> [u64; 2] {
        let o = |x: u64, k: u64, i: usize| {
            (x + 2 * self.pad[i] - (k - 1) * self.dil[i] - 1) / self.stride[i] + 1
        };
        [o(self.h, self.r, 0), o(self.w, self.s, 1)]
    }
    fn lower(&self) -> [i32; 2] {
        [-(self.pad[0] as i32), -(self.pad[1] as i32)]
    }
    /// CUTLASS's and Gluon's upper corner (docs/IM2COL.md): `pad - (taps - 1) * dilation`.
    fn upper(&self) -> [i32; 2] {
        [
            self.pad[0] as i32 - ((self.r - 1) * self.dil[0]) as i32,
            self.pad[1] as i32 - ((self.s - 1) * self.dil[1]) as i32,
        ]
    }
}

fn random_conv(rng: &mut XorShift) -> Conv {
    loop {
        let pick = |rng: &mut XorShift, v: &[u64]| v[rng.below(v.len() as u64) as usize];
        let k = pick(rng, &[1, 3, 5, 7]);
        let c = Conv {
            n: 1 + rng.below(3),
            h: 1 + rng.below(19),
            w: 1 + rng.below(19),
            c: pick(rng, &[8, 16, 24, 64, 72, 128]),
            r: k,
            s: pick(rng, &[1, k]),
            pad: [rng.below(4), rng.below(4)],
            stride: [1 + rng.below(2), 1 + rng.below(2)],
            dil: [1 + rng.below(2), 1 + rng.below(2)],
        };
        let fits = |x: u64, k: u64, i: usize| x + 2 * c.pad[i] > (k - 1) * c.dil[i];
        if fits(c.h, c.r, 0) && fits(c.w, c.s, 1) {
            return c;
        }
    }
}

/// The A tile of an implicit GEMM over `conv`: `pixels` output pixels x 64 channels, 128B
/// swizzle, K-major A.
fn a_tile(conv: &Conv, dtype: DType, pixels: u32) -> Im2colSpec {
    Im2colSpec::new("a", dtype, [conv.n, conv.h, conv.w, conv.c], 64, pixels)
        .corners(conv.lower(), conv.upper())
        .element_strides([conv.stride[0] as u32, conv.stride[1] as u32])
        .swizzle(Swizzle::B128)
        .wgmma(Operand::A, Major::K)
}

#[test]
fn an_im2col_box_is_a_tiled_operand_of_its_pixels_and_channels() {
    let conv = Conv {
        n: 2,
        h: 9,
        w: 9,
        c: 64,
        r: 3,
        s: 3,
        pad: [1, 1],
        stride: [1, 1],
        dil: [1, 1],
    };
    let v = validate_im2col(&a_tile(&conv, DType::BF16, 128)).unwrap();
    let plan = OperandPlan::new(v.smem_tile().unwrap()).expect("an operand");
    // The numbers of a tiled 128 x 64 bf16 K-major A tile with the 128B swizzle.
    let tiled = validate(
        &TileSpec::new("t", DType::BF16, [128, 64], [128, 64])
            .swizzle(Swizzle::B128)
            .wgmma(Operand::A, Major::K),
    )
    .unwrap();
    let want = OperandPlan::new(&tiled).unwrap();
    assert_eq!(
        (plan.mn, plan.k, plan.m_blocks, plan.k_slices),
        (128, 64, 2, 4)
    );
    assert_eq!(
        (plan.lbo, plan.sbo, plan.slice_step, plan.m_block_step),
        (want.lbo, want.sbo, want.slice_step, want.m_block_step)
    );
    assert_eq!(plan.base_word(), want.base_word());
    // The rendered struct holds the descriptor helpers.
    let code = tma_core::render::Im2colCode::new(&v, 0).unwrap();
    assert!(code
        .source()
        .contains("static constexpr char WGMMA_OPERAND = 'A';"));
    assert!(code
        .source()
        .contains("desc(const void* smem, unsigned k_slice, unsigned m_block = 0u)"));
    // Not an operand: no descriptors.
    let mut plain = a_tile(&conv, DType::BF16, 128);
    plain.wgmma = None;
    let v = validate_im2col(&plain).unwrap();
    assert!(OperandPlan::new(v.smem_tile().unwrap()).is_none());
    assert!(!tma_core::render::Im2colCode::new(&v, 0)
        .unwrap()
        .source()
        .contains("WGMMA_OPERAND"));
}

/// A load of more than 256 pixels is a valid im2col tile (the H100 takes up to 1024) but no
/// tiled box: not a stage member or operand, and asking for one names the rule.
#[test]
fn a_box_of_more_than_256_pixels_loads_but_is_no_stage_member() {
    let conv = Conv {
        n: 2,
        h: 30,
        w: 30,
        c: 64,
        r: 3,
        s: 3,
        pad: [1, 1],
        stride: [1, 1],
        dil: [1, 1],
    };
    let mut spec = a_tile(&conv, DType::BF16, 512);
    spec.wgmma = None;
    let v = validate_im2col(&spec).expect("512 pixels load");
    assert_eq!(v.tx_bytes(), 512 * 64 * 2);
    let e = v.smem_tile().unwrap_err();
    assert!(
        e.errors
            .iter()
            .any(|f| f.rule == Rule::BoxDimRange && f.to_string().contains("pixels_per_column")),
        "{e}"
    );
    let e = PipelineSpec::new("conv", 2, Consumers::Warpgroups(1))
        .im2col_tile("a", &v)
        .unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::BoxDimRange, "{e}");
    // 256 pixels still are one.
    let mut spec = a_tile(&conv, DType::BF16, 256);
    spec.wgmma = None;
    assert!(validate_im2col(&spec).unwrap().stage_tile().is_ok());
}

#[test]
fn the_operand_rules_name_the_im2col_fields() {
    let conv = Conv {
        n: 1,
        h: 8,
        w: 8,
        c: 64,
        r: 1,
        s: 1,
        pad: [0, 0],
        stride: [1, 1],
        dil: [1, 1],
    };
    // 100 pixels are no whole 64-row blocks of A.
    let e = validate_im2col(&a_tile(&conv, DType::BF16, 100)).unwrap_err();
    let f = e
        .errors
        .iter()
        .find(|f| f.rule == Rule::WgmmaMnExtent)
        .unwrap_or_else(|| panic!("{e}"));
    assert_eq!(f.field, tma_core::Field::PixelsPerColumn);
    assert!(f.message.contains("pixels_per_column"), "{}", f.message);
    // u8 is no wgmma type; reported beside the rules the tensor view states, once each.
    let e = validate_im2col(&Im2colSpec {
        dtype: DType::U8,
        channels_per_pixel: 128,
        ..a_tile(&conv, DType::BF16, 128)
    })
    .unwrap_err();
    assert_eq!(
        e.errors
            .iter()
            .filter(|f| f.rule == Rule::WgmmaDType)
            .count(),
        1,
        "{e}"
    );
    // Without swizzle a K-major operand's inner box is 16 bytes: 64 bf16 channels are not.
    let e = validate_im2col(&a_tile(&conv, DType::BF16, 128).swizzle(Swizzle::None)).unwrap_err();
    let f = e
        .errors
        .iter()
        .find(|f| f.rule == Rule::WgmmaInnerBox)
        .unwrap_or_else(|| panic!("{e}"));
    assert_eq!(f.field, tma_core::Field::ChannelsPerPixel);
}

/// The implicit GEMM's A, k-block by k-block: for output-pixel tile `m0` and each (tap, chunk),
/// the model's load read through every descriptor is the im2col matrix.
#[test]
fn im2col_loads_read_through_the_descriptors_are_the_convolutions_matrix() {
    let mut rng = XorShift::new(0x0001_c02d);
    let mut checked = 0u64;
    for round in 0..60 {
        let conv = random_conv(&mut rng);
        let dtype = if round % 2 == 0 {
            DType::BF16
        } else {
            DType::F16
        };
        let pixels = if round % 3 == 0 { 64 } else { 128 };
        let valid = validate_im2col(&a_tile(&conv, dtype, pixels))
            .unwrap_or_else(|e| panic!("{conv:?}: {e}"));
        let bound = valid.bind(&[conv.n, conv.h, conv.w, conv.c], None).unwrap();
        let plan = OperandPlan::new(valid.smem_tile().unwrap()).unwrap();
        let [p_out, q_out] = conv.out();
        let m_total = conv.n * p_out * q_out;
        let e = 2u64;
        let x: Vec<u8> = (0..conv.n * conv.h * conv.w * conv.c * e)
            .map(|_| rng.next_u64() as u8)
            .collect();
        let shape = ReadShape {
            operand: Operand::A,
            major: Major::K,
            kind: plan.kind,
            n: 0,
        };
        let base = 1024 * 11;
        let chunks = conv.c.div_ceil(64);
        // A few tiles of output pixels (the last one ragged), every tap and chunk.
        let tiles = m_total.div_ceil(u64::from(pixels));
        for t in [0, tiles / 2, tiles - 1] {
            let m0 = t * u64::from(pixels);
            let (n0, p0, q0) = (m0 / (p_out * q_out), m0 / q_out % p_out, m0 % q_out);
            let coords = |cb: u64| {
                vec![
                    n0 as i64,
                    conv.lower()[0] as i64 + (p0 * conv.stride[0]) as i64,
                    conv.lower()[1] as i64 + (q0 * conv.stride[1]) as i64,
                    (cb * 64) as i64,
                ]
            };
            for r in 0..conv.r {
                for s in 0..conv.s {
                    let offsets = [(r * conv.dil[0]) as i64, (s * conv.dil[1]) as i64];
                    for cb in 0..chunks {
                        let smem = im2col::load(&bound, &x, &coords(cb), &offsets)
                            .unwrap_or_else(|e| panic!("{conv:?} m0 {m0}: {e}"));
                        for block in 0..plan.m_blocks {
                            for slice in 0..plan.k_slices {
                                let desc = plan
                                    .descriptor(valid.smem_tile().unwrap(), base, slice, block)
                                    .unwrap()
                                    .encode()
                                    .unwrap();
                                let got = read_operand(desc, &shape, &smem, base).unwrap();
                                for row in 0..64 {
                                    let m = m0 + block * 64 + row;
                                    let (n, p, q) =
                                        (m / (p_out * q_out), m / q_out % p_out, m % q_out);
                                    let h = (p * conv.stride[0] + r * conv.dil[0]) as i64
                                        - conv.pad[0] as i64;
                                    let w = (q * conv.stride[1] + s * conv.dil[1]) as i64
                                        - conv.pad[1] as i64;
                                    for k in 0..shape.k() {
                                        let c = cb * 64 + slice * shape.k() + k;
                                        let inside = n < conv.n
                                            && (0..conv.h as i64).contains(&h)
                                            && (0..conv.w as i64).contains(&w)
                                            && c < conv.c;
                                        let want = if inside {
                                            let at = (((n * conv.h + h as u64) * conv.w
                                                + w as u64)
                                                * conv.c
                                                + c)
                                                * e;
                                            x[at as usize..(at + e) as usize].to_vec()
                                        } else {
                                            vec![0; e as usize]
                                        };
                                        assert_eq!(
                                            got[(row * shape.k() + k) as usize],
                                            want,
                                            "{conv:?} m {m} (n {n} p {p} q {q}) tap ({r}, {s}) channel {c}"
                                        );
                                        checked += 1;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 1_000_000, "{checked}");
}

#[test]
fn a_pipeline_stage_holds_an_im2col_member() {
    let conv = Conv {
        n: 4,
        h: 56,
        w: 56,
        c: 64,
        r: 3,
        s: 3,
        pad: [1, 1],
        stride: [1, 1],
        dil: [1, 1],
    };
    let a = validate_im2col(&a_tile(&conv, DType::BF16, 128)).unwrap();
    let b = validate(
        &TileSpec::new("b", DType::BF16, [9, 64, 64], [1, 128, 64])
            .dim_names(["rs", "n", "k"])
            .swizzle(Swizzle::B128)
            .wgmma(Operand::B, Major::K),
    )
    .unwrap();
    let p = PipelineSpec::new("ring", 4, Consumers::Warpgroups(2))
        .im2col_tile("a", &a)
        .unwrap()
        .tile("b", &b)
        .validate()
        .unwrap();
    assert_eq!(p.stage_tx_bytes(), a.tx_bytes() + b.tx_bytes());
    assert_eq!(p.stage_tx_bytes(), (128 + 128) * 128);
    assert!(p.layout().stage.offsets.iter().all(|o| o % 1024 == 0));
    assert_eq!(p.spec().tiles[0].tile.im2col(), Some(&a));
    let src = KernelSource::new().pipeline(&p).build().unwrap();
    // The tile's struct is the im2col one, and load() takes its coords and offsets, named.
    assert!(src.contains("struct tma_a {"));
    assert!(src.contains("tile_a::coords a, tile_a::offsets a_offsets, const CUtensorMap* b_map"));
    assert!(src.contains("tile_a::load(a_map, bar, smem_a(s), a, a_offsets);"));
    assert!(src.contains(".im2col.mbarrier::complete_tx::bytes"));
    assert_eq!(src.matches("struct tma_a {").count(), 1);
    // The facts name the tensor's dims.
    let facts = KernelSource::new().pipeline(&p).facts();
    assert_eq!(facts.tiles[0].dim_name(3), Some("C"));
    // Multicast: one box, not split.
    let e = PipelineSpec::new("ring", 4, Consumers::Warpgroups(2))
        .multicast_tile("a", &a.stage_tile().unwrap(), ClusterAxis::X)
        .tile("b", &b)
        .cluster([2, 1, 1])
        .validate()
        .unwrap_err();
    assert!(
        e.errors
            .iter()
            .any(|f| f.rule == Rule::MulticastSlices && f.message.contains("im2col tile `a`")),
        "{e}"
    );
}
