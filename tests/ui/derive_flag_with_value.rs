#[derive(tma::TmaTiles)]
struct Attn {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64], store = true)]
    o: [u64; 2],
}

fn main() {}
