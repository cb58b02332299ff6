// A rejected im2col tile still names a type implementing `Im2colTile`: its uses add no errors.
use tma::Im2colTile;

tma::tma_im2col! {
    pub Act: bf16,
    global = [N = 8, H = 56, W = 56, C = 64],
    channels_per_pixel = 64,
    pixels_per_column = 2048,
}

fn main() {
    let _ = Act::TX_BYTES + Act::SMEM_BYTES;
    let _ = Act::encode_args(&[8, 56, 56, 64]);
    let _: &str = Act::CUDA_SOURCE;
}
