// An im2col tensor is NWC, NHWC or NDHWC: rank 3, 4 or 5. At the `global` list.
tma::tma_im2col! {
    pub Flat: bf16,
    global = [W = 56, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 32,
}

fn main() {}
