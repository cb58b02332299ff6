//! Proc macros of `tma`. The tile macros and the struct derive land here.
