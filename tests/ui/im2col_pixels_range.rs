// One load takes 1 to 1024 pixels (CUDA 13.0). At `pixels_per_column`'s value.
tma::tma_im2col! {
    pub Act: u8,
    global = [N = 8, H = 56, W = 56, C = 16],
    channels_per_pixel = 16,
    pixels_per_column = 1025,
}

fn main() {}
