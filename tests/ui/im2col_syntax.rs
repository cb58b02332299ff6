// Syntax errors, all at once: a tiled key, a negative dim, a misnamed corner, a list for a
// number, a name for a number, and the missing channels.
tma::tma_im2col! {
    pub Act: bf16,
    global = [N = 8, H = -56, W = 56, C = 64],
    boxed = [128, 64],
    pixels_per_column = [128],
    lower_corner = [H = -1, X = -1],
    upper_corner = [-1, one],
}

fn main() {}
