// Validation warnings surface as `deprecated` warnings at the token (here made an error).
#![deny(deprecated)]

tma::tma_1d! {
    pub Small: u8,
    global = [N = 16],
    boxed = [32],
}

fn main() {}
