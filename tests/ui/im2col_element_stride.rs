// Traversal strides are in [1, 8]. At the entry.
tma::tma_im2col! {
    pub Act: bf16,
    global = [N = 8, H = 56, W = 56, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 64,
    element_strides = [H = 1, W = 9],
}

fn main() {}
