//! Loading compiled modules into a context and launching kernels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaModule;

/// Loaded modules per (cache key, context), so one compile loads once per context.
#[derive(Default)]
pub(crate) struct ModuleCache {
    #[allow(dead_code)]
    pub(crate) map: Mutex<HashMap<(String, usize), Arc<CudaModule>>>,
}
