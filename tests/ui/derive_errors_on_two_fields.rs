// Each field is checked on its own: a typo in the first field's keys does not hide the
// second field's broken rule.
#[derive(tma::TmaTiles)]
struct Attn {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64], swizle = 128, load)]
    q: [u64; 2],
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [512, 64], swizzle = 128, load)]
    k: [u64; 2],
}

fn main() {
    let _ = Attn::SMEM_BYTES;
}
