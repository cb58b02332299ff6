// Brackets nested past tma_syntax::parse::MAX_NESTING (32) are refused at the first bracket
// too deep, before syn's recursive parser sees them (100,000 levels would overflow its stack).
tma::tma_1d! {
    pub Deep: u8,
    global = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
    boxed = [64],
}

fn main() {}
