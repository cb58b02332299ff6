// The same plan over a ring and a tile named by type: the macro cannot see their sizes, the
// const items can; at the region that ends past the block.
tma::tma_pipeline! {
    pub GemmRing,
    stages = 6,
    consumers = warpgroups(2),
    tiles = {
        a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
        b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [128, 64], swizzle = 128 },
    },
}

tma::tma_2d! { pub GemmD: bf16, global = [M = _, N = _], boxed = [128, 64], swizzle = 128 }

tma::tma_kernel! {
    pub Gemm,
    pipelines = [GemmRing],
    staging = [d: GemmD x 3],
    block_threads = 384,
}

fn main() {}
