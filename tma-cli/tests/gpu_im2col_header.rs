//! `tma header`'s im2col tiles from C++: a program built with nvcc against the header of three
//! `tma_im2col!` tiles (NHWC bf16 with the 128B swizzle and padding; NWC u8 with a traversal
//! stride of 2 and corners past both ends; NDHWC f32 with padded rows, a run-time N stride,
//! the 64B swizzle and the NaN fill) encodes each map with the generated `tma_encode_<tile>()`
//! (`cuTensorMapEncodeIm2col`) and loads through it with `tma_<tile>::load`.
//!
//! Without a GPU (CI): the program builds (nvcc, no warnings). On a GPU: fresh random tensors
//! and calls (`TMA_GPU_SEED` replays), shared memory poisoned before each load, and every
//! element of every load compared bit for bit with the CPU model (`model::im2col`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use tma_cli::diag::Source;
use tma_core::model::im2col::{elements, load};
use tma_core::BoundIm2col;
use tma_test_support::nvcc::nvcc_with_headers;
use tma_test_support::testgen::{gpu_seed, XorShift};

const TILES: &str = "
tma_im2col! { Act: bf16, global = [N = _, H = 12, W = 10, C = 64], channels_per_pixel = 64,
              pixels_per_column = 64, lower_corner = [-1, -1], upper_corner = [-1, -1], swizzle = 128 }
tma_im2col! { Seq: u8, global = [N = 3, W = _, C = 48], channels_per_pixel = 32,
              pixels_per_column = 40, lower_corner = [-2], upper_corner = [1], element_strides = [2] }
tma_im2col! { Vol: f32, global = [N = 2, D = 3, H = 5, W = 6, C = 16], strides = [_, 560, 112, 16, 1],
              channels_per_pixel = 16, pixels_per_column = 32, lower_corner = [0, -1, -1],
              upper_corner = [0, -1, -2], element_strides = [1, 2, 1], swizzle = 64, oob_fill = nan }
";

/// Each tile's run-time arguments to `tma_encode_<tile>` (user order) and its dims and
/// strides for the Rust bind.
struct Tile {
    name: &'static str,
    args: Vec<u64>,
    global: Vec<u64>,
    strides: Option<Vec<u64>>,
}

fn tiles() -> Vec<Tile> {
    vec![
        Tile {
            name: "act",
            args: vec![3],
            global: vec![3, 12, 10, 64],
            strides: None,
        },
        Tile {
            name: "seq",
            args: vec![50],
            global: vec![3, 50, 48],
            strides: None,
        },
        Tile {
            name: "vol",
            args: vec![3 * 560],
            global: vec![2, 3, 5, 6, 16],
            strides: Some(vec![3 * 560, 560, 112, 16, 1]),
        },
    ]
}

const CALLS_PER_TILE: usize = 64;

/// The tiles as `tma header` reads them, each bound to its run-time dims.
fn bound() -> Vec<BoundIm2col> {
    let read = tma_cli::decl::read(&Source {
        name: "conv.tma".into(),
        text: TILES.into(),
    })
    .unwrap_or_else(|d| panic!("{d:?}"));
    read.im2col
        .iter()
        .zip(tiles())
        .map(|(t, want)| {
            assert_eq!(t.checked.valid.spec().name, want.name);
            t.checked
                .valid
                .bind(&want.global, want.strides.as_deref())
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// A random load of `b`: N anywhere (past the end too: the next image is filled), the
/// spatial start inside its bounding box, C on 16 bytes (past the end too), small offsets.
fn call(rng: &mut XorShift, b: &BoundIm2col) -> (Vec<i64>, Vec<i64>) {
    let s = b.spec();
    let k = s.spatial_rank();
    let mut coords = vec![rng.below(b.global()[0] + 1) as i64];
    for i in 0..k {
        let (lo, hi) = b.bounding_box(i);
        coords.push(lo + rng.below((hi - lo) as u64) as i64);
    }
    let unit = b.valid().inner_coord_multiple();
    let c_steps = b.global()[s.rank() - 1] / unit + 1;
    coords.push((rng.below(c_steps) * unit) as i64);
    let offsets = (0..k).map(|_| rng.below(4) as i64).collect();
    (coords, offsets)
}

/// The program: per tile a kernel loading one call through the tile's helpers into poisoned
/// shared memory and copying it out; `main` encodes each map with `tma_encode_<tile>` over the
/// tensor read from `<tile>.bin` and writes every call's shared memory to `<tile>.out`.
fn program(bound: &[BoundIm2col], calls: &[Vec<(Vec<i64>, Vec<i64>)>]) -> String {
    let mut src = String::from(
        "#include \"conv.cuh\"\n#include <cstdio>\n#include <vector>\n\nstruct Call { int c[5]; int o[3]; };\n\n",
    );
    let mut main = String::from(
        "static std::vector<unsigned char> slurp(const char* path) {\n  std::vector<unsigned char> v;\n  FILE* f = std::fopen(path, \"rb\");\n  if (!f) return v;\n  int ch;\n  while ((ch = std::fgetc(f)) != EOF) v.push_back((unsigned char)ch);\n  std::fclose(f);\n  return v;\n}\n\nint main() {\n",
    );
    for ((b, t), tile_calls) in bound.iter().zip(tiles()).zip(calls) {
        let s = b.spec();
        let k = s.spatial_rank();
        let coords: Vec<String> = (0..s.rank())
            .map(|d| format!(".{} = call.c[{d}]", s.dim_label(d)))
            .collect();
        let offsets: Vec<String> = (0..k)
            .map(|i| format!(".{} = call.o[{i}]", s.dim_label(i + 1)))
            .collect();
        let _ = write!(
            src,
            r#"__global__ void load_{name}(const __grid_constant__ CUtensorMap map, const __grid_constant__ Call call, unsigned char* out) {{
  using T = tma_{name};
  extern __shared__ __align__(16) unsigned char raw[];
  unsigned char* smem = raw + ((1024u - (tma_smem_addr(raw) & 1023u)) & 1023u);
  __shared__ tma_mbarrier bar;
  for (unsigned i = threadIdx.x; i < T::SMEM_BYTES; i += blockDim.x) smem[i] = 0xA5;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (threadIdx.x == 0) {{ tma_mbarrier_init(&bar, 1); tma_fence_mbarrier_init(); }}
  __syncthreads();
  if (threadIdx.x == 0) {{
    T::arrive_expect_tx(&bar);
    T::load(&map, &bar, smem, T::coords{{{coords}}}, T::offsets{{{offsets}}});
  }}
  T::wait(&bar, 0);
  for (unsigned i = threadIdx.x; i < T::SMEM_BYTES; i += blockDim.x) out[i] = smem[i];
}}

"#,
            name = t.name,
            coords = coords.join(", "),
            offsets = offsets.join(", "),
        );
        let args: String = t.args.iter().map(|a| format!(", {a}ull")).collect();
        let calls_init: Vec<String> = tile_calls
            .iter()
            .map(|(c, o)| {
                let mut c5 = c.clone();
                c5.resize(5, 0);
                let mut o3 = o.clone();
                o3.resize(3, 0);
                let j = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
                format!("{{{{{}}}, {{{}}}}}", j(&c5), j(&o3))
            })
            .collect();
        let _ = write!(
            main,
            r#"  {{
    using T = tma_{name};
    std::vector<unsigned char> host = slurp("{name}.bin");
    if (host.empty()) {{ std::printf("no {name}.bin\n"); return 1; }}
    void* tensor = nullptr;
    unsigned char* out = nullptr;
    const Call calls[] = {{ {calls} }};
    const unsigned n = sizeof calls / sizeof calls[0];
    if (cudaMalloc(&tensor, host.size()) != cudaSuccess || cudaMalloc(&out, n * T::SMEM_BYTES) != cudaSuccess) return 2;
    cudaMemcpy(tensor, host.data(), host.size(), cudaMemcpyHostToDevice);
    cudaMemset(out, 0x5A, n * T::SMEM_BYTES);
    CUtensorMap map;
    tma_encode_error e;
    if (tma_encode_{name}(&map, tensor, host.size(){args}, &e) != CUDA_SUCCESS) {{
      std::printf("tma_encode_{name}: %s\n", e.message);
      return 3;
    }}
    for (unsigned i = 0; i < n; ++i) load_{name}<<<1, 128, T::SMEM_BYTES + 1024>>>(map, calls[i], out + i * T::SMEM_BYTES);
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {{ std::printf("{name}: %s\n", cudaGetErrorString(err)); return 4; }}
    std::vector<unsigned char> got(n * T::SMEM_BYTES);
    cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost);
    FILE* f = std::fopen("{name}.out", "wb");
    std::fwrite(got.data(), 1, got.size(), f);
    std::fclose(f);
    cudaFree(tensor);
    cudaFree(out);
  }}
"#,
            name = t.name,
            calls = calls_init.join(", "),
        );
    }
    main.push_str("  std::printf(\"ok\\n\");\n  return 0;\n}\n");
    src + &main
}

/// Every element of every load against the model: how many were compared, and a line for
/// each that differs. `outputs[t]` holds tile `t`'s loads, one shared-memory footprint each.
fn compare(
    bound: &[BoundIm2col],
    tensors: &[Vec<u8>],
    calls: &[Vec<(Vec<i64>, Vec<i64>)>],
    outputs: &[Vec<u8>],
) -> (u64, Vec<String>) {
    let mut mismatches = Vec::new();
    let mut checked = 0u64;
    for (t, b) in bound.iter().enumerate() {
        let (data, got_all) = (&tensors[t], &outputs[t]);
        let smem = b.plan().footprint_bytes as usize;
        let esize = b.spec().dtype.size_bytes().unwrap() as usize;
        for (i, (coords, offsets)) in calls[t].iter().enumerate() {
            let want = load(b, data, coords, offsets).unwrap_or_else(|e| panic!("{e}"));
            let got = &got_all[i * smem..(i + 1) * smem];
            for e in elements(b, coords, offsets).unwrap() {
                let at = e.smem as usize;
                checked += 1;
                if got[at..at + esize] != want[at..at + esize] {
                    mismatches.push(format!(
                        "{} call {i} coords {coords:?} offsets {offsets:?}: pixel {} channel {} (tensor {:?}): got {:02x?}, model {:02x?}",
                        b.spec().name,
                        e.pixel,
                        e.channel,
                        e.index,
                        &got[at..at + esize],
                        &want[at..at + esize]
                    ));
                }
            }
        }
    }
    (checked, mismatches)
}

/// The comparison finds one wrong byte (and passes the model's own bytes): the GPU test's
/// check, tested where no GPU is.
#[test]
fn the_comparison_finds_one_wrong_byte() {
    let mut rng = XorShift::new(7);
    let bound = bound();
    let calls: Vec<Vec<(Vec<i64>, Vec<i64>)>> = bound
        .iter()
        .map(|b| (0..4).map(|_| call(&mut rng, b)).collect())
        .collect();
    let tensors: Vec<Vec<u8>> = bound
        .iter()
        .map(|b| {
            (0..b.extent_bytes())
                .map(|_| rng.next_u64() as u8)
                .collect()
        })
        .collect();
    let mut outputs: Vec<Vec<u8>> = bound
        .iter()
        .zip(&tensors)
        .zip(&calls)
        .map(|((b, data), cs)| {
            cs.iter()
                .flat_map(|(c, o)| load(b, data, c, o).unwrap())
                .collect()
        })
        .collect();
    let (checked, none) = compare(&bound, &tensors, &calls, &outputs);
    assert!(checked > 0 && none.is_empty(), "{none:?}");
    // The last element of vol's third load.
    let b = &bound[2];
    let last = elements(b, &calls[2][2].0, &calls[2][2].1)
        .unwrap()
        .pop()
        .unwrap();
    outputs[2][2 * b.plan().footprint_bytes as usize + last.smem as usize] ^= 1;
    let (_, one) = compare(&bound, &tensors, &calls, &outputs);
    assert_eq!(one.len(), 1, "{one:?}");
    assert!(one[0].starts_with("vol call 2"), "{}", one[0]);
}

fn build(nvcc: &Path, dir: &Path, source: &str) -> PathBuf {
    let header = tma_cli::header_text(
        &Source {
            name: "conv.tma".into(),
            text: TILES.into(),
        },
        false,
    )
    .unwrap_or_else(|d| panic!("{d:?}"))
    .0;
    std::fs::write(dir.join("conv.cuh"), header).unwrap();
    std::fs::write(dir.join("conv.cu"), source).unwrap();
    let exe = dir.join("conv");
    let out = Command::new(nvcc)
        .current_dir(dir)
        .args(["-std=c++20", "-arch=sm_90a", "-o"])
        .arg(&exe)
        .arg("conv.cu")
        .output()
        .unwrap();
    let log =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nvcc failed (files in {}):\n{log}",
        dir.display()
    );
    assert!(!log.contains("warning"), "nvcc warned:\n{log}");
    exe
}

#[test]
fn gpu_im2col_maps_encoded_in_cpp_load_what_the_model_says() {
    let test = "gpu_im2col_maps_encoded_in_cpp_load_what_the_model_says";
    let Some(nvcc) = nvcc_with_headers(test) else {
        return;
    };
    let seed = gpu_seed();
    println!("seed {seed} (set TMA_GPU_SEED to replay)");
    let mut rng = XorShift::new(seed);
    let bound = bound();
    let calls: Vec<Vec<(Vec<i64>, Vec<i64>)>> = bound
        .iter()
        .map(|b| (0..CALLS_PER_TILE).map(|_| call(&mut rng, b)).collect())
        .collect();
    let dir = std::env::temp_dir().join(format!("tma-im2col-cpp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = build(&nvcc, &dir, &program(&bound, &calls));
    if tma_test_support::skip::require_gpu_or_skip(test).is_none() {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let tensors: Vec<Vec<u8>> = bound
        .iter()
        .map(|b| {
            (0..b.extent_bytes())
                .map(|_| rng.next_u64() as u8)
                .collect()
        })
        .collect();
    for (t, data) in tiles().iter().zip(&tensors) {
        std::fs::write(dir.join(format!("{}.bin", t.name)), data).unwrap();
    }
    let run = Command::new(&exe).current_dir(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(
        run.status.success() && text.contains("ok"),
        "{text}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let outputs: Vec<Vec<u8>> = tiles()
        .iter()
        .map(|t| std::fs::read(dir.join(format!("{}.out", t.name))).unwrap())
        .collect();
    let (checked, mismatches) = compare(&bound, &tensors, &calls, &outputs);
    println!(
        "{checked} elements of {} loads compared",
        3 * CALLS_PER_TILE
    );
    assert!(
        mismatches.is_empty(),
        "{} elements differ from the model (seed {seed}); first: {:#?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(8)]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
