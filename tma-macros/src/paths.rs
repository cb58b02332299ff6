//! The one path generated code names: `::tma::__private`, `#[doc(hidden)]` re-exports of
//! everything an expansion uses, so it works whatever the user imported; and the one shape of
//! a declared type, so a rejected declaration's stub derives what the accepted type would.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, Ident, Visibility};

/// `::tma::__private`.
pub fn private() -> TokenStream {
    quote!(::tma::__private)
}

/// The declared type: a unit struct with the declaration's attributes and visibility.
pub fn unit_struct(attrs: &[Attribute], vis: &Visibility, ident: &Ident) -> TokenStream {
    quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #vis struct #ident;
    }
}
