// Named barriers: ids 1 to 15, distinct names, threads a multiple of 32 within the block.
tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 40,
    consumer_warpgroups = 2,
    consumer_regs = 232,
    barriers = [
        b1 = 128, b2 = 100, b3 = 128, b1 = 128, b5 = 1024, b6 = 128, b7 = 128, b8 = 128,
        b9 = 128, b10 = 128, b11 = 128, b12 = 128, b13 = 128, b14 = 128, b15 = 128, b16 = 128,
    ],
}

fn main() {}
