// The corners and traversal strides have one entry per spatial dim. At the list.
tma::tma_im2col! {
    pub Act: bf16,
    global = [N = 8, H = 56, W = 56, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 64,
    lower_corner = [-1, -1, -1],
}

fn main() {}
