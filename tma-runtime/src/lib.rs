//! Runtime of `tma`: finding CUDA, tensor maps, JIT, launch.
