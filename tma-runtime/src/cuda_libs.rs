//! Finding and loading the CUDA libraries before cudarc touches them.
//!
//! cudarc (with `dynamic-loading`) panics when it cannot `dlopen` libcuda or libnvrtc, and it
//! only tries bare library names (`libnvrtc.so`, `libnvrtc.so.13`, ...). This module searches
//! first, in this order, and returns [`Error::CudaLibraryMissing`] naming every place tried:
//!
//! 1. `TMA_NVRTC_PATH` / `TMA_LIBCUDA_PATH`: an explicit file (or a directory holding it).
//!    When set, nothing else is tried: a wrong explicit path is an error, not a silent fallback.
//! 2. Each directory of `LD_LIBRARY_PATH`, `CUDA_HOME`/`CUDA_PATH` (`lib64`, `lib`), joined
//!    with each name cudarc would try ([`cudarc::get_lib_name_candidates`]).
//! 3. The bare names, through the system loader (ld.so.cache, `/usr/lib`, ...).
//!
//! The library found stays loaded for the life of the process. The dynamic loader then hands
//! cudarc the same library when it asks for it by its soname (`libnvrtc.so.13`), and we check
//! that cudarc's own search lands on it ([`Error::CudaLibraryShadowed`] otherwise, for NVRTC;
//! any libcuda serves, which lets profilers interpose theirs).
//! NVRTC 13 `dlopen`s `libnvrtc-builtins.so.13.0` by bare name when it compiles; it is
//! preloaded from the directory libnvrtc came from, so `LD_LIBRARY_PATH` need not name it.

use std::ffi::{c_int, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tma_core::Arch;

use crate::error::Error;

/// Env var: the explicit path of libnvrtc (file, or directory holding it).
pub const ENV_NVRTC_PATH: &str = "TMA_NVRTC_PATH";
/// Env var: the explicit path of libcuda (file, or directory holding it).
pub const ENV_LIBCUDA_PATH: &str = "TMA_LIBCUDA_PATH";

/// The environment the search reads, as a value so tests can pass their own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibEnv {
    /// `TMA_NVRTC_PATH`.
    pub nvrtc_path: Option<OsString>,
    /// `TMA_LIBCUDA_PATH`.
    pub libcuda_path: Option<OsString>,
    /// `LD_LIBRARY_PATH`.
    pub ld_library_path: Option<OsString>,
    /// `CUDA_HOME`, then `CUDA_PATH`.
    pub cuda_home: Vec<OsString>,
}

impl LibEnv {
    /// The process environment.
    pub fn from_process() -> LibEnv {
        let get = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        LibEnv {
            nvrtc_path: get(ENV_NVRTC_PATH),
            libcuda_path: get(ENV_LIBCUDA_PATH),
            ld_library_path: get("LD_LIBRARY_PATH"),
            cuda_home: ["CUDA_HOME", "CUDA_PATH"]
                .iter()
                .filter_map(|k| get(k))
                .collect(),
        }
    }
}

/// Which CUDA library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaLib {
    /// The driver API, `libcuda.so.1` (comes with the NVIDIA driver).
    Driver,
    /// The runtime compiler, `libnvrtc.so.13` (CUDA toolkit or the `nvidia-cuda-nvrtc` wheel).
    Nvrtc,
}

impl CudaLib {
    /// The names cudarc tries for this library (stem `cuda` / `nvrtc`).
    fn cudarc_names(self) -> Vec<String> {
        let mut names = match self {
            CudaLib::Driver => {
                let mut v = cudarc::get_lib_name_candidates("cuda");
                v.extend(cudarc::get_lib_name_candidates("nvcuda"));
                v
            }
            CudaLib::Nvrtc => cudarc::get_lib_name_candidates("nvrtc"),
        };
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names
    }
    fn display(self) -> &'static str {
        match self {
            CudaLib::Driver => "libcuda",
            CudaLib::Nvrtc => "libnvrtc",
        }
    }
    fn env_var(self) -> &'static str {
        match self {
            CudaLib::Driver => ENV_LIBCUDA_PATH,
            CudaLib::Nvrtc => ENV_NVRTC_PATH,
        }
    }
    fn hint(self) -> String {
        match self {
            CudaLib::Driver => format!(
                "install the NVIDIA driver (libcuda.so.1) or set {ENV_LIBCUDA_PATH}; on a machine \
                 without a GPU, GPU work cannot run (compiling with NVRTC still works)"
            ),
            CudaLib::Nvrtc => format!(
                "set {ENV_NVRTC_PATH} to libnvrtc.so.13 (e.g. eval \"$(scripts/cuda-tools.sh)\", or \
                 `pip install nvidia-cuda-nvrtc==13.0.*` and point it at nvidia/cu13/lib/libnvrtc.so.13), \
                 or add its directory to LD_LIBRARY_PATH"
            ),
        }
    }
}

/// A library found and loaded (it stays loaded for the life of the process).
#[derive(Debug)]
pub struct LoadedLib {
    /// Where it was found: a full path, or a bare name resolved by the system loader.
    pub location: String,
    /// The directory it came from, when known.
    pub dir: Option<PathBuf>,
    lib: libloading::Library,
}

impl LoadedLib {
    /// A function symbol, or [`Error::MissingSymbol`].
    ///
    /// # Safety
    /// `F` must be the symbol's true C signature.
    unsafe fn symbol<F: Copy>(&self, name: &str) -> Result<F, Error> {
        // SAFETY: the caller promises `F` is the symbol's type; the library stays loaded
        // (it lives in a process-wide static or outlives every use here).
        let sym = unsafe { self.lib.get::<F>(name.as_bytes()) };
        sym.map(|s| *s).map_err(|e| Error::MissingSymbol {
            library: self.location.clone(),
            symbol: name.to_string(),
            reason: e.to_string(),
        })
    }
}

/// The places to try for `which`, in order. An explicit path replaces every other.
pub fn search_candidates(which: CudaLib, env: &LibEnv) -> Vec<PathBuf> {
    let names = which.cudarc_names();
    let explicit = match which {
        CudaLib::Driver => env.libcuda_path.as_ref(),
        CudaLib::Nvrtc => env.nvrtc_path.as_ref(),
    };
    if let Some(p) = explicit {
        let p = PathBuf::from(p);
        if p.is_dir() {
            return names.iter().map(|n| p.join(n)).collect();
        }
        return vec![p];
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(ld) = &env.ld_library_path {
        dirs.extend(std::env::split_paths(ld).filter(|d| !d.as_os_str().is_empty()));
    }
    for home in &env.cuda_home {
        let home = PathBuf::from(home);
        dirs.push(home.join("lib64"));
        dirs.push(home.join("lib"));
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for d in &dirs {
        for n in &names {
            out.push(d.join(n));
        }
    }
    // Bare names last: the system loader's own search.
    out.extend(names.iter().map(PathBuf::from));
    out
}

/// Loads the first candidate that opens. Files that do not exist are skipped quietly in the
/// searched list (noted as "absent") so the error stays readable.
pub fn locate(which: CudaLib, env: &LibEnv) -> Result<LoadedLib, Error> {
    let mut searched = Vec::new();
    for cand in search_candidates(which, env) {
        let bare = cand.components().count() == 1 && !cand.is_absolute();
        if !bare && !cand.exists() {
            searched.push(format!("{} (absent)", cand.display()));
            continue;
        }
        // SAFETY: loading a CUDA library runs its initialisers, which are sound to run
        // once per process; the same library cudarc would load.
        match unsafe { libloading::Library::new(&cand) } {
            Ok(lib) => {
                let dir = if bare {
                    None
                } else {
                    cand.parent().map(Path::to_path_buf)
                };
                return Ok(LoadedLib {
                    location: cand.display().to_string(),
                    dir,
                    lib,
                });
            }
            Err(e) => searched.push(format!("{} ({e})", cand.display())),
        }
    }
    let mut hint = which.hint();
    if which == CudaLib::Nvrtc && env.nvrtc_path.is_some()
        || which == CudaLib::Driver && env.libcuda_path.is_some()
    {
        hint = format!(
            "{} is set, so only it was tried; fix or unset it. {hint}",
            which.env_var()
        );
    }
    Err(Error::CudaLibraryMissing {
        library: which.display().to_string(),
        searched,
        hint,
    })
}

/// Checks that cudarc's own search (bare names, first that opens) lands on `ours`.
fn check_cudarc_agrees(which: CudaLib, ours: &LoadedLib) -> Result<(), Error> {
    use libloading::os::unix::Library as UnixLib;
    for name in which.cudarc_names() {
        // SAFETY: as in `locate`; this repeats exactly cudarc's dlopen of this name.
        let Ok(theirs) = (unsafe { UnixLib::new(&name) }) else {
            continue;
        };
        // SAFETY: same as above, for the path we already hold open (refcount bump only).
        let mine = unsafe { UnixLib::new(&ours.location) };
        let same = match mine {
            Ok(mine) => {
                let (a, b) = (mine.into_raw(), theirs.into_raw());
                // SAFETY: both handles came from dlopen just above; re-wrap to close them.
                drop(unsafe { (UnixLib::from_raw(a), UnixLib::from_raw(b)) });
                a == b
            }
            Err(_) => true, // bare name found by the system loader: it is cudarc's own.
        };
        // Profilers and sanitizers (ncu, compute-sanitizer) put their own libcuda ahead of
        // the driver's; any libcuda cudarc opens serves, so only NVRTC must be ours (its
        // version keys the compile cache).
        if same || which == CudaLib::Driver {
            return Ok(());
        }
        return Err(Error::CudaLibraryShadowed {
            library: which.display().to_string(),
            wanted: ours.location.clone(),
            cudarc_loads: name,
            hint: format!(
                "another {} is on the system loader path ahead of it; put its directory first in \
                 LD_LIBRARY_PATH (before the process starts) or remove the other copy",
                which.display()
            ),
        });
    }
    Err(Error::CudaLibraryMissing {
        library: which.display().to_string(),
        searched: which.cudarc_names(),
        hint: format!(
            "found `{}`, but cudarc opens libraries by name and none of its names resolve to it; \
             its soname differs: name the file libnvrtc.so.13 or add its directory to LD_LIBRARY_PATH",
            ours.location
        ),
    })
}

/// What [`nvrtc_available`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// Where libnvrtc was loaded from.
    pub location: String,
    /// `nvrtcVersion`: (major, minor).
    pub version: (i32, i32),
    /// Where the builtins library was preloaded from, if it was.
    pub builtins: Option<String>,
    /// `nvrtcGetSupportedArchs`: SM numbers (90 = sm_90) this NVRTC can emit CUBIN for.
    pub supported_archs: Vec<i32>,
}

impl NvrtcInfo {
    /// True when NVRTC can emit CUBIN for `arch` (else only PTX).
    pub fn supports_cubin(&self, arch: Arch) -> bool {
        self.supported_archs.contains(&sm_number(arch))
    }
}

/// `sm_90a` -> 90.
pub(crate) fn sm_number(arch: Arch) -> i32 {
    match arch {
        Arch::Sm90a => 90,
        Arch::Sm100a => 100,
        Arch::Sm120a => 120,
    }
}

/// What [`gpu_available`] found (device 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// Where libcuda was loaded from.
    pub libcuda: String,
    /// `cuDriverGetVersion`, e.g. 13000 for 13.0.
    pub driver_version: i32,
    /// Number of devices the driver sees.
    pub device_count: usize,
    /// Device 0's name.
    pub name: String,
    /// Device 0's compute capability.
    pub compute_capability: (i32, i32),
    /// The TMA arch of device 0 (`None`: no TMA before compute capability 9.0).
    pub arch: Option<Arch>,
}

/// libnvrtc, what it reported, and its builtins library (kept loaded).
type NvrtcLoad = (LoadedLib, NvrtcInfo, Option<LoadedLib>);

static NVRTC: OnceLock<Result<NvrtcLoad, Error>> = OnceLock::new();
static LIBCUDA: OnceLock<Result<LoadedLib, Error>> = OnceLock::new();

type NvrtcVersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type NvrtcNumArchsFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type NvrtcArchsFn = unsafe extern "C" fn(*mut c_int) -> c_int;

fn load_nvrtc(env: &LibEnv) -> Result<NvrtcLoad, Error> {
    let lib = locate(CudaLib::Nvrtc, env)?;
    // SAFETY: signatures from nvrtc.h (CUDA 13.0).
    let (version_fn, num_fn, archs_fn) = unsafe {
        (
            lib.symbol::<NvrtcVersionFn>("nvrtcVersion")?,
            lib.symbol::<NvrtcNumArchsFn>("nvrtcGetNumSupportedArchs")?,
            lib.symbol::<NvrtcArchsFn>("nvrtcGetSupportedArchs")?,
        )
    };
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers; `lib` is loaded.
    let r = unsafe { version_fn(&mut major, &mut minor) };
    if r != 0 {
        return Err(Error::Nvrtc {
            call: "nvrtcVersion",
            result: format!("nvrtcResult {r}"),
        });
    }
    let mut n: c_int = 0;
    // SAFETY: valid out-pointer.
    let mut supported_archs = if unsafe { num_fn(&mut n) } == 0 && n > 0 {
        vec![0; n as usize]
    } else {
        Vec::new()
    };
    // SAFETY: the vector holds exactly the number of entries NVRTC reported.
    if !supported_archs.is_empty() && unsafe { archs_fn(supported_archs.as_mut_ptr()) } != 0 {
        supported_archs.clear();
    }
    // The builtins library: NVRTC dlopens `libnvrtc-builtins.so.<major>.<minor>` by name.
    let builtins_name = format!("libnvrtc-builtins.so.{major}.{minor}");
    let mut tried = Vec::new();
    let mut builtins = None;
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(d) = &lib.dir {
        cands.push(d.join(&builtins_name));
    }
    cands.push(PathBuf::from(&builtins_name));
    for c in cands {
        // SAFETY: loading NVRTC's own builtins library, as NVRTC itself would.
        match unsafe { libloading::Library::new(&c) } {
            Ok(l) => {
                builtins = Some(LoadedLib {
                    location: c.display().to_string(),
                    dir: c.parent().map(Path::to_path_buf),
                    lib: l,
                });
                break;
            }
            Err(e) => tried.push(format!("{} ({e})", c.display())),
        }
    }
    if builtins.is_none() {
        return Err(Error::CudaLibraryMissing {
            library: builtins_name,
            searched: tried,
            hint: format!(
                "NVRTC {major}.{minor} at `{}` needs its builtins library beside it; install the \
                 complete nvidia-cuda-nvrtc wheel / toolkit",
                lib.location
            ),
        });
    }
    check_cudarc_agrees(CudaLib::Nvrtc, &lib)?;
    let info = NvrtcInfo {
        location: lib.location.clone(),
        version: (major, minor),
        builtins: builtins.as_ref().map(|b| b.location.clone()),
        supported_archs,
    };
    Ok((lib, info, builtins))
}

/// Finds, loads and checks NVRTC (no GPU needed). After `Ok`, cudarc's NVRTC calls cannot
/// panic for a missing library. The result is computed once per process.
pub fn nvrtc_available() -> Result<NvrtcInfo, Error> {
    NVRTC
        .get_or_init(|| load_nvrtc(&LibEnv::from_process()))
        .as_ref()
        .map(|(_, info, _)| info.clone())
        .map_err(Clone::clone)
}

/// Like [`nvrtc_available`] but with a given environment, loading afresh (for tests and
/// tools; the process-wide NVRTC cudarc uses is the one [`nvrtc_available`] loads).
pub fn nvrtc_available_with(env: &LibEnv) -> Result<NvrtcInfo, Error> {
    load_nvrtc(env).map(|(_, info, _)| info)
}

/// Finds and loads libcuda (no device needed); after `Ok`, cudarc's driver calls cannot
/// panic for a missing library.
pub fn libcuda_available() -> Result<String, Error> {
    libcuda().map(|l| l.location.clone())
}

fn libcuda() -> Result<&'static LoadedLib, Error> {
    LIBCUDA
        .get_or_init(|| {
            let lib = locate(CudaLib::Driver, &LibEnv::from_process())?;
            check_cudarc_agrees(CudaLib::Driver, &lib)?;
            Ok(lib)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Checks that libcuda exports `symbol`, so that cudarc's binding of it (which panics on a
/// missing symbol when it first loads it) can be called: [`Error::MissingSymbol`] otherwise.
pub(crate) fn libcuda_has(symbol: &str) -> Result<(), Error> {
    // SAFETY: only the address is looked up, never called through this type.
    unsafe { libcuda()?.symbol::<*const std::ffi::c_void>(symbol) }.map(|_| ())
}

/// Finds libcuda, initialises the driver and describes device 0.
pub fn gpu_available() -> Result<GpuInfo, Error> {
    use cudarc::driver::{result, sys};
    let libcuda = libcuda_available()?;
    result::init().map_err(Error::driver("cuInit"))?;
    let mut driver_version: c_int = 0;
    // SAFETY: valid out-pointer; the driver is initialised.
    unsafe { sys::cuDriverGetVersion(&mut driver_version) }
        .result()
        .map_err(Error::driver("cuDriverGetVersion"))?;
    let count = result::device::get_count().map_err(Error::driver("cuDeviceGetCount"))?;
    if count < 1 {
        return Err(Error::NoDevice {
            ordinal: 0,
            count: 0,
        });
    }
    let dev = result::device::get(0).map_err(Error::driver("cuDeviceGet"))?;
    let name = result::device::get_name(dev).map_err(Error::driver("cuDeviceGetName"))?;
    use sys::CUdevice_attribute::*;
    // SAFETY: `dev` is a valid device handle from cuDeviceGet.
    let major =
        unsafe { result::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) }
            .map_err(Error::driver("cuDeviceGetAttribute"))?;
    // SAFETY: as above.
    let minor =
        unsafe { result::device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) }
            .map_err(Error::driver("cuDeviceGetAttribute"))?;
    Ok(GpuInfo {
        libcuda,
        driver_version,
        device_count: count as usize,
        name,
        compute_capability: (major, minor),
        arch: Arch::from_compute_capability(major, minor),
    })
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn explicit_bogus_nvrtc_path_is_a_structured_error() {
        let env = LibEnv {
            nvrtc_path: Some("/nonexistent/libnvrtc.so.13".into()),
            ..LibEnv::default()
        };
        match nvrtc_available_with(&env) {
            Err(Error::CudaLibraryMissing {
                library,
                searched,
                hint,
            }) => {
                assert_eq!(library, "libnvrtc");
                assert_eq!(
                    searched,
                    vec!["/nonexistent/libnvrtc.so.13 (absent)".to_string()]
                );
                assert!(hint.contains("TMA_NVRTC_PATH is set"), "{hint}");
            }
            other => panic!("expected CudaLibraryMissing, got {other:?}"),
        }
    }

    #[test]
    fn candidates_follow_ld_library_path_then_bare_names() {
        let env = LibEnv {
            ld_library_path: Some("/a:/b".into()),
            cuda_home: vec!["/cuda".into()],
            ..LibEnv::default()
        };
        let c = search_candidates(CudaLib::Nvrtc, &env);
        assert_eq!(c[0], PathBuf::from("/a/libnvrtc.so"));
        assert!(c.contains(&PathBuf::from("/b/libnvrtc.so.13")));
        assert!(c.contains(&PathBuf::from("/cuda/lib64/libnvrtc.so.13")));
        assert_eq!(c.last(), Some(&PathBuf::from("libnvrtc.so.1")));
        let explicit_dir = LibEnv {
            nvrtc_path: Some("/".into()),
            ..LibEnv::default()
        };
        assert!(search_candidates(CudaLib::Nvrtc, &explicit_dir)
            .iter()
            .all(|p| p.starts_with("/")));
    }

    #[test]
    fn missing_everything_lists_every_place() {
        let env = LibEnv {
            libcuda_path: Some("/nonexistent-dir-tma/".into()),
            ..LibEnv::default()
        };
        match locate(CudaLib::Driver, &env) {
            Err(e @ Error::CudaLibraryMissing { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("/nonexistent-dir-tma"), "{msg}");
                assert!(msg.contains("TMA_LIBCUDA_PATH"), "{msg}");
            }
            other => panic!("expected CudaLibraryMissing, got {other:?}"),
        }
    }
}
