//! The one path generated code names: `::tma::__private`, `#[doc(hidden)]` re-exports of
//! everything an expansion uses, so it works whatever the user imported.

use proc_macro2::TokenStream;
use quote::quote;

/// `::tma::__private`.
pub fn private() -> TokenStream {
    quote!(::tma::__private)
}
