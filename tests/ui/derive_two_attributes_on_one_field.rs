#[derive(tma::TmaTiles)]
struct Attn {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64], load)]
    #[tma(dtype = f32, global = [S = _, D = 64], boxed = [128, 16])]
    q: [u64; 2],
}

fn main() {}
