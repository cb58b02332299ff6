// Every broken rule is reported, each at its token.
tma::tma_im2col! {
    pub Broken: u8,
    global = [N = 0, D = 4, H = 8, W = 8, C = 32],
    channels_per_pixel = 32,
    pixels_per_column = 0,
    lower_corner = [0, -17, 0],
    element_strides = [1, 1, 0],
    oob_fill = nan,
}

fn main() {}
