//! The one error type of the runtime. Every variant says what went wrong and what to fix.

use cudarc::driver::{sys::CUresult, DriverError};
use tma_core::limits::TENSOR_MAP_BYTES;
use tma_core::{DType, EncodeArgs, Im2colEncodeArgs, SpecErrors};

/// Everything the runtime can refuse or report.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA shared library could not be loaded (cudarc would have panicked here).
    #[error(
        "CUDA library `{library}` not found: {}\nhint: {hint}",
        summarize_search(searched)
    )]
    CudaLibraryMissing {
        library: String,
        /// Every place tried, with the loader's reason.
        searched: Vec<String>,
        hint: String,
    },

    /// The library we found is not the one cudarc would load by name.
    #[error(
        "CUDA library `{library}`: found `{wanted}`, but cudarc loads `{cudarc_loads}` by name first; \
         hint: {hint}"
    )]
    CudaLibraryShadowed {
        library: String,
        wanted: String,
        cudarc_loads: String,
        hint: String,
    },

    /// A symbol the runtime needs is missing from a loaded library (too old a version).
    #[error("symbol `{symbol}` missing from `{library}`: {reason}; install CUDA 13.0 or newer")]
    MissingSymbol {
        library: String,
        symbol: String,
        reason: String,
    },

    /// An NVRTC call other than the compile itself failed.
    #[error("NVRTC call {call} failed: {result}")]
    Nvrtc { call: &'static str, result: String },

    /// NVRTC rejected the source. Shown: NVRTC's log, then `context`: the source around each
    /// line the log's errors report, numbered as the log numbers lines, the reported lines
    /// marked `>`. The whole unit is `numbered_source`, and is shown instead when
    /// `TMA_FULL_SOURCE=1` is set.
    #[error("NVRTC compile failed:\n{log}\n{context}")]
    Compile {
        log: String,
        /// What the message shows after the log: excerpts of the source around the reported
        /// lines, or (`TMA_FULL_SOURCE=1`) the whole numbered unit.
        context: String,
        /// The whole source with line numbers as NVRTC counts them (after a `#line`, in the
        /// user's file), to match the log's `(line)` references.
        numbered_source: String,
    },

    /// [`crate::Compiled::resources`] of a kernel ptxas did not report: the module is PTX
    /// only, or has no kernel of that name.
    #[error("no resource figures for kernel `{kernel}`: {}", no_resources(*ptx_only, available))]
    NoResources {
        kernel: String,
        /// The module has no CUBIN (this NVRTC cannot target its arch).
        ptx_only: bool,
        /// The kernels the module's report describes.
        available: Vec<String>,
    },

    /// A tile of the source was validated for another arch than the one compiled for: the
    /// arch is stated once, in the tile's `target`, and the compile must agree.
    #[error(
        "tile `{tile}` targets {tile_target} but the source is compiled for {compile_arch}; state the arch \
         once: declare the tile with `target = {compile_arch}` (TileSpec::target), or compile with \
         CompileOptions::new(Arch::{tile_target:?})"
    )]
    TargetMismatch {
        tile: String,
        tile_target: tma_core::Arch,
        compile_arch: tma_core::Arch,
    },

    /// The CUDA source holds a NUL byte (NVRTC takes a C string).
    #[error("CUDA source has a NUL byte at offset {offset}; generated sources are text")]
    SourceHasNul { offset: usize },

    /// A compile option does not fit NVRTC (e.g. a define name with spaces).
    #[error("compile option {option} = {value:?} is invalid: {reason}")]
    InvalidOption {
        option: &'static str,
        value: String,
        reason: &'static str,
    },

    /// An environment variable holds a value the runtime cannot use.
    #[error("environment variable {var}={value:?} is invalid: expected {expected}")]
    InvalidEnv {
        var: &'static str,
        value: String,
        expected: &'static str,
    },

    /// The JIT disk cache's directory or one of its files could not be read or removed
    /// (listing, clearing, pruning; a failed write while compiling is a warning, not this).
    #[error("JIT cache: cannot {action} `{path}`: {reason}")]
    CacheIo {
        path: String,
        action: &'static str,
        reason: String,
    },

    /// An operation a CUDA graph capture cannot take (or a capture that cannot begin), refused
    /// on the host before the driver, whose error would come later and also invalidate the
    /// capture: the operation, why, and what to do instead (`driver::capture::CaptureOp`).
    #[error("{operation}: {problem}; {fix}")]
    Capture {
        operation: &'static str,
        problem: &'static str,
        fix: &'static str,
    },

    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed: {result}")]
    Driver {
        call: &'static str,
        result: CuResult,
    },

    /// No CUDA device at the requested ordinal.
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice { ordinal: usize, count: usize },

    /// The device has no TMA (needs compute capability 9.0 or newer).
    #[error(
        "device `{name}` has compute capability {major}.{minor}; TMA needs 9.0 (Hopper) or newer"
    )]
    UnsupportedDevice {
        name: String,
        major: i32,
        minor: i32,
    },

    /// The spec breaks TMA rules (including base-address alignment of a buffer).
    #[error(transparent)]
    Spec(#[from] SpecErrors),

    /// The buffer's Rust element type does not carry the spec's data type.
    #[error(
        "tile `{tile}` is {spec_dtype} ({spec_bits} bits per element) but the buffer holds `{rust_type}` \
         ({rust_bytes} bytes); use a buffer of a type whose size matches {spec_dtype} (e.g. {suggestion})"
    )]
    DTypeMismatch {
        tile: String,
        spec_dtype: DType,
        spec_bits: u32,
        rust_type: &'static str,
        rust_bytes: usize,
        suggestion: &'static str,
    },

    /// The buffer's Rust element type has the spec's element size but is another type: a
    /// bf16 map over `half::f16` or `u16` data would read their bits as bf16.
    #[error(
        "tile `{tile}` is {spec_dtype} but the buffer holds `{rust_type}`, another type of the same size \
         whose bits mean something else; use a buffer of {suggestion}, or TensorMap::new_raw_bits to \
         encode over {spec_dtype} bits kept as `{rust_type}`"
    )]
    ElementTypeMismatch {
        tile: String,
        spec_dtype: DType,
        rust_type: &'static str,
        suggestion: &'static str,
    },

    /// The buffer is smaller than the tensor the spec describes.
    #[error(
        "tile `{tile}`: the tensor spans {needed_bytes} bytes (global dims and strides) but the buffer \
         holds {buffer_bytes}; bind smaller dims or pass a larger buffer"
    )]
    BufferTooSmall {
        tile: String,
        needed_bytes: u64,
        buffer_bytes: u64,
    },

    /// `cuTensorMapEncodeTiled` refused arguments that passed validation.
    #[error("{args}\nreturned {result} (global address {global_address:#x}); the driver refused arguments tma-core accepted: please report")]
    Encode {
        result: CuResult,
        global_address: u64,
        args: Box<EncodeArgs>,
    },

    /// `cuTensorMapEncodeIm2col` refused arguments that passed validation.
    #[error("{args}\nreturned {result} (global address {global_address:#x}); the driver refused im2col arguments tma-core accepted: please report")]
    EncodeIm2col {
        result: CuResult,
        global_address: u64,
        args: Box<Im2colEncodeArgs>,
    },

    /// A CUBIN built for one arch loaded on a device of another.
    #[error("module compiled for {compiled} cannot load on a device of compute capability {major}.{minor}; compile for the device's arch (tma_core::Arch::from_compute_capability)")]
    ArchMismatch {
        compiled: tma_core::Arch,
        major: i32,
        minor: i32,
    },

    /// The module has no kernel of that name (declare it `extern "C" __global__`).
    #[error(
        "kernel `{name}` not found in the module: declare it `extern \"C\" __global__` ({result})"
    )]
    KernelNotFound { name: String, result: CuResult },

    /// The module has no `tma_debug_record` global but debug waits were asked for (a release
    /// module without it loads: compiled with the bare loop, the release default, or without the prelude).
    #[error("module compiled with debug waits has no `tma_debug_record` global: the source lacks the tma prelude ({result})")]
    DebugRecordMissing { result: CuResult },

    /// A device array of tensor maps that does not start at the `CUtensorMap` alignment.
    #[error("tensor map array at {address:#x} is not {align}-byte aligned as CUtensorMap must be; allocate it with the driver (cuMemAlloc aligns to 256 bytes)")]
    TensorMapArrayMisaligned { address: u64, align: usize },

    /// A launch configuration the hardware cannot run.
    #[error("launch of `{kernel}`: {reason}")]
    InvalidLaunch { kernel: String, reason: String },

    /// A launch shape past the hardware's limits (`LaunchConfig::check`, before the driver):
    /// every finding names the axis (`grid[1]`, `block[2]`, `cluster[0]`, `block threads`),
    /// its value and the rule ([`tma_core::Rule::GridDims`], `BlockDims`, `ClusterShape`).
    #[error("launch of `{kernel}`: {errors}")]
    LaunchShape {
        kernel: String,
        errors: tma_core::launch::LaunchShapeErrors,
    },

    /// Dynamic shared memory above what the device lets one block opt in to.
    #[error(
        "launch of `{kernel}`: {requested} bytes of dynamic shared memory (+{static_bytes} static) exceed the \
         device's {max} bytes per block; shrink the tiles or the pipeline depth"
    )]
    SharedMemoryTooLarge {
        kernel: String,
        requested: u32,
        static_bytes: u32,
        max: u32,
    },

    /// The launch pushed another number of arguments than the kernel has parameters (as the
    /// driver reports them: `cuFuncGetParamInfo`).
    #[error(
        "launch of `{kernel}`: {} argument(s) pushed but the kernel takes {}: {}; push one argument per \
         parameter, in order (parameter bytes {expected:?}, pushed {given:?})",
        given.len(), expected.len(), count_problem(*index, expected, given)
    )]
    ArgumentCount {
        kernel: String,
        /// The first parameter without an argument, or the first argument without a parameter.
        index: usize,
        /// Bytes of each parameter of the kernel.
        expected: Vec<usize>,
        /// Bytes of each argument pushed.
        given: Vec<usize>,
    },

    /// An argument's size differs from its parameter's: a by-value struct where the kernel
    /// takes a pointer, an `i64` for an `int`, a `TensorMap` for a `const CUtensorMap*`.
    #[error(
        "launch of `{kernel}`: argument {index} is {given_bytes} bytes but parameter {index} of the kernel \
         takes {expected_bytes}; {}",
        argument_hint(*expected_bytes, *given_bytes)
    )]
    ArgumentSize {
        kernel: String,
        index: usize,
        expected_bytes: usize,
        given_bytes: usize,
    },

    /// The launch gives a kernel that uses dynamic shared memory less than the largest tile
    /// its source declares needs: its footprint plus the slack that aligns it (the base is
    /// only 16-byte aligned). `LaunchConfig::unchecked_dynamic_smem` opts a launch out.
    #[error(
        "launch of `{kernel}`: {given} bytes of dynamic shared memory, but the largest tile its source \
         declares needs at least {needed}: {tiles} and {slack} bytes to align it (dynamic shared memory \
         starts only 16-byte aligned); give at least {needed} (a tile's SMEM_BYTES + SMEM_ALIGN always \
         suffice for it), or opt out with LaunchConfig::unchecked_dynamic_smem() if the kernel keeps no \
         such tile there"
    )]
    DynamicSmemTooSmall {
        kernel: String,
        given: u32,
        needed: u64,
        /// The tile that sets the bound: "`a` 16384 B (align 1024)".
        tiles: String,
        /// `needed` less its footprint.
        slack: u64,
    },

    /// The launch of a kernel without a plan fits none of the pipelines its source holds
    /// outside its plans (the source's description, [`tma_core::facts::PipelineFacts`]):
    /// another cluster shape than the pipeline's
    /// (its multicast slices and CTA masks would name the wrong CTAs, or none), or less
    /// dynamic shared memory than its `DYNAMIC_SMEM_BYTES` (`init()` would write mbarriers
    /// past the end). Refused on the host before the driver; `LaunchConfig::unchecked_pipelines`
    /// opts a launch of a kernel that uses none of the source's pipelines out.
    #[error(
        "launch of `{kernel}`: {what} {launched}, but {pipeline} of its source {declared}; launch a \
         pipeline's kernel with the cluster shape (LaunchConfig::cluster) and at least the \
         DYNAMIC_SMEM_BYTES its pipeline was declared with, or opt out with \
         LaunchConfig::unchecked_pipelines() if the kernel uses none of the source's pipelines"
    )]
    PipelineLaunch {
        kernel: String,
        /// The pipeline(s) the launch was compared with: "pipeline `ring`".
        pipeline: String,
        /// `cluster` or `dynamic shared memory`.
        what: &'static str,
        /// What the pipeline(s) were declared for: "was declared for cluster 2x1x1".
        declared: String,
        /// What the launch gave: "1x1x1 (no cluster)", "66560 bytes".
        launched: String,
    },

    /// A launch of a kernel plan's kernel disagrees with its plan
    /// ([`tma_core::plan::LaunchPlan`], `Rule::PlanLaunch`): another block, cluster or
    /// dynamic shared memory than the plan's. Refused on the host before the driver; build
    /// the launch from the plan (`LaunchConfig::from_plan`, `Kernel::plan_config`).
    #[error(
        "launch of `{kernel}`: {field} is {launch} but the kernel's plan says {plan}; build the \
         launch from the plan (LaunchConfig::from_plan / Kernel::plan_config: block, cluster and \
         dynamic shared memory from the plan, the grid from you)"
    )]
    PlanLaunch {
        kernel: String,
        /// `block`, `cluster` or `dynamic shared memory`.
        field: &'static str,
        /// The plan's value: "128x1x1", "1x1x1 (no cluster)", "25600 bytes".
        plan: String,
        /// The launch's value, in the same form.
        launch: String,
    },

    /// The kernel launch or its completion failed (no hang record was written).
    #[error("kernel `{kernel}` failed: {result}{}", if *context_lost { "; the CUDA context is now unusable: start a fresh process" } else { "" })]
    Launch {
        kernel: String,
        result: CuResult,
        context_lost: bool,
    },

    /// A bounded wait gave up (debug: after `TMA_DEBUG_TIMEOUT_NS`; release, compiled with
    /// [`crate::CompileOptions::bounded_waits`] on: after `TMA_WAIT_TIMEOUT_NS`):
    /// the mbarrier never completed its phase. Usually the bytes
    /// expected (`expected_tx`) differ from what the copies delivered, or a copy used a bad
    /// tensor map. After this trap the CUDA context is unusable: start a fresh process.
    #[error(
        "tile `{tile}`: block {block:?} thread {thread} waited {waited_ns} ns on mbarrier at smem {barrier:#x} \
         (parity {phase}, expecting {expected_tx} tx bytes) and gave up; check the expected byte count \
         and the tensor map. The CUDA context is now unusable: start a fresh process"
    )]
    BarrierTimeout {
        tile: String,
        block: [u32; 3],
        thread: u32,
        barrier: u32,
        phase: u32,
        expected_tx: u32,
        waited_ns: u64,
    },

    /// A debug check of a generated helper failed on the device (compiled with debug on):
    /// the copy would have trapped anonymously or moved the wrong data. After this trap the
    /// CUDA context is unusable: start a fresh process.
    #[error(
        "tile `{tile}`: {helper}() in block {block:?} thread {thread} breaks {rule:?}: {}; \
         the CUDA context is now unusable: start a fresh process",
        device_check_detail(*rule, *dim, dim_name.as_deref(), *value)
    )]
    DeviceCheck {
        tile: String,
        /// The generated helper that checked (`load`, `store`, `store_committed`, ...).
        helper: &'static str,
        rule: tma_core::Rule,
        /// The dim (user order) the value belongs to, when it is a coordinate.
        dim: Option<u32>,
        /// That dim's name in the tile's declaration (`K`), when it has one and the source was
        /// given with its description: messages name it as host errors do (`dim 1 (K)`).
        dim_name: Option<String>,
        /// The offending value: a coordinate, a shared-memory address, or the bytes a box
        /// needs from the start of dynamic shared memory.
        value: i64,
        block: [u32; 3],
        thread: u32,
    },

    /// The debug record was written, but with a kind, rule or helper code this runtime does
    /// not know (a prelude of another version, or memory overwritten), or is still marked as
    /// being written (kind `0xffffffff`: a fault elsewhere ended the context before the writer
    /// finished): not a hang, and not a check it can name. The raw codes are kept. The CUDA
    /// context is unusable all the same.
    #[error(
        "tile `{tile}`: block {block:?} thread {thread} wrote a debug record this runtime cannot \
         decode: kind {kind}, helper code {helper_code}, rule code {rule_code}, dim {dim:#x}, value \
         {value} (known kinds: 1 hang, 2 check, 4294967295 still being written when a fault \
         elsewhere ended the context; codes: tma_core::Rule::DEVICE_CHECKED, \
         tma_core::rules::Helper::ALL); is the source's prelude from this version of tma? The CUDA \
         context is now unusable: start a fresh process"
    )]
    UnknownDebugRecord {
        tile: String,
        kind: u32,
        helper_code: u32,
        rule_code: u32,
        dim: u32,
        value: i64,
        block: [u32; 3],
        thread: u32,
    },

    /// A pipeline's bounded wait gave up (debug or release, as [`Error::BarrierTimeout`]): a consumer's `wait` on a
    /// stage's full barrier (the stage's copies never delivered `expected_tx` bytes, or the
    /// producer never loaded it) or the producer's `acquire` on its empty barrier (a consumer
    /// never released it). After this trap the CUDA context is unusable: start a fresh process.
    #[error(
        "pipeline `{pipeline}`: {helper}() in block {block:?} thread {thread} waited {waited_ns} ns for stage {stage} \
         (parity {parity}, tiles {tiles}{}) on mbarrier at smem {barrier:#x} and gave up; \
         the CUDA context is now unusable: start a fresh process",
        if *helper == "wait" { format!(", expecting {expected_tx} tx bytes") } else { " released by its consumers".to_string() }
    )]
    PipelineTimeout {
        pipeline: String,
        /// `wait` (consumer, full barrier) or `acquire` (producer, empty barrier).
        helper: &'static str,
        stage: u32,
        /// The parity waited for.
        parity: u32,
        /// The stage's tiles, `a + b`.
        tiles: String,
        expected_tx: u32,
        barrier: u32,
        block: [u32; 3],
        thread: u32,
        waited_ns: u64,
    },

    /// A work queue's bounded wait gave up (as [`Error::PipelineTimeout`]): a reader's `pop`
    /// on a slot's full barrier (the producer never pushed the slot's item: it stopped early,
    /// or a reader pops past the last item pushed) or the producer's `push` on its empty
    /// barrier (a reader never popped the previous item: a reader stopped early, or the queue's
    /// readers are declared more than pop). After this trap the CUDA context is unusable:
    /// start a fresh process.
    #[error(
        "work queue `{queue}` of kernel `{kernel}`: {helper}() in block {block:?} thread {thread} waited {waited_ns} ns for slot {slot} \
         (parity {parity}) on mbarrier at smem {barrier:#x} and gave up: {}; \
         the CUDA context is now unusable: start a fresh process",
        if *helper == "pop" { "no item was pushed there" } else { "its readers did not all pop the item before" }
    )]
    QueueTimeout {
        queue: String,
        kernel: String,
        /// `pop` (reader, full barrier) or `push` (producer, empty barrier).
        helper: &'static str,
        slot: u32,
        /// The parity waited for.
        parity: u32,
        barrier: u32,
        block: [u32; 3],
        thread: u32,
        waited_ns: u64,
    },

    /// A [`crate::tune::TuneKey`] field that cannot say what the best candidate depends on.
    #[error("tune key field {field} = {value:?}: {rule}")]
    InvalidTuneKey {
        field: &'static str,
        value: String,
        rule: &'static str,
    },

    /// Two candidates of one tuning share a name: the tune cache keeps the pick by name.
    #[error("tuning `{kernel}`: two candidates are named `{name}`; give each a distinct name")]
    DuplicateCandidate { kernel: String, name: String },

    /// A tuning was given no candidates, or none of them compiled, set up, passed its check
    /// and ran: the report says why each failed.
    #[error("tuning `{kernel}`: no candidate passed ({}); nothing to pick", if failures.is_empty() { "none given".to_string() } else { failures.join("; ") })]
    NoCandidatePassed {
        kernel: String,
        /// `name: stage: message` per candidate.
        failures: Vec<String>,
    },

    /// A timeline attached to a module compiled without `CompileOptions::timeline(true)`: it
    /// has no `tma_timeline` global of the config's size.
    #[error("module has no `tma_timeline` global of {expected} bytes ({result}): compile it with CompileOptions::timeline(true) (-DTMA_TIMELINE) and the tma pipeline helpers")]
    TimelineMissing { expected: usize, result: CuResult },

    /// A timeline's extent the device cannot address or the host cannot hold.
    #[error("timeline {field} = {value}: {rule}")]
    InvalidTimeline {
        field: &'static str,
        value: u64,
        rule: &'static str,
    },

    /// A timeline slot holding what no recording site writes there (the buffer and the
    /// kernel's helpers disagree on the layout, or something else wrote the buffer).
    #[error("timeline slot {slot} (block {block}, warp {warp}, pipeline {pipeline}, pass {pass}, slot of `{kind}`): {found}")]
    TimelineCorrupt {
        slot: u64,
        block: u32,
        warp: u32,
        pipeline: u32,
        pass: u32,
        kind: &'static str,
        found: String,
    },
}

/// Which argument or parameter is left over, for [`Error::ArgumentCount`].
fn no_resources(ptx_only: bool, available: &[String]) -> String {
    if ptx_only {
        "the module is PTX only (this NVRTC cannot emit a CUBIN for its arch), so ptxas runs in the \
         driver at load; read the loaded kernel's attributes instead (cuFuncGetAttribute: \
         CU_FUNC_ATTRIBUTE_NUM_REGS, LOCAL_SIZE_BYTES, SHARED_SIZE_BYTES)"
            .to_string()
    } else if available.is_empty() {
        "the module has no kernel; declare one `extern \"C\" __global__`".to_string()
    } else {
        format!(
            "the module has no kernel of that name (it has {}); name the kernel as the module \
             does: `extern \"C\"` keeps the source's name, else it is mangled",
            available
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn count_problem(index: usize, expected: &[usize], given: &[usize]) -> String {
    match expected.get(index) {
        Some(&TENSOR_MAP_BYTES) if given.len() < expected.len() => format!(
            "parameter {index} ({TENSOR_MAP_BYTES} bytes, a CUtensorMap by value?) has no argument"
        ),
        Some(b) if given.len() < expected.len() => {
            format!("parameter {index} ({b} bytes) has no argument")
        }
        _ => format!("argument {index} has no parameter"),
    }
}

/// How to fix an argument of the wrong size, for [`Error::ArgumentSize`].
fn argument_hint(expected: usize, given: usize) -> String {
    match (expected, given) {
        (8, TENSOR_MAP_BYTES) => "a TensorMap goes by value: declare the parameter \
            `const __grid_constant__ CUtensorMap`, or push a device array of maps \
            (TensorMapArray::device) for a `const CUtensorMap*`"
            .to_string(),
        (TENSOR_MAP_BYTES, 8) => "the kernel takes a CUtensorMap by value: push the TensorMap \
            (`.arg(&map)`), not a device pointer"
            .to_string(),
        _ => "push a value of the parameter's C type (e.g. `&n` with `n: i32` for an `int`, a \
            `ByValue` of a `#[repr(C)]` twin for a struct)"
            .to_string(),
    }
}

impl Error {
    pub(crate) fn driver(call: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |e| Error::Driver {
            call,
            result: e.into(),
        }
    }
}

/// A driver status code. Printed by name without calling the driver (cudarc's
/// `DriverError` formats through `cuGetErrorString`, which panics when libcuda is absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CuResult(pub CUresult);

impl std::fmt::Display for CuResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({})", self.0, self.0 as u32)
    }
}

impl From<DriverError> for CuResult {
    fn from(e: DriverError) -> Self {
        CuResult(e.0)
    }
}

/// "tried N file names (a, b, ...) in these folders: x, y; and by bare name through the
/// system loader": the places of a library search without their cross product.
fn summarize_search(searched: &[String]) -> String {
    let mut names: Vec<&str> = Vec::new();
    let mut dirs: Vec<&str> = Vec::new();
    let mut bare = false;
    for entry in searched {
        let path = entry.split(" (").next().unwrap_or(entry);
        match path.rsplit_once('/') {
            Some((dir, name)) => {
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            None => {
                bare = true;
                if !names.contains(&path) {
                    names.push(path);
                }
            }
        }
    }
    let shown: Vec<&str> = names.iter().take(4).copied().collect();
    let more = names.len().saturating_sub(shown.len());
    let mut out = format!(
        "tried {} file names ({}{})",
        names.len(),
        shown.join(", "),
        if more > 0 {
            format!(", {more} more")
        } else {
            String::new()
        }
    );
    if !dirs.is_empty() {
        out.push_str(&format!(" in {}", dirs.join(", ")));
    }
    if bare {
        out.push_str(if dirs.is_empty() {
            " through the system loader"
        } else {
            ", and through the system loader"
        });
    }
    out
}

/// What a failed device check's value means, in words; a tile's dim as `dim 1 (K)` when it
/// has a name (`dim 1` else).
fn device_check_detail(
    rule: tma_core::Rule,
    dim: Option<u32>,
    dim_name: Option<&str>,
    value: i64,
) -> String {
    use tma_core::Rule;
    if rule == Rule::PipelineLaunchShape {
        // value: the pipeline id (bits 56..), what it needs (28..55), what the launch gave.
        let (need, given) = ((value >> 28) & 0xfff_ffff, value & 0xfff_ffff);
        return match dim {
            Some(d @ 0..=2) => {
                let axis = ["x", "y", "z"][d as usize];
                format!(
                    "the pipeline was declared for cluster {axis} = {need}, the launch has %cluster_nctaid.{axis} = {given}"
                )
            }
            _ => format!(
                "the pipeline ends {need} B into the dynamic shared memory (alignment padding included), the launch gave {given} B"
            ),
        };
    }
    let dim = match (dim, dim_name) {
        (Some(d), Some(name)) => format!("dim {d} ({name}) "),
        (Some(d), None) => format!("dim {d} "),
        (None, _) => String::new(),
    };
    match rule {
        Rule::CoordinateAlignment => format!(
            "{dim}coordinate {value} is not a multiple of the tile's INNER_COORD_MULTIPLE (16 bytes)"
        ),
        Rule::StoreCoordinateNegative => {
            format!("{dim}coordinate {value} is negative, which stores and reductions trap on")
        }
        Rule::CoordinateRange => format!(
            "{dim}coordinate {value} plus the offset of the last repeated box leaves int"
        ),
        Rule::SmemAddressAlignment => format!(
            "shared-memory address {value:#x} is not a multiple of the tile's SMEM_ALIGN"
        ),
        Rule::DynamicSmemTooSmall => format!(
            "the tile ends {value} B into the dynamic shared memory (alignment padding included), past what the launch gave"
        ),
        Rule::StoreNotWaited => {
            "a committed store's token went out of scope without wait_read() / wait_complete()"
                .to_string()
        }
        Rule::MulticastMask => {
            let (mask, ctas) = (value & 0xffff, value >> 32);
            if mask == 0 {
                format!("cta_mask 0 names no CTA (the cluster has {ctas}): nothing arrives, the wait hangs")
            } else {
                format!("cta_mask {mask:#06x} names a CTA past the cluster's {ctas}")
            }
        }
        Rule::MbarrierAddress => format!(
            "the mbarrier at generic address {value:#x} is not in this CTA's shared memory, or not 8-byte aligned"
        ),
        Rule::WgmmaSliceRange => {
            let (index, count) = (value & 0xffff_ffff, (value >> 32) & 0xffff);
            let (what, name) = if (value >> 48) & 1 == 1 {
                ("64-row block", "M_BLOCKS")
            } else {
                ("k-slice", "K_SLICES")
            };
            format!(
                "{dim}{what} {index} is past the tile's {name} = {count}: its descriptor would address shared memory past the tile"
            )
        }
        Rule::NamedBarrierIds => {
            // value: the barrier's first id (bits 40..), its consumers (32..39), the index.
            let (first, count, index) = (value >> 40, (value >> 32) & 0xff, value & 0xffff_ffff);
            format!(
                "consumer {index} of a per-consumer named barrier with {count} consumer(s), ids {first} to {}: \
                 it would synchronise on id {}, another barrier's or none",
                first + count - 1,
                first + index
            )
        }
        // A device-side map update (docs/MAP_UPDATE.md): the checks of the host encode.
        Rule::GlobalDimRange => format!(
            "{dim}global dim {} is outside [1, 2^32 - 1] (a device update passes dims as 32-bit operands)",
            value as u64
        ),
        Rule::StrideAlignment => format!(
            "{dim}stride {} (elements): its bytes are not a multiple of the tile's stride alignment (16 B; 32 B with 32-byte interleave)",
            value as u64
        ),
        Rule::StrideMax => format!("{dim}stride {} (elements) reaches 2^40 B or more", value as u64),
        Rule::StrideWholeBytes => format!(
            "{dim}stride {} (elements) does not end on a whole byte",
            value as u64
        ),
        Rule::BaseAddressAlignment => format!(
            "new base address {value:#x} is not aligned as the tile needs (16 B; 32 B with 32-byte interleave or packed types)"
        ),
        Rule::RuntimeShapeMismatch => format!(
            "{dim}value {} differs from the one the tile declares",
            value as u64
        ),
        Rule::PackedTypeAlignment => format!(
            "{dim}value {} breaks the packed type's alignment (inner dim a multiple of 128, strides of 32 B)",
            value as u64
        ),
        Rule::TensorMapAddress => format!(
            "the map at {value:#x} is not 128-byte aligned, or not in the memory the helper names (global for update_global, shared for update_shared)"
        ),
        Rule::MapUpdateInFlight => format!(
            "a load through this map (on this CTA's mbarrier at shared address {:#x}, phase parity {}) has not completed: replacing the map now races with it",
            value >> 1,
            value & 1
        ),
        Rule::Im2colOffsetRange => format!(
            "{dim}im2col offset {value} is outside [0, 2^(16 / spatial dims) - 1] (the map keeps that many bits of each filter offset)"
        ),
        _ => format!("{dim}value {value}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_update_under_a_load_names_the_barrier_and_phase() {
        // What tma_debug_check_map_idle writes: the mbarrier's shared address << 1 | parity.
        let s = device_check_detail(
            tma_core::Rule::MapUpdateInFlight,
            None,
            None,
            (0x400 << 1) | 1,
        );
        assert!(
            s.starts_with("a load through this map (on this CTA's mbarrier at shared address 0x400, phase parity 1)"),
            "{s}"
        );
        let s = device_check_detail(tma_core::Rule::StrideAlignment, Some(0), Some("M"), 50);
        assert!(s.starts_with("dim 0 (M) stride 50 (elements)"), "{s}");
    }

    #[test]
    fn a_descriptor_past_the_tile_is_named() {
        // What the generated `desc()` writes: dim, index | count << 32 (| 1 << 48 for a block).
        let k = device_check_detail(
            tma_core::Rule::WgmmaSliceRange,
            Some(1),
            None,
            (4 << 32) | 5,
        );
        assert_eq!(
            k,
            "dim 1 k-slice 5 is past the tile's K_SLICES = 4: its descriptor would address shared memory past the tile"
        );
        let m = device_check_detail(
            tma_core::Rule::WgmmaSliceRange,
            Some(0),
            Some("M"),
            (1 << 48) | (2 << 32) | 2,
        );
        assert!(
            m.starts_with("dim 0 (M) 64-row block 2 is past the tile's M_BLOCKS = 2"),
            "{m}"
        );
    }

    #[test]
    fn a_consumer_past_its_barriers_is_named() {
        // What tma_debug_check_barrier_index writes: first << 40 | count << 32 | index.
        let d = device_check_detail(
            tma_core::Rule::NamedBarrierIds,
            None,
            None,
            (2 << 40) | (4 << 32) | 4,
        );
        assert_eq!(
            d,
            "consumer 4 of a per-consumer named barrier with 4 consumer(s), ids 2 to 5: it would synchronise on id 6, another barrier's or none"
        );
    }
}
