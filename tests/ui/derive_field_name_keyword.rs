// A field name names its tile in the generated tile set struct (`tma_attn::class`): a C++
// keyword cannot.
#[derive(tma::TmaTiles)]
struct Attn {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
    class: [u64; 2],
}

fn main() {}
