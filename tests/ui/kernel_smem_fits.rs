// Staging beside a ring that does not fit a block: at the region that ends past it.
tma::tma_kernel! {
    pub Gemm,
    roles = tma_warp_roles! { pub GemmRoles, producer_regs = 40, consumer_warpgroups = 2, consumer_regs = 232 },
    pipelines = [tma_pipeline! {
        pub GemmRing,
        stages = 6,
        consumers = warpgroups(2),
        tiles = {
            a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
            b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [128, 64], swizzle = 128 },
        },
    }],
    staging = [d: tma_2d! { pub GemmD: bf16, global = [M = _, N = _], boxed = [128, 64], swizzle = 128 } x 3],
    scratch = [flags = 256],
}

fn main() {}
