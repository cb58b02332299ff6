// A rejected struct still gets every generated item: uses of it add no errors of their own.
#[derive(tma::TmaTiles)]
struct Attn {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [512, 64], load)]
    q: [u64; 2],
}

fn main() {
    let attn = Attn { q: [1024, 64] };
    let _ = (Attn::TILES, Attn::SMEM_BYTES, Attn::SMEM_ALIGN);
    let _ = (Attn::CUDA_PARAMS, Attn::CUDA_HELPERS);
    let _ = (Attn::cuda_params(), Attn::cuda_helpers(), Attn::smem_layout());
    let _ = (Attn::tile_specs(), Attn::valid_specs());
    let _ = (attn.bound_specs(), attn.encode_args(), attn.tensor_maps(&[]));
}
