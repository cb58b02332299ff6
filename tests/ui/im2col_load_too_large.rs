// One load's [pixels][channels] box must fit shared memory and an mbarrier's count. At the pixels.
tma::tma_im2col! {
    pub Huge: f64,
    global = [N = 8, H = 64, W = 64, C = 256],
    channels_per_pixel = 32,
    pixels_per_column = 1024,
}

fn main() {}
