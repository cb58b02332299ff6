#[derive(tma::TmaTiles)]
struct Attn {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64], load)]
    q: [u64; 2],
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64])]
    k: [u64; 2],
}

fn main() {}
