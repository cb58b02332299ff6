// Consumer warpgroups start on a warpgroup: after 2 producer warps they would not.
tma::tma_warp_roles! {
    pub Roles,
    producer_warps = 2,
    consumer_warpgroups = 1,
}

fn main() {}
