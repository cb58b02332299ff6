// A rejected pipeline still defines its type and its tiles' types: uses add no errors.
use tma::{Pipeline, Tile};

tma::tma_pipeline! {
    pub Ring,
    stages = 0,
    consumers = warps(4),
    tiles = {
        a: tma_2d! { pub RingA: f32, global = [M = _, K = 64], boxed = [32, 32] },
    },
}

tma::tma_warp_roles! {
    pub Roles,
    producer_regs = 41,
    consumer_warpgroups = 2,
    consumer_regs = 232,
}

fn main() {
    let _bytes = Ring::STAGE_TX_BYTES + RingA::TX_BYTES;
    let _valid = Ring::valid();
    let _src = Ring::kernel_source();
    let _regs = <Roles as tma::Roles>::SETMAXNREG;
    let _consumers = <Roles as tma::Roles>::CONSUMERS.count();
}
