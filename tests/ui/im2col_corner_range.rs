// A rank-4 map keeps 8 bits of each corner: [-128, 127]. At the corner.
tma::tma_im2col! {
    pub Act: bf16,
    global = [N = 8, H = 56, W = 56, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 128,
    lower_corner = [-129, -1],
    upper_corner = [-1, 128],
}

fn main() {}
