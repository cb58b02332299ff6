// NC/8HWC8 activations: with interleave the hardware copies one position along dim 1
// (the channel-slice dim C8) whatever the box says; a box of 2 there would silently load
// one slice. Use repeat = [1, 2, 1, 1] for two slices per call.
tma::tma_4d! {
    pub Activations: f16,
    global = [N = 8, C8 = 8, H = 56, W = 56],
    boxed = [1, 2, 8, 8],
    interleave = 16,
}

fn main() {}
