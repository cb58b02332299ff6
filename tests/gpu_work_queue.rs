//! Work queues end to end (`tma::pipeline::WorkQueue`, a kernel plan's `work_queue` region):
//! in each block one producer thread claims items from a global counter (`claim`: atomicAdd)
//! and pushes them through the queue until one is past the total; every reader pops every item
//! in order, stalling now and then so that the ring (2 and 3 slots) fills and wraps. Checked:
//! each block's readers popped exactly what its producer pushed, in order, and the blocks'
//! items together are every item once. Two plans in one source: readers counted in warps
//! (one arrival a warp) and in threads (one a thread); release and debug builds.
//!
//! Then a queue whose readers stop early in a debug build: the producer's push waits for a slot
//! nobody frees, and the bounded wait ends in `Error::QueueTimeout` naming the queue, its
//! kernel, the slot and the side. (A trap ends the CUDA context: the GPU runner gives every
//! test its own process.)
//!
//! Without a GPU the kernels still compile (NVRTC, sm_90a, with and without debug checks) and
//! the source's facts name both queues.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gpu/support.rs"]
mod support;

use support::{compile_or_skip, debug_waits, Device};
use tma::pipeline::{Consumers, WorkQueue};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Error, Source};
use tma::Arch;

const BODY: &str = include_str!("gpu/work_queue.cu");
/// Blocks, and items all blocks claim together (about 300 a block).
const GRID: u32 = 24;
const TOTAL: i32 = 7211;
/// Each log's room: more than one block can claim.
const CAP: usize = TOTAL as usize + 2;
const POISON: i32 = -7;

/// Kernel `kernel`'s plan: a producer warp, then `readers`, popping queue `queue` of `slots`.
fn plan(kernel: &str, queue: &str, slots: u32, readers: Consumers) -> ValidKernelPlan {
    let q = WorkQueue::new(slots, readers).validate().unwrap();
    let threads = u32::try_from(32 + readers.threads().get().unwrap()).unwrap();
    KernelPlan::new(kernel)
        .work_queue(queue, &q)
        .block_threads(threads)
        .validate()
        .unwrap()
}

/// Block 288: a producer warp and 8 reader warps (one arrival a warp), 2 slots.
fn plan_warps() -> ValidKernelPlan {
    plan("queue_walk", "tiles", 2, Consumers::Warps(8))
}

/// Block 160: a producer warp and 128 reader threads (one arrival a thread), 3 slots.
fn plan_threads() -> ValidKernelPlan {
    plan("queue_walk_threads", "items", 3, Consumers::Threads(128))
}

fn source() -> Source {
    let ks = KernelSource::new()
        .plan(&plan_warps())
        .plan(&plan_threads())
        .body_at("tests/gpu/work_queue.cu", 1, BODY);
    Source::kernel(&ks).unwrap()
}

#[test]
fn work_queue_kernels_compile_and_their_queues_are_named() {
    let test = "work_queue_kernels_compile_and_their_queues_are_named";
    let source = source();
    let text = source.text();
    assert!(text.contains("typedef tma_work_queue<2u, 8u, true, 0u> queue_tiles;"));
    assert!(text.contains("typedef tma_work_queue<3u, 128u, false, 1u> queue_items;"));
    for debug in [false, true] {
        let Some(compiled) = compile_or_skip(
            test,
            &source,
            &CompileOptions::new(Arch::Sm90a).debug_waits(debug),
        ) else {
            return;
        };
        let named: Vec<(u32, &str, &str)> = [0, 1]
            .iter()
            .filter_map(|&id| compiled.queue(id))
            .map(|q| (q.id, q.kernel.as_str(), q.name.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                (0, "queue_walk", "tiles"),
                (1, "queue_walk_threads", "items")
            ]
        );
        assert!(compiled.queue(2).is_none());
    }
}

/// Runs `kernel` (its plan's launch, GRID blocks); returns each log and its length.
fn walk(
    dev: &Device,
    options: &CompileOptions,
    kernel: &str,
    logs_per_block: usize,
    seed: u32,
    readers_stop: i32,
) -> Result<(Vec<i32>, Vec<i32>), Error> {
    let module = dev.load(&source(), options);
    let k = module.kernel(kernel).unwrap();
    let logs = GRID as usize * logs_per_block;
    let mut counter = dev.stream.clone_htod(&[0i32]).unwrap();
    let mut log = dev.stream.clone_htod(&vec![POISON; logs * CAP]).unwrap();
    let mut lengths = dev.stream.clone_htod(&vec![POISON; logs]).unwrap();
    let cfg = k.plan_config(&dev.stream, (GRID, 1, 1)).unwrap();
    let (total, cap) = (TOTAL, CAP as i32);
    // SAFETY: queue_walk(int*, int, int*, int, int*, unsigned, int): a counter, the total, the
    // logs (GRID x logs_per_block x CAP ints), CAP, the lengths (one a log); the plan's launch.
    unsafe {
        k.launch_builder(&cfg)
            .arg(&mut counter)
            .arg(&total)
            .arg(&mut log)
            .arg(&cap)
            .arg(&mut lengths)
            .arg(&seed)
            .arg(&readers_stop)
            .launch()
    }?;
    module.synchronize(&dev.stream)?;
    Ok((
        dev.stream.clone_dtoh(&log).unwrap(),
        dev.stream.clone_dtoh(&lengths).unwrap(),
    ))
}

/// Each block's readers popped what its producer pushed, in order; all blocks' items below
/// TOTAL are each item once. `readers`: the logs of a block after the producer's.
fn check(logs: &[i32], lengths: &[i32], per_block: usize, readers: std::ops::Range<usize>) {
    let mut all = Vec::new();
    for b in 0..GRID as usize {
        let at = |w: usize| b * per_block + w;
        let n = usize::try_from(lengths[at(0)]).expect("the producer's length");
        let pushed = &logs[at(0) * CAP..at(0) * CAP + n];
        assert!(
            n >= 1 && pushed[n - 1] >= TOTAL,
            "block {b}: ends past the total"
        );
        assert!(
            pushed.windows(2).all(|w| w[0] < w[1]),
            "block {b}: claims increase"
        );
        for r in readers.clone() {
            assert_eq!(lengths[at(r)], lengths[at(0)], "block {b} reader {r}: pops");
            assert_eq!(
                &logs[at(r) * CAP..at(r) * CAP + n],
                pushed,
                "block {b} reader {r}: popped what was pushed"
            );
        }
        all.extend_from_slice(&pushed[..n - 1]);
    }
    all.sort_unstable();
    assert_eq!(all, (0..TOTAL).collect::<Vec<_>>(), "every item once");
}

#[test]
fn gpu_work_queue_hands_every_item_to_every_reader_in_order() {
    let test = "gpu_work_queue_hands_every_item_to_every_reader_in_order";
    let Some(dev) = Device::open(test) else {
        return;
    };
    // Debug first: a queue that loses items ends in a named timeout there, not a hang.
    for options in [debug_waits(), CompileOptions::new(Arch::Sm90a)] {
        for seed in [1u32, 0x9e37_79b9] {
            let (logs, lengths) = walk(&dev, &options, "queue_walk", 9, seed, -1).unwrap();
            check(&logs, &lengths, 9, 1..9);
            let (logs, lengths) =
                walk(&dev, &options, "queue_walk_threads", 160, seed, -1).unwrap();
            check(&logs, &lengths, 160, 32..160);
        }
    }
    println!("{GRID} blocks, {TOTAL} items: every reader popped its producer's items in order, each item once");
}

#[test]
fn gpu_a_queue_whose_readers_stop_early_hangs_by_name() {
    let test = "gpu_a_queue_whose_readers_stop_early_hangs_by_name";
    let Some(dev) = Device::open(test) else {
        return;
    };
    match walk(&dev, &debug_waits(), "queue_walk", 9, 1, 5) {
        Err(e @ Error::QueueTimeout { .. }) => {
            let s = e.to_string();
            println!("{s}");
            assert!(
                s.contains("work queue `tiles` of kernel `queue_walk`: push()"),
                "{s}"
            );
        }
        other => panic!("expected a named queue timeout: {other:?}"),
    }
}
