#[derive(tma::TmaTiles)]
struct Gemm {
    #[tma(dtype = bf16, global = [M = _, K = 4096], boxed = [128, 64], swizzle = 128, wgmma = a_k_major, load)]
    a: [u64; 2],
    #[tma(dtype = tf32, global = [N = _, K = 4096], boxed = [128, 4], wgmma = b_k_major, load)]
    b: [u64; 2],
}

fn main() {
    let _ = Gemm::SMEM_BYTES;
}
