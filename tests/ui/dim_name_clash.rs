// A dim name that would collide with a name the generated tile struct already has: the
// constant `BOX_BYTES` of a dim `BYTES` is the struct's box size.
tma::tma_2d! {
    pub Rows: f16,
    global = [BYTES = 1024, K = 64],
    boxed = [64, 64],
}

fn main() {}
