//! `tma_im2col!` against the core API: an im2col tile declared with the macro has the spec,
//! validation, byte counts, encode arguments and CUDA of the same tile built by hand with
//! `Im2colSpec`, and its helpers compile (NVRTC, sm_90a) into the im2col load.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::render::{prelude, Im2colCode};
use tma::runtime::{CompileOptions, Compiler};
use tma::spec::{Extent, L2Promotion, OobFill, Rule};
use tma::{validate_im2col, Arch, DType, Im2colEncodeArgs, Im2colSpec, Im2colTile, Swizzle};
use tma_test_support::skip::require_nvrtc_or_skip;

tma::tma_im2col! {
    /// ResNet-50's 3x3 64 -> 64 layer at 56x56: NHWC bf16, padding 1, 64 channels (128 B,
    /// the 128B swizzle's span), 128 pixels a load.
    pub Act: bf16,
    global = [N = _, H = 56, W = 56, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 128,
    lower_corner = [H = -1, W = -1],
    upper_corner = [-1, -1],
    swizzle = 128,
}

tma::tma_im2col! {
    /// Every key written: NDHWC f16 with padded rows, stride 2 along H, a 32B swizzle.
    pub(crate) Vol: f16,
    global = [8, D = 4, H = 16, W = 16, C = 16],
    strides = [_, 4608, 288, 16, 1],
    channels_per_pixel = 16,
    pixels_per_column = 64,
    lower_corner = [0, -1, -1],
    upper_corner = [0, -1, -1],
    element_strides = [1, 2, 1],
    swizzle = 32,
    l2_promotion = 128,
    oob_fill = nan,
    target = sm_90a,
    name = "volume",
}

tma::tma_im2col! {
    /// NWC u8, defaults everywhere: corners 0, traversal strides 1, no swizzle.
    Seq: u8,
    global = [_, _, 32],
    channels_per_pixel = 32,
    pixels_per_column = 256,
}

tma::tma_im2col! {
    /// A box that ends two positions before W's end: empty when W = 2, known at run time.
    Narrow: u8,
    global = [N = _, W = _, C = 16],
    channels_per_pixel = 16,
    pixels_per_column = 8,
    upper_corner = [W = -2],
}

fn act_by_hand() -> Im2colSpec {
    Im2colSpec::new("act", DType::BF16, [1, 56, 56, 64], 64, 128)
        .global_extents([
            Extent::Runtime,
            Extent::Static(56),
            Extent::Static(56),
            Extent::Static(64),
        ])
        .corners([-1, -1], [-1, -1])
        .swizzle(Swizzle::B128)
}

#[test]
fn the_macro_gives_the_hand_built_spec_and_its_numbers() {
    let spec = act_by_hand();
    assert_eq!(Act::spec(), spec);
    let valid = validate_im2col(&spec).unwrap();
    assert_eq!(Act::valid(), &valid);
    assert_eq!(Act::NAME, "act");
    assert_eq!(Act::CUDA_NAME, "tma_act");
    assert_eq!(Act::RANK, 4);
    assert_eq!(Act::CHANNELS_PER_PIXEL, 64);
    assert_eq!(Act::PIXELS_PER_COLUMN, 128);
    assert_eq!(Act::TX_BYTES, valid.tx_bytes());
    assert_eq!(Act::TX_BYTES, 128 * 64 * 2);
    assert_eq!(Act::SMEM_BYTES, valid.plan().footprint_bytes);
    assert_eq!(Act::SMEM_ALIGN, valid.plan().align_bytes);
    assert_eq!(Act::SMEM_ALIGN, 1024);
    assert_eq!(Act::TARGET, Arch::Sm90a);
    // The CUDA helpers are the core renderer's, tile 0.
    let code = Im2colCode::new(&valid, 0).unwrap();
    assert_eq!(Act::CUDA_SOURCE, code.source());
    assert_eq!(Act::CUDA_NAME, code.cuda_name());
}

#[test]
fn encode_arguments_are_the_core_ones_in_tma_order() {
    let by_hand = Im2colEncodeArgs::new(
        &validate_im2col(&act_by_hand())
            .unwrap()
            .bind(&[8, 56, 56, 64], None)
            .unwrap(),
    );
    let args = Act::encode_args(&[8, 56, 56, 64]).unwrap();
    assert_eq!(args, by_hand);
    assert_eq!(args.global_dim, vec![64, 56, 56, 8]);
    assert_eq!(args.global_strides, vec![128, 56 * 128, 56 * 56 * 128]);
    assert_eq!(args.lower_corner, vec![-1, -1]);
    assert_eq!(args.element_strides, vec![1, 1, 1, 1]);
    assert_eq!(args.channels_per_pixel, 64);
    assert_eq!(args.pixels_per_column, 128);
}

#[test]
fn every_key_reaches_the_spec() {
    let s = Vol::spec();
    assert_eq!(s.name, "volume");
    assert_eq!(Vol::CUDA_NAME, "tma_volume");
    assert_eq!(s.dtype, DType::F16);
    // Unnamed dims take the im2col defaults: dim 0 is N.
    assert_eq!(
        s.dim_names,
        ["N", "D", "H", "W", "C"].map(|n| Some(n.to_string()))
    );
    assert_eq!(
        s.strides,
        Some(vec![
            Extent::Runtime,
            Extent::Static(4608),
            Extent::Static(288),
            Extent::Static(16),
            Extent::Static(1)
        ])
    );
    assert_eq!(s.lower_corner, vec![0, -1, -1]);
    assert_eq!(s.upper_corner, vec![0, -1, -1]);
    assert_eq!(s.element_strides, vec![1, 2, 1]);
    assert_eq!(s.swizzle, Swizzle::B32);
    assert_eq!(s.l2_promotion, L2Promotion::B128);
    assert_eq!(s.oob_fill, OobFill::NanRequestZeroFma);
    let args = Vol::bind_strided(&[8, 4, 16, 16, 16], &[4 * 4608, 4608, 288, 16, 1])
        .map(|b| Im2colEncodeArgs::new(&b))
        .unwrap();
    // TMA order: C, W, H, D, N; N and C traverse by 1.
    assert_eq!(args.element_strides, vec![1, 1, 2, 1, 1]);
    assert_eq!(args.global_strides, vec![32, 576, 9216, 36864]);

    let d = Seq::spec();
    assert_eq!(d.dim_names, ["N", "W", "C"].map(|n| Some(n.to_string())));
    assert_eq!((d.lower_corner, d.upper_corner), (vec![0], vec![0]));
    assert_eq!(d.element_strides, vec![1]);
    assert_eq!(d.swizzle, Swizzle::None);
    assert_eq!(Seq::TX_BYTES, 256 * 32);
}

#[test]
fn run_time_dims_get_the_run_time_rules() {
    // A static dim must agree.
    let e = Act::encode_args(&[8, 28, 56, 64]).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::RuntimeShapeMismatch);
    // Run-time dims get the global rules: N = 0 is refused.
    assert!(Seq::encode_args(&[1, 1, 32]).is_ok());
    let e = Act::encode_args(&[0, 56, 56, 64]).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::GlobalDimRange);
    // The bounding box is checked on the bound dims: [0, 2 - 2) holds no position.
    assert!(Narrow::encode_args(&[1, 3, 16]).is_ok());
    let e = Narrow::encode_args(&[1, 2, 16]).unwrap_err();
    assert_eq!(e.errors[0].rule, Rule::Im2colBoxEmpty);
}

#[test]
fn the_helpers_compile_into_the_im2col_load() {
    let test = "the_helpers_compile_into_the_im2col_load";
    let Some(_) = require_nvrtc_or_skip(test) else {
        return;
    };
    let body = r#"
extern "C" __global__ void im2col_macro(const __grid_constant__ CUtensorMap map, unsigned short* out) {
  using T = tma_act;
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) tma_mbarrier bar;
  if (threadIdx.x == 0) { tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    T::arrive_expect_tx(&bar);
    T::load(&map, &bar, smem, {.N = 0, .H = -1, .W = -1, .C = 0}, {.H = 1, .W = 2});
  }
  T::wait(&bar, 0);
  out[threadIdx.x] = *reinterpret_cast<const unsigned short*>(&T::at(static_cast<const void*>(smem), threadIdx.x, 0));
}
"#;
    let source = format!("{}\n{}\n{body}", prelude(), Act::CUDA_SOURCE);
    let compiled = Compiler::global()
        .unwrap()
        .compile(&source, &CompileOptions::new(Arch::Sm90a))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        compiled
            .ptx
            .contains("cp.async.bulk.tensor.4d.shared::cluster.global.im2col"),
        "no im2col load in the PTX"
    );
}
