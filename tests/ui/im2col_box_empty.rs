// The bounding box [lower, extent + upper) must hold a position. At the upper corner.
tma::tma_im2col! {
    pub Act: bf16,
    global = [N = 8, H = 56, W = 4, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 128,
    lower_corner = [0, 0],
    upper_corner = [0, -4],
}

fn main() {}
