//! The `tma` command line, for C++ and Mirage MPK kernel authors: tile declarations in the
//! macros' own syntax (read by the macros' own parser, `tma_syntax`) become an explanation,
//! a C++ header (device helpers, host encode functions, optionally MPK's contract), a
//! compiled kernel's report, or kernels precompiled into the runtime's JIT cache (which `tma
//! cache` lists, sizes, clears and prunes). [`run`] is the whole program; `main` only calls it.
//!
//! Exit codes: 0 success; 1 the input was rejected (a declaration's errors, a file too long or
//! not UTF-8, `--dims` values a tile refuses, a kernel that does not compile); 2 a usage error
//! (an unknown `--dims` name included); 3 the environment failed (a file could not be read or
//! written, NVRTC is missing). Every refusal exits non-zero.

pub mod compile;
pub mod decl;
pub mod diag;
pub mod explain;
pub mod svg;
pub mod warm;

use clap::{Parser, Subcommand};
use diag::{Diagnostic, Source};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use tma_core::echo::shown;
use tma_core::pipeline::ValidPipeline;
use tma_core::render::{header_with_im2col, HeaderOptions};
use tma_core::Arch;
use tma_syntax::parse::MAX_TEXT_BYTES;

/// Success.
pub const EXIT_OK: i32 = 0;
/// The input was rejected: a declaration's errors, a kernel that does not compile.
pub const EXIT_REJECTED: i32 = 1;
/// The command line is wrong (clap's code).
pub const EXIT_USAGE: i32 = 2;
/// A file could not be read or written, or a tool (NVRTC) is missing.
pub const EXIT_ENVIRONMENT: i32 = 3;

const AFTER_HELP: &str = "\
Examples:
  tma explain 'tma_2d! { A: bf16, global = [ROW = 4096, COL = 1024], boxed = [64, 64], mpk_b = 3, repeat = [1, 2], smem_stride = 4096 }'
  tma explain tiles.tma --dims ROW=4096 --svg a.svg
  tma header tiles.tma -o tiles.cuh            # device helpers + tma_encode_<tile>() host functions
  tma header tiles.tma --mpk -o tiles.cuh      # ... and Mirage MPK's names and contract
  tma compile kernel.cu --tile tiles.tma --arch sm_90a --sass -
  tma precompile kernel.cu --tile tiles.tma     # into the JIT cache the runtime reads
  tma cache list                               # what the JIT cache holds; also size, clear, prune

A .tma file holds tma_1d! .. tma_5d! and tma_im2col! declarations, or one tma_pipeline!, exactly as in Rust
(`//` comments allowed; at most 1 MiB, brackets nested at most 32 deep).

Exit codes: 0 success, 1 input rejected (declaration errors, --dims values refused, kernel
does not compile), 2 usage error (unknown --dims name included), 3 environment (a file cannot
be read or written, NVRTC missing).";

#[derive(Parser, Debug)]
#[command(
    name = "tma",
    version,
    about = "Safe NVIDIA TMA tiles for C++ and Mirage MPK kernels: check a tile declaration, write its C++ header, compile a kernel.",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `tma compile` and `tma precompile` build: the tiles, the arch and the options, read
/// alike by both, so the keys `precompile` warms are the ones a `compile` of the same files uses.
#[derive(clap::Args, Debug)]
struct BuildArgs {
    /// A declaration or a file of declarations (repeatable; tile ids in order).
    #[arg(long = "tile", value_name = "DECL|FILE", required = true)]
    tiles: Vec<String>,
    /// The arch to compile for (sm_90a, sm_100a, sm_120a): the tiles' target.
    #[arg(long, default_value = "sm_90a")]
    arch: String,
    /// Compile with TMA_DEBUG (device checks and hang reports; a debug build's default).
    #[arg(long)]
    debug: bool,
    /// Compile with TMA_BOUNDED_WAITS (CompileOptions::bounded_waits).
    #[arg(long)]
    bounded_waits: bool,
}

impl BuildArgs {
    /// The arch named by `--arch`, or the usage error naming it.
    fn arch(&self) -> Result<Arch, Outcome> {
        Arch::parse(&self.arch).ok_or_else(|| {
            Outcome::fail(
                EXIT_USAGE,
                format!(
                    "unknown arch `{}`; expected one of: {}",
                    shown(&self.arch),
                    Arch::ACCEPTED
                ),
            )
        })
    }

    /// The compile options of `arch` with `--debug` and `--bounded-waits`.
    fn options(&self, arch: Arch) -> tma_runtime::CompileOptions {
        tma_runtime::CompileOptions::new(arch)
            .debug_waits(self.debug)
            .bounded_waits(self.bounded_waits)
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Explain tile declarations: findings, layout, TX_BYTES, encode arguments, shared memory.
    #[command(after_help = "Examples:
  tma explain 'tma_2d! { A: bf16, global = [ROW = _, COL = 1024], boxed = [64, 64], swizzle = 128 }' --dims ROW=4096
  tma explain tiles.tma --svg smem.svg
  tma explain 'tma_im2col! { Act: bf16, global = [N = _, H = 56, W = 56, C = 64], channels_per_pixel = 64, pixels_per_column = 128, lower_corner = [-1, -1], upper_corner = [-1, -1], swizzle = 128 }' --dims N=8

An im2col tile's report walks one example load (coordinates at the lower corners, offsets 0):
which pixels it takes, in runs, and where they land in shared memory.")]
    Explain {
        /// A declaration (`tma_2d! { .. }`, `tma_im2col! { .. }`, or a bare `A: bf16, global = [..], ..`) or a file of them.
        decl: String,
        /// Run-time dims and strides: `ROW=4096`, `stride_ROW=2048` (repeatable, or comma-separated).
        #[arg(long = "dims", value_name = "NAME=VALUE", value_delimiter = ',')]
        dims: Vec<String>,
        /// Write the shared-memory picture of each tile as SVG (`-<tile>` is added before the
        /// extension when the source declares several tiles).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Write one self-contained C++ header for a file of declarations.
    #[command(after_help = "Examples:
  tma header tiles.tma -o tiles.cuh
  tma header tiles.tma --mpk -o tiles.cuh

The header compiles with nvcc -std=c++20 -arch=sm_90a (and under NVRTC, device part only).
Per tile: struct tma_<tile> (device helpers, coordinates in user order) and
  CUresult tma_encode_<tile>(CUtensorMap* map, const void* base, unsigned long long base_bytes,
                             <run-time dims>, tma_encode_error* err = nullptr);
which checks the base alignment, the buffer length, the dims and strides before it calls the
driver (cuTensorMapEncodeTiled; for a tma_im2col! tile cuTensorMapEncodeIm2col, after checking
that every bounding box holds a position). A file holding a tma_pipeline! {..} adds its stage tiles and struct tma_pipe_<name>. With --mpk: kernel::Barrier and MPK's barrier functions, kernel::tma::{store_commit_group,
store_async_wait<N>, async_proxy_fence}, and per tile kernel::tma::tma_<tile> with
tma_cp_async(bar, smem, coords) / tma_store_async(smem, coords), coords innermost first as MPK takes them.")]
    Header {
        /// The declarations (`.tma`).
        file: PathBuf,
        /// Where to write the header (default: standard output).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Add Mirage MPK's names and contract.
        #[arg(long)]
        mpk: bool,
    },
    /// Compile a kernel with its tiles (NVRTC), report registers, shared memory, spills and TMA instructions.
    #[command(after_help = "Examples:
  tma compile kernel.cu --tile tiles.tma
  tma compile kernel.cu --tile 'tma_2d! { A: bf16, global = [M = _, K = 1024], boxed = [64, 64] }' --sass -

The kernel file follows the tiles' helpers; it names each tile by its declared type (A::load(..)),
and a pipeline (a --tile holding tma_pipeline! {..}) by its declared type too (GemmRing pipe(raw)).")]
    Compile {
        /// The kernel source (CUDA C++; `-` reads standard input).
        kernel: PathBuf,
        #[command(flatten)]
        build: BuildArgs,
        /// Write the PTX to FILE (`-`: standard output).
        #[arg(long, value_name = "FILE")]
        ptx: Option<PathBuf>,
        /// Write the SASS to FILE (`-`: standard output).
        #[arg(long, value_name = "FILE")]
        sass: Option<PathBuf>,
        /// Write the assembled source (tiles + kernel) to FILE (`-`: standard output).
        #[arg(long, value_name = "FILE")]
        source: Option<PathBuf>,
    },
    /// Compile kernels into the JIT disk cache ahead of time, under the keys the runtime looks them up by.
    #[command(after_help = "Examples:
  tma precompile kernel.cu --tile tiles.tma
  tma precompile a.cu b.cu --tile tiles.tma --debug

Each kernel is assembled as `tma compile` assembles it and compiled, all in parallel, into the
cache a program's tma runtime reads (TMA_CACHE_DIR, else
$XDG_CACHE_HOME/tma, else ~/.cache/tma). The runtime finds an entry when it compiles the same
source (the same tiles, the kernel file by the same path) with the same options: --debug is
what a debug build compiles with by default (CompileOptions::debug_waits). A program that
builds its own sources warms them itself (tma_runtime::Compiler::precompile).")]
    Precompile {
        /// The kernel sources (CUDA C++), each compiled after the tiles' helpers.
        #[arg(required = true, value_name = "KERNEL")]
        kernels: Vec<PathBuf>,
        #[command(flatten)]
        build: BuildArgs,
        /// The cache directory (default: the runtime's).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
    /// List, size, clear or prune the JIT disk cache.
    #[command(after_help = "Examples:
  tma cache list
  tma cache size
  tma cache prune --older-than 30d --max-size 500M
  tma cache clear

The cache is the runtime's: TMA_CACHE_DIR, else $XDG_CACHE_HOME/tma, else ~/.cache/tma.
Only its entries (<key>.tmajit) and temp files are touched, never other files there.")]
    Cache {
        #[command(subcommand)]
        action: CacheAction,
        /// The cache directory (default: the runtime's).
        #[arg(long, value_name = "DIR", global = true)]
        cache_dir: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum CacheAction {
    /// Every entry: key, size, age, arch, kernels, options, NVRTC and tma versions.
    List,
    /// The number of entries and their bytes.
    Size,
    /// Remove every entry.
    Clear,
    /// Remove corrupt entries, then those older than --older-than, then the oldest beyond --max-size.
    Prune {
        /// Age: a number with s, m, h or d (30d).
        #[arg(long, value_name = "AGE")]
        older_than: Option<String>,
        /// Bytes: a number with K, M or G (binary units: 500M).
        #[arg(long, value_name = "SIZE")]
        max_size: Option<String>,
    },
}

/// What a command prints: standard output and standard error, and the exit code.
#[derive(Debug, Default)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl Outcome {
    fn diagnostics(mut self, diags: &[Diagnostic]) -> Outcome {
        for d in diags {
            self.stderr.push_str(&d.render());
        }
        self
    }
    fn fail(code: i32, message: impl AsRef<str>) -> Outcome {
        Outcome {
            stderr: format!("error: {}\n", message.as_ref()),
            code,
            ..Outcome::default()
        }
    }
}

/// Runs the command line `args` (the program name first) and returns what to print and the
/// exit code.
pub fn run<I, T>(args: I) -> Outcome
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let text = e.render().to_string();
            return if e.use_stderr() {
                Outcome {
                    stderr: text,
                    code,
                    ..Outcome::default()
                }
            } else {
                Outcome {
                    stdout: text,
                    code,
                    ..Outcome::default()
                }
            };
        }
    };
    match cli.command {
        Command::Explain { decl, dims, svg } => explain_cmd(&decl, &dims, svg.as_deref()),
        Command::Header { file, output, mpk } => header_cmd(&file, output.as_deref(), mpk),
        Command::Compile {
            kernel,
            build,
            ptx,
            sass,
            source,
        } => compile_cmd(
            &kernel,
            &build,
            ptx.as_deref(),
            sass.as_deref(),
            source.as_deref(),
        ),
        Command::Precompile {
            kernels,
            build,
            cache_dir,
        } => warm::precompile_cmd(&kernels, &build, cache_dir.as_deref()),
        Command::Cache { action, cache_dir } => {
            let action = match action {
                CacheAction::List => warm::CacheCmd::List,
                CacheAction::Size => warm::CacheCmd::Size,
                CacheAction::Clear => warm::CacheCmd::Clear,
                CacheAction::Prune {
                    older_than,
                    max_size,
                } => warm::CacheCmd::Prune {
                    older_than,
                    max_size,
                },
            };
            warm::cache_cmd(&action, cache_dir.as_deref())
        }
    }
}

/// A declaration given on the command line: a file when one exists at that path, else the
/// text when it reads as a declaration (a `{` or a `:`: a macro or `Name: dtype`).
fn read_decl_arg(arg: &str, what: &str) -> Result<Source, Outcome> {
    let path = Path::new(arg);
    let looks_like_decl = arg.contains(':') || arg.contains('{');
    if !looks_like_decl || path.is_file() {
        return read_file(path);
    }
    Ok(Source {
        name: what.to_string(),
        text: arg.to_string(),
    })
}

/// The most bytes of a kernel file `tma compile` reads (64 MiB): a file past it is refused,
/// not read into memory whole.
pub const MAX_KERNEL_BYTES: usize = 64 << 20;

/// A declaration file (`-`: standard input), at most [`MAX_TEXT_BYTES`] bytes of UTF-8.
fn read_file(path: &Path) -> Result<Source, Outcome> {
    read_text(path, MAX_TEXT_BYTES)
}

/// `path` (`-`: standard input) as text: at most `limit` bytes are read; more, or bytes that
/// are not UTF-8, are refused at the offending byte's line and column.
fn read_text(path: &Path, limit: usize) -> Result<Source, Outcome> {
    use std::io::Read;
    let stdin = path == Path::new("-");
    let name = if stdin {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    };
    let reader: Box<dyn Read> = if stdin {
        Box::new(std::io::stdin())
    } else {
        match std::fs::File::open(path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                return Err(Outcome::fail(
                    EXIT_ENVIRONMENT,
                    format!("cannot read {name}: {e}"),
                ))
            }
        }
    };
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    if let Err(e) = reader.take(cap).read_to_end(&mut bytes) {
        return Err(Outcome::fail(
            EXIT_ENVIRONMENT,
            format!("cannot read {name}: {e}"),
        ));
    }
    let refuse = |d: Diagnostic| {
        let mut o = Outcome {
            code: EXIT_REJECTED,
            ..Outcome::default()
        }
        .diagnostics(&[d]);
        o.stderr
            .push_str(&format!("error: {name} rejected: 1 error\n"));
        o
    };
    if bytes.len() > limit {
        let at = diag::Location::at_byte(&name, &bytes, limit);
        return Err(refuse(Diagnostic {
            level: diag::Level::Error,
            message: format!(
                "{name} is longer than {limit} bytes, the most {}",
                if limit == MAX_TEXT_BYTES {
                    "a declaration source may hold (tma_syntax::parse::MAX_TEXT_BYTES)"
                } else {
                    "a kernel file may hold (tma_cli::MAX_KERNEL_BYTES)"
                }
            ),
            at: Some(at),
        }));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Source { name, text }),
        Err(e) => {
            let bad = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let at = diag::Location::at_byte(&name, &bytes, bad);
            Err(refuse(Diagnostic {
                level: diag::Level::Error,
                message: format!(
                    "{name} is not UTF-8 text: byte 0x{:02x} at offset {bad}",
                    bytes.get(bad).copied().unwrap_or(0)
                ),
                at: Some(at),
            }))
        }
    }
}

fn write_out(path: Option<&Path>, text: &str, out: &mut Outcome) -> bool {
    match path {
        None => {
            out.stdout.push_str(text);
            true
        }
        Some(p) if p == Path::new("-") => {
            out.stdout.push_str(text);
            true
        }
        Some(p) => match std::fs::write(p, text) {
            Ok(()) => true,
            Err(e) => {
                out.stderr
                    .push_str(&format!("error: cannot write {}: {e}\n", p.display()));
                out.code = EXIT_ENVIRONMENT;
                false
            }
        },
    }
}

fn read_tiles(source: &Source) -> Result<decl::Read, Outcome> {
    decl::read(source).map_err(|diags| {
        let n = diags
            .iter()
            .filter(|d| d.level == diag::Level::Error)
            .count();
        let mut o = Outcome {
            code: EXIT_REJECTED,
            ..Outcome::default()
        }
        .diagnostics(&diags);
        o.stderr.push_str(&format!(
            "error: {} rejected: {n} error{}\n",
            source.name,
            if n == 1 { "" } else { "s" }
        ));
        o
    })
}

fn parse_dims(dims: &[String]) -> Result<explain::Dims, Outcome> {
    let mut out = explain::Dims::new();
    for d in dims.iter().filter(|d| !d.trim().is_empty()) {
        let parsed = d
            .split_once('=')
            .and_then(|(k, v)| Some((k.trim(), v.trim().parse::<u64>().ok()?)));
        match parsed {
            Some((k, v)) if !k.is_empty() => {
                out.insert(k.to_string(), v);
            }
            _ => {
                return Err(Outcome::fail(
                    EXIT_USAGE,
                    format!(
                        "--dims takes NAME=VALUE with VALUE an integer in 0..={} (e.g. ROW=4096), not `{}`",
                        u64::MAX,
                        shown(d)
                    ),
                ))
            }
        }
    }
    Ok(out)
}

fn explain_cmd(decl: &str, dims: &[String], svg: Option<&Path>) -> Outcome {
    let source = match read_decl_arg(decl, "<argument>") {
        Ok(s) => s,
        Err(o) => return o,
    };
    let dims = match parse_dims(dims) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let read = match read_tiles(&source) {
        Ok(r) => r,
        Err(o) => return o,
    };
    // Every name given must be a run-time dim or stride of some tile: a misspelt one would
    // otherwise be ignored, and the picture drawn with an example value instead.
    let known: std::collections::BTreeSet<String> = read
        .tiles
        .iter()
        .flat_map(|t| explain::runtime_names(&t.checked.valid))
        .chain(
            read.im2col
                .iter()
                .flat_map(|t| explain::im2col_runtime_names(&t.checked.valid)),
        )
        .collect();
    for name in dims.keys() {
        if !known.contains(name) {
            let list = if known.is_empty() {
                "none: every dim and stride of these tiles is static".to_string()
            } else {
                known.iter().cloned().collect::<Vec<_>>().join(", ")
            };
            let is_static = read.tiles.iter().any(|t| {
                let spec = t.checked.valid.spec();
                (0..spec.rank()).any(|d| spec.dim_label(d) == *name)
            }) || read.im2col.iter().any(|t| {
                let spec = t.checked.valid.spec();
                (0..spec.rank()).any(|d| spec.dim_label(d) == *name)
            });
            let why = if is_static {
                "is a static dim (its value is declared)"
            } else {
                "names no dim or stride of these tiles"
            };
            return Outcome::fail(
                EXIT_USAGE,
                format!(
                    "--dims: `{}` {why}; --dims takes the run-time ones: {list}",
                    shown(name)
                ),
            );
        }
    }
    let mut out = Outcome::default().diagnostics(&read.warnings);
    // A tile whose given dims are refused is a rejected input: its report says why, and the
    // command fails.
    for t in &read.tiles {
        let takes_given = explain::runtime_names(&t.checked.valid)
            .iter()
            .any(|n| dims.contains_key(n));
        if let (true, explain::Binding::None(why)) =
            (takes_given, explain::bind(&t.checked.valid, &dims))
        {
            out.stderr.push_str(&format!(
                "error: tile `{}`: {why}\n",
                shown(&t.checked.valid.spec().name)
            ));
            out.code = EXIT_REJECTED;
        }
    }
    for t in &read.im2col {
        let takes_given = explain::im2col_runtime_names(&t.checked.valid)
            .iter()
            .any(|n| dims.contains_key(n));
        if let (true, explain::Im2colBinding::None(why)) =
            (takes_given, explain::bind_im2col(&t.checked.valid, &dims))
        {
            out.stderr.push_str(&format!(
                "error: im2col tile `{}`: {why}\n",
                shown(&t.checked.valid.spec().name)
            ));
            out.code = EXIT_REJECTED;
        }
    }
    if let Some((ident, pipe)) = &read.pipeline {
        out.stdout.push_str(&explain::explain_pipeline(ident, pipe));
    }
    for (i, t) in read.tiles.iter().enumerate() {
        if i > 0 || read.pipeline.is_some() {
            out.stdout.push('\n');
        }
        out.stdout.push_str(&explain::explain(t, &dims));
    }
    for (i, t) in read.im2col.iter().enumerate() {
        if i > 0 || !read.tiles.is_empty() || read.pipeline.is_some() {
            out.stdout.push('\n');
        }
        out.stdout.push_str(&explain::explain_im2col(t, &dims));
    }
    if let Some(path) = svg {
        let several = read.tiles.len() + read.im2col.len() > 1;
        let file = |name: &str| {
            if several {
                svg_path(path, name)
            } else {
                path.to_path_buf()
            }
        };
        for t in &read.im2col {
            let name = &t.checked.valid.spec().name;
            let picture = match explain::bind_im2col(&t.checked.valid, &dims) {
                explain::Im2colBinding::Given(b) | explain::Im2colBinding::Example(b, _) => {
                    let (coords, offsets) = explain::example_call(b.spec());
                    svg::im2col_svg(&b, &coords, &offsets)
                }
                explain::Im2colBinding::None(why) => Err(why),
            };
            if !write_svg(
                &file(name),
                picture,
                &format!("im2col tile `{name}`"),
                &mut out,
            ) {
                return out;
            }
        }
        for t in &read.tiles {
            let name = &t.checked.valid.spec().name;
            let picture = match explain::bind(&t.checked.valid, &dims) {
                explain::Binding::Given(b) | explain::Binding::Example(b, _) => svg::smem_svg(&b),
                explain::Binding::None(why) => Err(why),
            };
            if !write_svg(&file(name), picture, &format!("tile `{name}`"), &mut out) {
                return out;
            }
        }
    }
    out
}

/// One tile's picture to `file`, or the reason there is none (an error naming `what`, the
/// run carries on); false when the file could not be written (the run stops).
fn write_svg(file: &Path, picture: Result<String, String>, what: &str, out: &mut Outcome) -> bool {
    match picture {
        Ok(text) => {
            if !write_out(Some(file), &text, out) {
                return false;
            }
            out.stderr.push_str(&format!("wrote {}\n", file.display()));
        }
        Err(why) => {
            out.stderr
                .push_str(&format!("error: no SVG for {what}: {why}\n"));
            out.code = EXIT_REJECTED;
        }
    }
    true
}

/// `smem.svg` + tile `a` -> `smem-a.svg`.
fn svg_path(path: &Path, tile: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "smem".into(), |s| s.to_string_lossy().to_string());
    let ext = path
        .extension()
        .map_or_else(|| "svg".into(), |s| s.to_string_lossy().to_string());
    path.with_file_name(format!("{stem}-{tile}.{ext}"))
}

/// The header text of a file of declarations (what `tma header` writes).
pub fn header_text(
    source: &Source,
    mpk: bool,
) -> Result<(String, Vec<Diagnostic>), Vec<Diagnostic>> {
    let read = decl::read(source)?;
    let specs: Vec<_> = read.tiles.iter().map(|t| t.checked.valid.clone()).collect();
    let im2col: Vec<_> = read
        .im2col
        .iter()
        .map(|t| t.checked.valid.clone())
        .collect();
    let pipelines: Vec<_> = read.pipeline.iter().map(|(_, p)| p.clone()).collect();
    match header_with_im2col(&specs, &im2col, &pipelines, HeaderOptions { mpk }) {
        Ok(text) => Ok((text, read.warnings)),
        Err(e) => Err(vec![Diagnostic::error(format!(
            "{}: rendering the header failed: {e}",
            source.name
        ))]),
    }
}

fn header_cmd(file: &Path, output: Option<&Path>, mpk: bool) -> Outcome {
    let source = match read_file(file) {
        Ok(s) => s,
        Err(o) => return o,
    };
    if let Err(o) = read_tiles(&source) {
        return o;
    }
    let (text, warnings) = match header_text(&source, mpk) {
        Ok(t) => t,
        Err(d) => {
            return Outcome {
                code: EXIT_REJECTED,
                ..Outcome::default()
            }
            .diagnostics(&d)
        }
    };
    let mut out = Outcome::default().diagnostics(&warnings);
    if write_out(output, &text, &mut out) {
        if let Some(p) = output.filter(|p| *p != Path::new("-")) {
            out.stderr.push_str(&format!("wrote {}\n", p.display()));
        }
    }
    out
}

fn compile_cmd(
    kernel: &Path,
    build: &BuildArgs,
    ptx: Option<&Path>,
    sass: Option<&Path>,
    source_out: Option<&Path>,
) -> Outcome {
    let arch = match build.arch() {
        Ok(a) => a,
        Err(o) => return o,
    };
    let decls = &build.tiles;
    let kernel_src = match read_text(kernel, MAX_KERNEL_BYTES) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let mut out = Outcome::default();
    let reads = match read_decl_args(decls, &mut out) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let assembled = match assemble_kernel(&reads, &kernel_src, &mut out) {
        Some(s) => s,
        None => return out,
    };
    if let Some(p) = source_out {
        if !write_out(Some(p), assembled.text(), &mut out) {
            return out;
        }
    }
    let compiled = match compile::nvrtc(&assembled, &build.options(arch)) {
        Ok(c) => c,
        Err(e) => {
            let code = match e {
                tma_runtime::Error::CudaLibraryMissing { .. } => EXIT_ENVIRONMENT,
                _ => EXIT_REJECTED,
            };
            // NVRTC's messages name the kernel file and line; the numbered source after them
            // is what --source writes.
            let text = e.to_string();
            let text = text
                .split("\n--- source ---")
                .next()
                .unwrap_or(&text)
                .trim_end()
                .to_string();
            out.stderr.push_str(&format!("error: {text}\n"));
            if code == EXIT_REJECTED {
                out.stderr.push_str("(--source FILE writes the assembled source the line numbers of tiles refer to)\n");
            }
            out.code = code;
            return out;
        }
    };
    let scratch = std::env::temp_dir().join(format!(
        "tma-compile-{}-{}",
        std::process::id(),
        compiled.key
    ));
    let report = compile::report(&compiled, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    out.stdout.push_str(&report.text);
    if let Some(p) = ptx {
        if !write_out(Some(p), &compiled.ptx, &mut out) {
            return out;
        }
    }
    if let Some(p) = sass {
        match &report.sass {
            Some(s) => {
                if !write_out(Some(p), s, &mut out) {
                    return out;
                }
            }
            None => {
                out.stderr.push_str(
                    "error: --sass: no SASS (cuobjdump or a CUBIN is missing; see above)\n",
                );
                out.code = EXIT_ENVIRONMENT;
            }
        }
    }
    out
}

/// The `--tile` arguments, read and checked: each source's declarations, their warnings added
/// to `out`. Tiles of different sources share one translation unit: their names must differ.
/// The sources hold at most [`MAX_TEXT_BYTES`] together, as one source may: 60 `--tile`
/// files of 4,000 tiles each took 6 GB and 100 s before they were refused.
fn read_decl_args(decls: &[String], out: &mut Outcome) -> Result<Vec<decl::Read>, Outcome> {
    let mut sources = Vec::with_capacity(decls.len());
    let mut reads = Vec::with_capacity(decls.len());
    let mut total = 0usize;
    for (i, d) in decls.iter().enumerate() {
        let src = read_decl_arg(d, &format!("<--tile {}>", i + 1))?;
        total = total.saturating_add(src.text.len());
        if total > MAX_TEXT_BYTES {
            return Err(Outcome::fail(
                EXIT_REJECTED,
                format!(
                    "the --tile sources hold more than {MAX_TEXT_BYTES} bytes together, the most one kernel's declarations may (tma_syntax::parse::MAX_TEXT_BYTES): {total} bytes with {} (--tile {})",
                    src.name,
                    i + 1
                ),
            ));
        }
        let r = read_tiles(&src)?;
        *out = std::mem::take(out).diagnostics(&r.warnings);
        reads.push(r);
        sources.push(src);
    }
    // A kernel source is assembled by `KernelSource`, which holds tiled tiles and pipelines.
    for (r, src) in reads.iter().zip(&sources) {
        if let Some(t) = r.im2col.first() {
            let at = src.locate(t.span);
            let mut o = std::mem::take(out);
            o.stderr.push_str(&format!(
                "error: {}:{}:{}: `{}` is an im2col tile: `tma compile` and `tma precompile` take tiled tiles and pipelines only (`tma header` writes an im2col tile's helpers and encode function)\n",
                at.file, at.line, at.column, shown(&t.ident)
            ));
            o.code = EXIT_REJECTED;
            return Err(o);
        }
    }
    let located: Vec<decl::Named<'_>> = reads
        .iter()
        .zip(&sources)
        .flat_map(|(r, s)| r.tiles.iter().map(move |t| decl::Named::tiled(t, s)))
        .collect();
    let same = decl::same_names(&located);
    if !same.is_empty() {
        let mut o = std::mem::take(out).diagnostics(&same);
        o.code = EXIT_REJECTED;
        return Err(o);
    }
    Ok(reads)
}

/// The translation unit of `kernel` after the declarations of `reads` (`tma compile`'s and
/// `tma precompile`'s, so both key the cache alike); `None` after writing the error to `out`.
fn assemble_kernel(
    reads: &[decl::Read],
    kernel: &Source,
    out: &mut Outcome,
) -> Option<tma_runtime::Source> {
    let tiles: Vec<&decl::Tile> = reads.iter().flat_map(|r| &r.tiles).collect();
    let pipelines: Vec<&(String, ValidPipeline)> =
        reads.iter().filter_map(|r| r.pipeline.as_ref()).collect();
    match compile::assemble(&tiles, &pipelines, &kernel.name, &kernel.text) {
        Ok(s) => Some(s),
        Err(e) => {
            out.stderr.push_str(&format!(
                "error: assembling the kernel source {} failed: {e}\n",
                kernel.name
            ));
            out.code = EXIT_REJECTED;
            None
        }
    }
}

/// Prints an outcome and returns its exit code (for `main`).
pub fn emit(outcome: &Outcome) -> i32 {
    let _ = std::io::stdout().write_all(outcome.stdout.as_bytes());
    let _ = std::io::stderr().write_all(outcome.stderr.as_bytes());
    outcome.code
}
