// A rejected tile still defines its type: uses of it add no errors of their own.
use tma::Tile;

tma::tma_2d! {
    pub Rows: f16,
    global = [M = 1024, K = 64],
    boxed = [300, 64],
}

fn main() {
    let _bytes = Rows::TX_BYTES;
    let _args = Rows::encode_args(&[1024, 64]);
}
