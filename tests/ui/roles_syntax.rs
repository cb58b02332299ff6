// Unknown keys, missing entries and bad values, each at its token.
tma::tma_warp_roles! {
    pub Roles,
    producers = 1,
    consumer_regs = [232],
    barriers = [256],
}

fn main() {}
