// A staging tile named by type that targets another arch than the plan: at the tile.
tma::tma_2d! {
    pub BlackwellD: bf16, global = [M = _, N = _], boxed = [64, 64], swizzle = 128, target = sm_100a,
}

tma::tma_kernel! {
    pub Epilogue,
    staging = [d: BlackwellD x 2],
    block_threads = 128,
}

fn main() {}
