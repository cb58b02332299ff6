//! What ptxas allocated for each kernel: registers, spills, local and static shared memory,
//! read from ptxas's verbose report (`-v`), which NVRTC appends to its log when asked
//! (`--ptxas-options=-v`, which [`CompileOptions::nvrtc_args`](super::CompileOptions::nvrtc_args)
//! passes whenever NVRTC emits a CUBIN). The one parser of that report: `tma compile` reads
//! the report of its own ptxas run with it too.
//!
//! Why the report and not the CUBIN: the CUBIN's `.nv.info` attributes carry registers
//! (`EIATTR_REGCOUNT`) and the stack frame (`EIATTR_FRAME_SIZE`), but no spill counts, and its
//! `.nv.shared.<kernel>` section size includes the 1 KB of shared memory the system reserves
//! per block on sm_90 only for some kernels (`cuobjdump -res-usage` shows `SHARED` as that
//! size), so static shared memory is not readable from it alone. ptxas states all of them.
//!
//! The format (ptxas of CUDA 12 and 13; the `Function properties` line is continued on a line
//! NVRTC prefixes with `ptxas         .`):
//!
//! ```text
//! ptxas info    : Compiling entry function 'k' for 'sm_90a'
//! ptxas info    : Function properties for k
//!     1040 bytes stack frame, 1044 bytes spill stores, 1204 bytes spill loads
//! ptxas info    : Used 32 registers, used 1 barriers, 1040 bytes cumulative stack size, 1200 bytes smem
//! ```
//!
//! A `Function properties` block also appears for each non-inlined device function; only the
//! entry's own counts. Items missing from the `Used` line are 0 (`bytes smem` is left out
//! without static shared memory).

/// What ptxas allocated for one kernel (an entry function) of a CUBIN.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KernelResources {
    /// The kernel's name in the module (mangled unless `extern "C"`).
    pub kernel: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of registers spilled to local memory (stores), per thread.
    pub spill_stores: u64,
    /// Bytes of spilled registers loaded back, per thread.
    pub spill_loads: u64,
    /// Local memory per thread: the kernel's stack frame (spills, local arrays, address-taken
    /// locals) and what the functions it calls need (ptxas's `cumulative stack size`);
    /// `cuobjdump -res-usage`'s `STACK`.
    pub local_bytes: u64,
    /// Static shared memory (`__shared__` arrays of fixed size), without dynamic shared
    /// memory and without the 1 KB the system reserves per block on sm_90.
    pub static_smem_bytes: u64,
    /// Named barriers the kernel uses (`bar.sync` ids, `__syncthreads` included).
    pub barriers: u32,
}

impl KernelResources {
    /// True when the kernel spills registers to local memory.
    pub fn spills(&self) -> bool {
        self.spill_stores > 0 || self.spill_loads > 0
    }
}

impl std::fmt::Display for KernelResources {
    /// `k: 32 registers, 1044 B spill stores, 1204 B spill loads, 1040 B local, 1200 B static smem, 1 barrier(s)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} registers, {} B spill stores, {} B spill loads, {} B local, {} B static smem, {} barrier(s)",
            self.kernel,
            self.registers,
            self.spill_stores,
            self.spill_loads,
            self.local_bytes,
            self.static_smem_bytes,
            self.barriers
        )
    }
}

/// The text of a ptxas report line without its `ptxas info    :` (or NVRTC's `ptxas .`)
/// prefix; `None` for other lines (warnings, errors, NVRTC's own messages).
fn report_text(line: &str) -> Option<&str> {
    let l = line.trim();
    let Some(rest) = l.strip_prefix("ptxas") else {
        // nvcc / ptxas print the continuation line indented, without a prefix.
        return l
            .contains("bytes stack frame")
            .then_some(l)
            .filter(|_| line.starts_with(char::is_whitespace));
    };
    let rest = rest.trim_start();
    if let Some(info) = rest.strip_prefix("info") {
        return Some(info.trim_start().strip_prefix(':')?.trim());
    }
    rest.strip_prefix('.').map(str::trim)
}

/// The first `'...'` of `s`.
fn quoted(s: &str) -> Option<&str> {
    let start = s.find('\'')? + 1;
    let len = s[start..].find('\'')?;
    Some(&s[start..start + len])
}

/// `N <what>` in a comma-separated list: N of the item that ends with `what`.
fn item(items: &str, what: &str) -> Option<u64> {
    items.split(',').find_map(|i| {
        let i = i.trim();
        let n = i.strip_suffix(what)?.trim();
        // "Used 32 registers": the number is the last word before `what`.
        n.rsplit(' ').next()?.parse().ok()
    })
}

/// Whether `line` belongs to ptxas's verbose report (and is kept out of a compile's log).
/// ptxas prints its numbered advisories as `info` lines too (`ptxas info : (C7515) Potential
/// Performance Loss: wgmma.mma_async instructions are serialized ...`): those stay in the log.
pub(super) fn is_report_line(line: &str) -> bool {
    let Some(r) = line.trim_start().strip_prefix("ptxas").map(str::trim_start) else {
        return false;
    };
    if r.starts_with('.') {
        return true;
    }
    r.strip_prefix("info").is_some_and(|rest| {
        !rest
            .trim_start()
            .trim_start_matches(':')
            .trim_start()
            .starts_with("(C")
    })
}

/// Every entry function ptxas's verbose report in `log` describes, in report order. Lines of
/// anything else (warnings, NVRTC's messages) are skipped, so the whole NVRTC log or ptxas's
/// stderr can be passed.
pub fn parse_ptxas_report(log: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    // The entry being reported (index into `out`), and whose `Function properties` follow.
    let mut entry: Option<usize> = None;
    let mut properties_of_entry = false;
    for line in log.lines() {
        let Some(l) = report_text(line) else {
            continue;
        };
        if let Some(rest) = l.strip_prefix("Compiling entry function") {
            let Some(name) = quoted(rest) else { continue };
            out.push(KernelResources {
                kernel: name.to_string(),
                ..KernelResources::default()
            });
            entry = Some(out.len() - 1);
            properties_of_entry = false;
        } else if let Some(rest) = l.strip_prefix("Function properties for") {
            let name = rest.trim().trim_matches('\'');
            properties_of_entry = entry
                .and_then(|e| out.get(e))
                .is_some_and(|k| k.kernel == name);
        } else if l.contains("bytes stack frame") {
            if let (true, Some(k)) = (properties_of_entry, entry.and_then(|e| out.get_mut(e))) {
                k.local_bytes = k.local_bytes.max(item(l, "bytes stack frame").unwrap_or(0));
                k.spill_stores = item(l, "bytes spill stores").unwrap_or(0);
                k.spill_loads = item(l, "bytes spill loads").unwrap_or(0);
            }
            properties_of_entry = false;
        } else if l.starts_with("Used ") {
            if let Some(k) = entry.and_then(|e| out.get_mut(e)) {
                k.registers = item(l, "registers")
                    .and_then(|r| u32::try_from(r).ok())
                    .unwrap_or(0);
                k.barriers = item(l, "barriers")
                    .and_then(|r| u32::try_from(r).ok())
                    .unwrap_or(0);
                let stack = item(l, "bytes cumulative stack size").unwrap_or(0);
                k.local_bytes = k.local_bytes.max(stack);
                k.static_smem_bytes = item(l, "bytes smem").unwrap_or(0);
            }
            entry = None;
        }
    }
    out
}

/// NVRTC's log split in two: the log without ptxas's verbose report (the warnings and errors
/// a user reads), and the kernels the report describes.
pub(super) fn split_log(raw: &str) -> (String, Vec<KernelResources>) {
    let resources = parse_ptxas_report(raw);
    let mut log = String::with_capacity(raw.len());
    for line in raw.lines().filter(|l| !is_report_line(l)) {
        log.push_str(line);
        log.push('\n');
    }
    if log.trim().is_empty() {
        log.clear();
    }
    (log, resources)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ptxas's numbered advisories are `info` lines (NVRTC 13.0, a wgmma under a branch, with
    /// and without `-v`): they stay in the log; the report's lines do not.
    #[test]
    fn performance_advisories_stay_in_the_log() {
        let raw = "\
ptxas info    : (C7519) warpgroup.arrive is injected in around line 77 by compiler to allow use of registers in GMMA in function 'k'
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'k'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 42 registers, used 0 barriers
ptxas info    : Compile time = 8.150 ms
";
        let (log, res) = split_log(raw);
        let kept: Vec<&str> = log.lines().collect();
        assert_eq!(kept.len(), 2, "{log}");
        assert!(
            kept[0].contains("(C7519)") && kept[1].contains("(C7515) Potential Performance Loss")
        );
        assert_eq!(res.len(), 1);
        assert_eq!((res[0].kernel.as_str(), res[0].registers), ("k", 42));
    }

    /// NVRTC 13.0's log of `tma-runtime/tests/nvrtc.rs`'s resource kernels (`-Xptxas -v`).
    const NVRTC_LOG: &str = "\
ptxas warning : For profile sm_90a adjusting per thread register count of 16 to lower bound of 24
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'plain' for 'sm_90a'
ptxas info    : Function properties for plain
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem
ptxas info    : Compile time = 8.114 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     160 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'spill' for 'sm_90a'
ptxas info    : Function properties for spill
ptxas         .     1040 bytes stack frame, 1044 bytes spill stores, 1204 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 1040 bytes cumulative stack size, 1200 bytes smem
ptxas info    : Compile time = 177.541 ms
ptxas info    : Compiling entry function '_Z2tkILi3EEvPf' for 'sm_90a'
ptxas info    : Function properties for _Z2tkILi3EEvPf
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 160 bytes cumulative stack size
";

    /// ptxas's own stderr (`ptxas -v`, as `tma compile` runs it): the continuation line is
    /// indented without a prefix.
    const PTXAS_STDERR: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spill' for 'sm_90a'
ptxas info    : Function properties for spill
    1040 bytes stack frame, 1044 bytes spill stores, 1204 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 1040 bytes cumulative stack size, 1200 bytes smem
";

    fn k(
        name: &str,
        regs: u32,
        st: u64,
        ld: u64,
        local: u64,
        smem: u64,
        bars: u32,
    ) -> KernelResources {
        KernelResources {
            kernel: name.into(),
            registers: regs,
            spill_stores: st,
            spill_loads: ld,
            local_bytes: local,
            static_smem_bytes: smem,
            barriers: bars,
        }
    }

    #[test]
    fn reads_every_entry_of_nvrtc_and_ptxas_reports() {
        assert_eq!(
            parse_ptxas_report(NVRTC_LOG),
            [
                k("plain", 10, 0, 0, 0, 256, 1),
                k("spill", 32, 1044, 1204, 1040, 1200, 1),
                // A callee's frame counts through the cumulative stack, not its properties.
                k("_Z2tkILi3EEvPf", 24, 0, 0, 160, 0, 0),
            ]
        );
        assert_eq!(
            parse_ptxas_report(PTXAS_STDERR),
            [k("spill", 32, 1044, 1204, 1040, 1200, 1)]
        );
        assert!(parse_ptxas_report("tma.cu(3): warning: x\n").is_empty());
    }

    #[test]
    fn the_report_leaves_the_log() {
        let (log, res) = split_log(NVRTC_LOG);
        assert_eq!(res.len(), 3);
        assert_eq!(
            log,
            "ptxas warning : For profile sm_90a adjusting per thread register count of 16 to lower bound of 24\n"
        );
        let (log, res) = split_log("ptxas info    : 0 bytes gmem\n");
        assert_eq!((log.as_str(), res.len()), ("", 0));
        let (log, _) = split_log("tma.cu(4): warning #177-D: x\n");
        assert_eq!(log, "tma.cu(4): warning #177-D: x\n");
        assert_eq!(
            k("spill", 32, 1044, 1204, 1040, 1200, 1).to_string(),
            "spill: 32 registers, 1044 B spill stores, 1204 B spill loads, 1040 B local, 1200 B static smem, 1 barrier(s)"
        );
    }
}
