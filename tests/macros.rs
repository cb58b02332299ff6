//! The macros against the core API: a tile declared with `tma_Nd!` or `#[derive(TmaTiles)]`
//! has the spec, validation, encode arguments and CUDA of the same tile built by hand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tma::spec::{Extent, Rule};
use tma::tile::{Role, Strided};
use tma::{validate, DType, EncodeArgs, Swizzle, TileSpec};
use tma::{Tile, TmaTiles};

tma::tma_3d! {
    /// The value tensor of multi-scale deformable attention (seed 000): `[H][W][C]` f16,
    /// a 2 x 2 x 32 box.
    pub DeformValue: f16,
    global = [H = 94, W = 162, C = 32],
    boxed = [2, 2, 32],
}

tma::tma_3d! {
    /// Seed 000 with every stride written out (elements, outer -> inner).
    pub DeformValueStrided: fp16,
    global = [H = 94, W = 162, C = 32],
    boxed = [2, 2, 32],
    strides = [5184, 32, 1], // elements: W * C, C, 1 (the seed's 10368 / 64 are bytes)
    element_strides = [1, 1, 1],
    swizzle = none,
    interleave = none,
    l2_promotion = 128,
    oob_fill = nan,
    repeat = [1, 1, 1],
    target = sm_90a,
}

tma::tma_2d! {
    /// Mirage MPK's example (seed 002): 4096 x 1024 bf16, 64 x 64 box, swizzle<3,3,3>,
    /// two boxes per call along the columns, 4096 elements apart.
    pub MpkA: bf16,
    global = [ROW = _, COL = 1024],
    boxed = [64, 64],
    mpk_b = 3,
    repeat = [1, 2],
    smem_stride = 4096,
}

fn hand_valid(spec: &TileSpec) -> tma::ValidSpec {
    validate(spec).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn deformable_attention_seed_matches_the_core_api() {
    let spec = TileSpec::new("deform_value", DType::F16, [94, 162, 32], [2, 2, 32])
        .dim_names(["H", "W", "C"]);
    assert_eq!(DeformValue::spec(), spec);
    let valid = hand_valid(&spec);
    assert_eq!(DeformValue::valid(), &valid);
    assert_eq!(DeformValue::TX_BYTES, valid.tx_bytes());
    assert_eq!(DeformValue::TX_BYTES, 2 * 2 * 32 * 2);
    assert_eq!(DeformValue::SMEM_BYTES, valid.plan().footprint_bytes);
    assert_eq!(DeformValue::SMEM_ALIGN, valid.plan().align_bytes);
    assert_eq!(DeformValue::BOX_BYTES, valid.plan().box_bytes);
    assert_eq!(DeformValue::RANK, 3);
    assert_eq!(DeformValue::NAME, "deform_value");
    assert_eq!(DeformValue::CUDA_NAME, "tma_deform_value");

    let by_hand = EncodeArgs::new(&valid.bind(&[94, 162, 32], None).unwrap());
    let args = DeformValue::encode_args(&[94, 162, 32]).unwrap();
    assert_eq!(args, by_hand);
    // The seed's lesson: TMA order is innermost first.
    assert_eq!(args.global_dim, vec![32, 162, 94]);
    assert_eq!(args.global_strides, vec![64, 10368]);
    assert_eq!(args.box_dim, vec![32, 2, 2]);
}

#[test]
fn explicit_strides_give_the_same_encoding() {
    let dense = DeformValue::encode_args(&[94, 162, 32]).unwrap();
    let strided = DeformValueStrided::encode_args(&[94, 162, 32]).unwrap();
    assert_eq!(strided.global_strides, dense.global_strides);
    assert_eq!(strided.global_dim, dense.global_dim);
    assert_eq!(
        strided.l2_promotion,
        tma::spec::L2Promotion::B128,
        "every option reaches the spec"
    );
    assert_eq!(strided.oob_fill, tma::spec::OobFill::NanRequestZeroFma);
}

#[test]
fn mpk_seed_matches_the_core_api() {
    let spec = TileSpec::new("mpk_a", DType::BF16, [4096, 1024], [64, 64])
        .dim_names(["ROW", "COL"])
        .global_extents([Extent::Runtime, Extent::Static(1024)])
        .swizzle(Swizzle::B128)
        .repeat([1, 2])
        .smem_stride(4096);
    assert_eq!(MpkA::spec(), spec);
    let valid = hand_valid(&spec);
    assert_eq!(MpkA::TX_BYTES, valid.tx_bytes());
    assert_eq!(MpkA::TX_BYTES, 16384);
    assert_eq!(MpkA::SMEM_ALIGN, 1024);
    let args = MpkA::encode_args(&[4096, 1024]).unwrap();
    assert_eq!(
        args,
        EncodeArgs::new(&valid.bind(&[4096, 1024], None).unwrap())
    );
    assert_eq!(args.global_dim, vec![1024, 4096]);
    assert_eq!(args.global_strides, vec![2048]);
}

#[test]
fn run_time_dims_are_checked_against_static_ones() {
    let err = MpkA::encode_args(&[4096, 512]).unwrap_err();
    assert_eq!(err.errors.len(), 1);
    assert_eq!(err.errors[0].rule, Rule::RuntimeShapeMismatch);
    // A run-time dim gets the run-time checks: the same rules as at compile time.
    let err = MpkA::encode_args(&[0, 1024]).unwrap_err();
    assert_eq!(err.errors[0].rule, Rule::GlobalDimRange);
}

#[test]
fn cuda_source_is_rendered_at_compile_time_by_the_core_renderer() {
    use tma::render::TileCode;
    for (valid, name, source) in [
        (
            DeformValue::valid(),
            DeformValue::CUDA_NAME,
            DeformValue::CUDA_SOURCE,
        ),
        (MpkA::valid(), MpkA::CUDA_NAME, MpkA::CUDA_SOURCE),
        (
            DeformValueStrided::valid(),
            DeformValueStrided::CUDA_NAME,
            DeformValueStrided::CUDA_SOURCE,
        ),
    ] {
        let code = TileCode::new(valid, 0).unwrap();
        assert_eq!(source, code.source());
        assert_eq!(name, code.cuda_name());
    }
    assert_eq!(DeformValue::CUDA_NAME, "tma_deform_value");
}

/// Attention tiles: q, k, v loaded, o stored. Fields hold each tensor's run-time dims.
#[derive(TmaTiles)]
struct Attention<'a> {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    q: [u64; 2],
    /// 36 rows: 4608 B, so `v` must skip to the next 1024 B boundary.
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [36, 64], swizzle = 128, load)]
    k: &'a [u64],
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    v: Vec<u64>,
    #[tma(dtype = f32, global = [S = _, D = 32], boxed = [64, 32], swizzle = 128, store)]
    o: Strided,
    /// Fields without `#[tma]` are not tiles.
    #[allow(dead_code)]
    scale: f32,
}

#[test]
fn four_field_struct_parameters_and_smem_layout() {
    assert_eq!(
        Attention::cuda_params(),
        "const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map, \
         const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap o_map"
    );
    let layout = Attention::smem_layout();
    let offsets: Vec<(&str, u64)> = Attention::TILES
        .iter()
        .map(|t| (t.field, t.smem_offset))
        .collect();
    assert_eq!(
        offsets,
        vec![("q", 0), ("k", 8192), ("v", 13312), ("o", 21504)]
    );
    assert_eq!(layout.offsets, [0, 8192, 13312, 21504]);
    assert_eq!(layout.total_bytes, 21504 + 8192);
    assert_eq!(layout.align_bytes, 1024);
    assert_eq!(
        (Attention::SMEM_BYTES, Attention::SMEM_ALIGN),
        (layout.total_bytes, layout.align_bytes)
    );
    // The layout the core computes from the same specs: one type, one placement.
    let core = tma::smem::SmemLayout::new(Attention::valid_specs().iter().map(|v| v.plan()));
    assert_eq!(core.as_ref(), Ok(&layout));
    let names: Vec<&str> = Attention::TILES.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        ["attention_q", "attention_k", "attention_v", "attention_o"]
    );
    let roles: Vec<Role> = Attention::TILES.iter().map(|t| t.role).collect();
    assert_eq!(roles, [Role::Load, Role::Load, Role::Load, Role::Store]);
    let o = Attention::TILES.iter().find(|t| t.field == "o");
    assert_eq!(o.map(|t| t.cuda_name), Some("tma_attention_o"));
    let mut helpers = Vec::new();
    for (id, (t, valid)) in Attention::TILES
        .iter()
        .zip(Attention::valid_specs())
        .enumerate()
    {
        assert_eq!(t.tx_bytes, valid.tx_bytes());
        assert_eq!(t.smem_offset % valid.plan().align_bytes, 0);
        let code = tma::render::TileCode::new(valid, id as u32).unwrap();
        assert_eq!(t.cuda_name, code.cuda_name());
        helpers.push(code.source().to_owned());
    }
    // Then the tile set: the same layout, rendered by the core from the same specs.
    let members: Vec<(&str, &tma::ValidSpec)> = Attention::TILES
        .iter()
        .map(|t| t.field)
        .zip(Attention::valid_specs())
        .collect();
    let set = tma::render::TileSetCode::new("attention", &members).unwrap();
    assert_eq!(set.layout(), &layout);
    helpers.push(set.source().to_owned());
    assert_eq!(Attention::cuda_helpers(), helpers.join("\n"));
    assert_eq!(Attention::CUDA_NAME, "tma_attention");
    assert_eq!(Attention::CUDA_PARAMS_MACRO, "TMA_ATTENTION_PARAMS");
}

#[test]
fn four_field_struct_encodes_in_field_order() {
    let k_dims = [512u64, 64];
    let attn = Attention {
        q: [512, 64],
        k: &k_dims,
        v: vec![512, 64],
        o: Strided {
            dims: vec![512, 32],
            strides: vec![64, 1],
        },
        scale: 0.125,
    };
    let args = attn.encode_args().unwrap();
    assert_eq!(args.len(), 4);
    for (a, spec) in args.iter().zip(Attention::tile_specs()) {
        let by_hand = hand_valid(&spec);
        let global = if spec.dtype == DType::F32 {
            vec![512, 32]
        } else {
            vec![512, 64]
        };
        let strides = (spec.dtype == DType::F32).then_some(&[64u64, 1][..]);
        assert_eq!(
            *a,
            EncodeArgs::new(&by_hand.bind(&global, strides).unwrap())
        );
    }
    assert_eq!(
        args[3].global_strides,
        vec![64 * 4],
        "o's explicit row stride"
    );
    let bad = Attention {
        q: [512, 32],
        ..attn
    };
    assert_eq!(
        bad.encode_args().unwrap_err().errors[0].rule,
        Rule::RuntimeShapeMismatch
    );
}
