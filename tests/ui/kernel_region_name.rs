// Two regions named `d`: at the second.
tma::tma_kernel! {
    pub Epilogue,
    staging = [d: tma_2d! { pub TileD: f32, global = [M = _, N = _], boxed = [64, 32] } x 2],
    scratch = [d = 64],
    block_threads = 128,
}

fn main() {}
