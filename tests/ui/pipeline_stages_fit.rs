// A ring of stages that does not fit beside the kernel's other shared memory: at `stages`.
tma::tma_pipeline! {
    pub GemmRing,
    stages = 9,
    consumers = warpgroups(2),
    reserve_smem = 32768,
    tiles = {
        a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
        b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [256, 64], swizzle = 128 },
    },
}

fn main() {}
