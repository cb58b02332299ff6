//! A 2-D convolution forward written with tma (issue 22): NHWC activations, KRSC filters,
//! NPQK output, bf16 or f16 in and out, fp32 accumulation; any padding, stride (1 to 8) and
//! dilation, any filter size. It is an implicit GEMM (M = N*P*Q output pixels, N = K output
//! channels, K = R*S*C) run by examples/05-gemm's kernel (`GEMM_CONV`, `Plan::conv`: the same
//! warp roles, persistent grouped raster, B multicast over a 2-CTA cluster and TMA-store
//! epilogue) whose A operand comes from im2col TMA loads: an im2col tile of BM output pixels x
//! 64 channels (`Im2colSpec::wgmma(A, K)`, a pipeline member through
//! `PipelineSpec::im2col_tile`), one load per (filter tap, 64-channel chunk) with the tap as
//! its offsets; the map's bounding box (lower corner -pad, upper corner pad - (taps - 1) dil)
//! and traversal strides make TMA walk exactly the output pixels, fill the padding with
//! zeros, and wrap rows and images. B is the filter as a `[R*S][K][C]` view of KRSC.
//!
//! Channels: C is padded to a multiple of 8 (16 bytes, the unit TMA moves a pixel's channels
//! in): the input and filter get zero channels (the ResNet stem's C = 3 runs as 8); a chunk's
//! channels past the padded C are TMA's zero fill. K (output channels) must be a multiple of 8
//! (16-byte output rows); anything else is refused naming the field, the value and the rule.
//!
//! Without a GPU: renders and NVRTC-compiles every configuration for both types, and runs the
//! CPU proofs (each plan's im2col and filter tiles loaded by tma's models and read back through
//! its descriptors by the wgmma read model are the convolution's matrices). With one: every
//! configuration on small ragged problems (odd H and W, padding 0 / 1 / 3, stride 1 / 2,
//! dilation 1 / 2, 1x1, 3x3 and 7x7 filters, C of 3 to 128), output poisoned (NaN) first,
//! against an exact f64 reference (every output element of the small problems, samples of the
//! others). Timing on ResNet-50's layers: `cargo bench --bench conv` and benches/conv_torch.py.
//!
//! Run: `cargo run --release --example 07-conv` (`CONV_QUICK=1`: the first problem only).

#[allow(dead_code)]
#[path = "../05-gemm/check.rs"]
mod check;
#[allow(dead_code)]
#[path = "../05-gemm/compile.rs"]
mod compile;
#[allow(dead_code)]
mod conv;
#[allow(dead_code)]
#[path = "../05-gemm/cublas.rs"]
mod cublas;
#[allow(dead_code)]
#[path = "../05-gemm/gpu.rs"]
mod gpu;
#[allow(dead_code)]
#[path = "../05-gemm/kernel.rs"]
mod kernel;
#[allow(dead_code)]
#[path = "../05-gemm/rng.rs"]
mod rng;

use std::process::ExitCode;

use conv::{Conv, Launch, Loaded, Problem};
use kernel::{In, Out, Res};
use rng::Rng;
use tma::runtime::Compiler;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The small ragged problems every configuration runs: (label, convolution).
pub fn problems() -> Vec<(&'static str, Conv)> {
    let sq = Conv::square;
    vec![
        ("3x3 pad 1", sq(2, 9, 64, 64, 3, 1, 1, 1)),
        ("1x1", sq(3, 7, 128, 136, 1, 0, 1, 1)),
        ("3x3/2 pad 1, odd", sq(2, 15, 96, 128, 3, 1, 2, 1)),
        ("7x7/2 pad 3, C 3 (stem)", sq(2, 23, 3, 64, 7, 3, 2, 1)),
        ("3x3 dil 2 pad 2", sq(1, 13, 64, 72, 3, 2, 1, 2)),
        ("3x3 pad 0, C 24", sq(2, 11, 24, 64, 3, 0, 1, 1)),
        ("1x1/2", sq(2, 13, 64, 256, 1, 0, 2, 1)),
        (
            "5x3 mixed pad/stride/dil",
            Conv {
                n: 2,
                h: 17,
                w: 12,
                c: 40,
                k: 64,
                r: 5,
                s: 3,
                pad: [3, 0],
                stride: [1, 2],
                dil: [2, 1],
            },
        ),
        ("7x7 pad 3, C 128", sq(1, 9, 128, 64, 7, 3, 1, 1)),
    ]
}

fn run() -> Res<bool> {
    let mut rng = Rng::from_clock();
    let mut plans = Vec::new();
    for input in [In::BF16, In::F16] {
        for p in conv::plans(input) {
            let p = p?;
            println!(
                "{}: conv plan, block {} threads, {} B of dynamic shared memory",
                p.config,
                p.kernel.launch().block[0],
                p.kernel.launch().dynamic_smem_bytes
            );
            plans.push(p);
        }
    }
    // The CPU proofs: each plan's operands on every problem.
    for p in &plans {
        let mut n = 0;
        for (_, c) in problems() {
            n += conv::cpu_proof(p, &c, &mut rng)?;
        }
        println!(
            "{}: im2col A and filter B read through the descriptors = the convolution's, {n} elements",
            p.config
        );
    }
    // The refusals name the field, the value and the rule.
    for bad in [
        Conv::square(1, 8, 64, 60, 3, 1, 1, 1),
        Conv::square(1, 8, 64, 64, 3, 1, 9, 1),
        Conv::square(1, 300, 64, 64, 3, 200, 1, 1),
    ] {
        match bad.check() {
            Ok(()) => return Err(format!("{bad}: not refused").into()),
            Err(e) => println!("refused {bad}: {e}"),
        }
    }
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("NVRTC is not available ({e}): the CPU proofs ran, nothing to compile or run");
            return Ok(true);
        }
    };
    let built: Vec<_> = compile::compile_all(compiler, plans)
        .into_iter()
        .collect::<Result<_, _>>()?;
    for b in &built {
        // ptxas's report: a spilling configuration is an error (Built::registers).
        println!(
            "compiled {} ({:.2} s, {:?}): {}",
            b.plan.config,
            b.seconds,
            b.origin,
            b.registers("gemm", kernel::debug_build())?
        );
    }
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => gpu::Gpu::new()?,
        Err(e) => {
            println!("\nno GPU here ({e}): every configuration is rendered, compiled and proven on the CPU; on an sm_90 GPU this example also runs and checks them.");
            return Ok(true);
        }
    };
    println!("\nGPU: {} ({} SMs)", gpu.name, gpu.sms);
    let quick = std::env::var("CONV_QUICK").is_ok_and(|v| v == "1");
    // CONV_DUMP=DIR: each problem's input, filter and first configuration's output, bit for
    // bit, for examples/07-conv/cudnn_check.py (cuDNN on the same buffers).
    let dump = std::env::var_os("CONV_DUMP").map(std::path::PathBuf::from);
    let mut ok = true;
    let cases = problems();
    for (i, (label, cv)) in cases
        .iter()
        .take(if quick { 1 } else { cases.len() })
        .enumerate()
    {
        for input in [In::BF16, In::F16] {
            let out = Out::of(input);
            let p = Problem::new(&gpu, *cv, input, &mut rng)?;
            let mut dumped = false;
            for b in built.iter().filter(|b| b.plan.config.input == input) {
                let loaded = Loaded::new(&gpu, b)?;
                let mut d = conv::out_buf(&gpu, &p, out)?;
                d.poison(&gpu.stream)?;
                let launch = Launch::new(&gpu, &loaded, &p, &d)?;
                launch.run(8)?;
                gpu.stream.synchronize()?;
                let got = d.read(&gpu.stream, out)?;
                if let (Some(dir), false) = (&dump, dumped) {
                    conv::dump(dir, &format!("{i}_{}", input.name()), &p, &got, out)?;
                    dumped = true;
                }
                let c = conv::check(&p, out, &got, 1 << 18, 4096, &mut rng);
                ok &= c.ok();
                println!(
                    "{label:<26} {cv} {:<34} {} outputs vs f64: {} outside the bound (max err {:.2} of it) {}",
                    b.plan.config.name(),
                    c.samples,
                    c.bad,
                    c.max_err,
                    if c.ok() { "OK" } else { "FAIL" }
                );
            }
        }
    }
    println!(
        "{}",
        if ok {
            "OK: every configuration matches the exact convolution"
        } else {
            "FAILED"
        }
    );
    Ok(ok)
}

/// A plan only for a type it can serve; the configurations the conv cannot serve are refused
/// with the reason (kept here so `cargo test --example 07-conv` checks them without a GPU).
#[cfg(test)]
mod tests {
    use super::conv::{self, Conv};
    use super::kernel::{Config, Epi, In, Kind, Plan};
    use super::rng::Rng;

    #[test]
    fn conv_plans_render_and_refuse_what_they_cannot_serve() {
        for p in conv::plans(In::BF16) {
            let p = p.expect("every configuration of the example fits");
            assert!(p.im2col.is_some());
            let src = p.source().expect("renders");
            assert!(src.text().contains("#define GEMM_CONV 1"));
            assert!(src.text().contains("tile_a::offsets a_offsets"));
        }
        let base = conv::configs(In::BF16)[0];
        for c in [
            Config {
                kind: Kind::Simple,
                epi: Epi::Direct,
                ..base
            },
            Config {
                cm: 1,
                cn: 2,
                ..base
            },
        ] {
            let e = Plan::conv(c).err().expect("refused").to_string();
            assert!(
                e.contains("warp-specialized, its cluster along M only"),
                "{e}"
            );
        }
        assert!(!Plan::new(Config::L5)
            .expect("L5")
            .source()
            .expect("renders")
            .text()
            .contains("#define GEMM_CONV 1"));
    }

    /// Three consumer warpgroups: BM = 192 is 64 rows each, a 512-thread block whose roles
    /// split the registers 32 / 160 and give each consumer its own epilogue barrier; names
    /// parse back; a BM that is not 64 rows per consumer, and a count without a register
    /// split, are refused naming the value.
    #[test]
    fn three_consumer_warpgroups() {
        let ws3: Vec<Config> = conv::configs(In::BF16)
            .into_iter()
            .filter(|c| c.kind == Kind::WS3)
            .collect();
        assert!(ws3.iter().any(|c| (c.bm, c.bn) == (192, 128)), "{ws3:?}");
        for c in conv::configs(In::BF16) {
            assert_eq!(Config::parse(&c.name()), Some(c), "{c}");
        }
        for c in &ws3 {
            assert!(c.name().starts_with("ws3_192x"), "{c}");
            assert_eq!(c.consumers(), 3);
            let p = Plan::conv(*c).expect("fits");
            assert_eq!(p.kernel.launch().block, [512, 1, 1]);
            let src = p.source().expect("renders");
            let text = src.text();
            assert!(text.contains("#define GEMM_NC 3"), "{c}");
            assert!(text.contains("PRODUCER_REGS = 32u") && text.contains("CONSUMER_REGS = 160u"));
            assert!(
                text.contains("static __device__ __forceinline__ void sync_epi(unsigned consumer)")
            );
            assert!(
                text.contains("COPIES_d = 3u"),
                "{c}: one D staging copy per consumer"
            );
        }
        let c = ws3[0];
        let e = Plan::conv(Config { bm: 128, ..c })
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains("bm = 128") && e.contains("multiple of 192"),
            "{e}"
        );
        let e = Plan::conv(Config {
            kind: Kind::Ws { consumers: 4 },
            bm: 256,
            bn: 64,
            ..c
        })
        .err()
        .expect("refused")
        .to_string();
        assert!(e.contains("4 consumer warpgroups"), "{e}");
        // No consumers: refused by name, not a division by zero.
        let e = Plan::conv(Config {
            kind: Kind::Ws { consumers: 0 },
            ..c
        })
        .err()
        .expect("refused")
        .to_string();
        assert!(
            e.contains("0 consumer warpgroups have no register split"),
            "{e}"
        );
        assert_eq!(Config::parse("ws2_128x128_s6_c1x1_p_tma2_bf16_bf16"), None);
        assert_eq!(Config::parse("ws0_128x128_s6_c1x1_p_tma2_bf16_bf16"), None);
        assert_eq!(Config::parse("ws4_256x128_s6_c1x1_p_tma2_bf16_bf16"), None);
    }

    /// Ping-pong: each of two consumer warpgroups owns whole BM-row tiles, so the ring is taken
    /// in turn (one warpgroup's 4 warps release a stage: `Consumers::Warpgroups(1)`,
    /// `in_turn`), the roles are a producer and two consumers at 40 / 232 with an `epi` and a
    /// `turn` barrier per consumer (ids 1-2 and 3-4, the turn over both consumers' 256
    /// threads), two D staging copies; BM is the consumer's rows (64 or 128: 64-row blocks);
    /// names parse back; a non-persistent, `_r1`, grouped or weight-gradient ping-pong, and
    /// a BM that is not whole 64-row blocks, are refused.
    #[test]
    fn ping_pong_plans() {
        use tma::pipeline::Consumers;
        let pp: Vec<Config> = conv::configs(In::BF16)
            .into_iter()
            .chain(Config::candidates(In::BF16, super::kernel::Out::BF16))
            .filter(|c| c.kind == Kind::PingPong)
            .collect();
        assert!(pp.iter().any(|c| (c.bm, c.bn) == (128, 64)), "{pp:?}");
        assert!(pp.iter().any(|c| (c.bm, c.bn) == (64, 256)), "{pp:?}");
        for c in &pp {
            assert!(c.name().starts_with("pp_"), "{c}");
            assert_eq!(Config::parse(&c.name()), Some(*c), "{c}");
            assert_eq!((c.consumers(), c.consumer_rows()), (2, c.bm), "{c}");
            for p in [
                Plan::conv(*c).expect("conv fits"),
                Plan::new(*c).expect("fits"),
            ] {
                let spec = p.pipeline.spec();
                assert!(spec.in_turn, "{c}");
                assert_eq!(spec.consumers, Consumers::Warpgroups(1), "{c}");
                assert_eq!(p.pipeline.empty_arrivals(), 4 * p.pipeline.peers(), "{c}");
                assert_eq!(p.kernel.launch().block, [384, 1, 1], "{c}");
                let src = p.source().expect("renders");
                let text = src.text();
                assert!(text.contains("#define GEMM_PINGPONG 1"), "{c}");
                assert!(
                    text.contains("static constexpr bool IN_TURN = true;"),
                    "{c}"
                );
                assert!(
                    text.contains("PRODUCER_REGS = 40u") && text.contains("CONSUMER_REGS = 232u")
                );
                assert!(
                    text.contains("static constexpr unsigned BARRIER_epi = 1u;"),
                    "{c}"
                );
                assert!(
                    text.contains("static constexpr unsigned BARRIER_turn = 3u;"),
                    "{c}"
                );
                assert!(text.contains("BARRIER_turn_THREADS = 256u;"), "{c}");
                assert!(
                    text.contains("COPIES_d = 2u"),
                    "{c}: one D staging copy per consumer"
                );
            }
        }
        // The cooperative kernels: every consumer takes every stage, no turns.
        let ws = Plan::conv(conv::configs(In::BF16)[0]).expect("ws");
        assert!(!ws.pipeline.spec().in_turn);
        let text = ws.source().expect("renders").text().to_string();
        assert!(
            text.contains("#define GEMM_PINGPONG 0")
                && !text.contains("static constexpr unsigned BARRIER_turn")
        );
        let c = pp[0];
        for bad in [
            Config {
                persistent: false,
                ..c
            },
            Config {
                wg_release: true,
                ..c
            },
        ] {
            let e = Plan::conv(bad).err().expect("refused").to_string();
            assert!(e.contains("a ping-pong kernel is persistent"), "{e}");
        }
        let e = Plan::conv(Config { bm: 96, ..c })
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("bm = 96") && e.contains("multiple of 64"), "{e}");
        assert_eq!(Config::parse("pp2_128x64_s8_c1x1_p_tma1_bf16_bf16"), None);
    }

    /// The CPU proof holds for a plan on a strided problem, and every problem of the example
    /// passes the checks. (An upper corner one short, `Conv::map`, makes it fail.)
    #[test]
    fn the_cpu_proof_holds() {
        let plan = conv::plans(In::BF16).remove(0).expect("plan");
        let mut rng = Rng::new(3);
        let good = Conv::square(1, 9, 64, 64, 3, 1, 2, 1);
        assert!(conv::cpu_proof(&plan, &good, &mut rng).is_ok());
        for (_, c) in super::problems() {
            c.check().expect("the example's problems are valid");
        }
    }

    #[test]
    fn output_sizes_and_refusals() {
        let c = Conv::square(128, 224, 3, 64, 7, 3, 2, 1);
        assert_eq!(c.out(), [112, 112]);
        assert_eq!(c.c_pad(), 8);
        assert_eq!(c.chunks(), 1);
        let c = Conv::square(128, 56, 128, 128, 3, 1, 2, 1);
        assert_eq!(c.out(), [28, 28]);
        let e = Conv::square(1, 8, 64, 60, 3, 1, 1, 1).check().unwrap_err();
        assert!(e.contains("k = 60") && e.contains("StrideAlignment"), "{e}");
        let e = Conv::square(1, 8, 64, 64, 3, 1, 9, 1).check().unwrap_err();
        assert!(
            e.contains("stride[H] = 9") && e.contains("ElementStrideRange"),
            "{e}"
        );
    }
}
