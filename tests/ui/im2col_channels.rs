// The channels are the box of C: whole 16-byte units, within the swizzle's span. At the value.
tma::tma_im2col! {
    pub Odd: bf16,
    global = [N = 8, H = 56, W = 56, C = 64],
    channels_per_pixel = 12,
    pixels_per_column = 64,
}
tma::tma_im2col! {
    pub Wide: bf16,
    global = [N = 8, H = 56, W = 56, C = 256],
    channels_per_pixel = 128,
    pixels_per_column = 64,
    swizzle = 128,
}

fn main() {}
