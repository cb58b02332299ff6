//! The baseline: cuBLAS through cudarc's bindings (loaded at run time), on the same device
//! buffers. cudarc panics when libcublas or one of its symbols is missing; [`Cublas::new`]
//! probes both first and returns [`CublasError`] instead.

use std::ffi::c_void;
use std::fmt;

use cudarc::cublas::{result, sys};
use cudarc::driver::CudaStream;

use crate::kernel::{In, Out};

/// Why the baseline cannot run.
#[derive(Debug)]
pub enum CublasError {
    /// No libcublas could be loaded (cudarc's candidate names, e.g. libcublas.so.13).
    Missing,
    /// libcublas loaded but lacks a symbol this baseline calls.
    MissingSymbol(&'static str),
    /// A cuBLAS call failed.
    Call(&'static str, String),
}

impl fmt::Display for CublasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CublasError::Missing => write!(
                f,
                "libcublas could not be loaded (cudarc looks for libcublas.so, libcublas.so.13, ...): install the CUDA 13 cuBLAS library or add its directory to LD_LIBRARY_PATH"
            ),
            CublasError::MissingSymbol(s) => write!(f, "libcublas has no symbol {s}: a cuBLAS of CUDA 12 or 13 is needed"),
            CublasError::Call(call, status) => write!(f, "{call} failed: {status}"),
        }
    }
}

impl std::error::Error for CublasError {}

/// The symbols [`Cublas`] calls (cudarc panics on a missing one).
const SYMBOLS: [&str; 4] = [
    "cublasCreate_v2",
    "cublasSetStream_v2",
    "cublasGemmEx",
    "cublasDestroy_v2",
];

/// A cuBLAS handle bound to one stream.
pub struct Cublas {
    handle: sys::cublasHandle_t,
}

fn data_type(d: tma::DType) -> sys::cudaDataType {
    match d {
        tma::DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        tma::DType::F16 => sys::cudaDataType::CUDA_R_16F,
        _ => sys::cudaDataType::CUDA_R_32F,
    }
}

impl Cublas {
    /// Loads libcublas and finds every symbol [`Cublas`] calls (no GPU needed): after `Ok`,
    /// cudarc's cuBLAS calls cannot panic for a missing library or symbol.
    pub fn available() -> Result<(), CublasError> {
        // SAFETY: only tries to load the library (dlopen), calls nothing in it.
        if !unsafe { sys::is_culib_present() } {
            return Err(CublasError::Missing);
        }
        for s in SYMBOLS {
            // SAFETY: the library is present (checked above, so culib() does not panic); only
            // the symbol's address is looked up.
            unsafe { sys::culib().get::<*const c_void>(s.as_bytes()) }
                .map_err(|_| CublasError::MissingSymbol(s))?;
        }
        Ok(())
    }

    pub fn new(stream: &CudaStream) -> Result<Cublas, CublasError> {
        Cublas::available()?;
        let handle = result::create_handle()
            .map_err(|e| CublasError::Call("cublasCreate", format!("{:?}", e.0)))?;
        let c = Cublas { handle };
        // SAFETY: a live handle and the stream's live CUstream (the same object as cudaStream_t).
        unsafe { result::set_stream(c.handle, stream.cu_stream() as sys::cudaStream_t) }
            .map_err(|e| CublasError::Call("cublasSetStream", format!("{:?}", e.0)))?;
        Ok(c)
    }

    /// D[M][N] = A[M][K] * B[N][K]^T, row-major, fp32 accumulation: cuBLAS's column-major
    /// D^T = op_T(B) * A (N x M, ld N), with A and B read as K x M and K x N (ld K).
    ///
    /// # Safety
    /// `a`, `b`, `d` are device addresses of M x K, N x K and M x N elements of the given types.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm(
        &self,
        m: usize,
        n: usize,
        k: usize,
        input: In,
        out: Out,
        a: u64,
        b: u64,
        d: u64,
    ) -> Result<(), CublasError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let t = data_type(input.dtype());
        // SAFETY: the caller's pointers and sizes; alpha and beta are host f32 (compute 32F).
        unsafe {
            result::gemm_ex(
                self.handle,
                sys::cublasOperation_t::CUBLAS_OP_T,
                sys::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                (&alpha as *const f32).cast(),
                b as *const c_void,
                t,
                k as i32,
                a as *const c_void,
                t,
                k as i32,
                (&beta as *const f32).cast(),
                d as *mut c_void,
                data_type(out.dtype()),
                n as i32,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| CublasError::Call("cublasGemmEx", format!("{:?}", e.0)))
    }

    /// The weight gradient dW[N][K] = dY[T][N]^T * X[T][K], row-major, fp32 accumulation
    /// (examples/08-grouped-gemm's reference): cuBLAS's column-major dW^T (K x N, ld K) =
    /// X (read as K x T, ld K) * op_T(dY) (dY read as N x T, ld N).
    ///
    /// # Safety
    /// `dy`, `x`, `dw` are device addresses of T x N, T x K and N x K elements of the given types.
    #[allow(clippy::too_many_arguments, dead_code)]
    pub unsafe fn wgrad(
        &self,
        t: usize,
        n: usize,
        k: usize,
        input: In,
        out: Out,
        dy: u64,
        x: u64,
        dw: u64,
    ) -> Result<(), CublasError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ty = data_type(input.dtype());
        // SAFETY: the caller's pointers and sizes; alpha and beta are host f32 (compute 32F).
        unsafe {
            result::gemm_ex(
                self.handle,
                sys::cublasOperation_t::CUBLAS_OP_N,
                sys::cublasOperation_t::CUBLAS_OP_T,
                k as i32,
                n as i32,
                t as i32,
                (&alpha as *const f32).cast(),
                x as *const c_void,
                ty,
                k as i32,
                dy as *const c_void,
                ty,
                n as i32,
                (&beta as *const f32).cast(),
                dw as *mut c_void,
                data_type(out.dtype()),
                k as i32,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| CublasError::Call("cublasGemmEx", format!("{:?}", e.0)))
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: created in new(), destroyed once.
        let _ = unsafe { result::destroy_handle(self.handle) };
    }
}
