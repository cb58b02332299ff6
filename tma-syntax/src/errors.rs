//! The error accumulator every phase reports into, so all errors of a declaration are
//! shown together (serde_derive's `Ctxt`, darling's `Accumulator`).

use proc_macro2::Span;
use std::fmt::Display;

/// Every error found so far, combined in the order found.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, span: Span, message: impl Display) {
        self.push_error(syn::Error::new(span, message));
    }

    pub fn push_error(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    /// Moves `other`'s errors after these.
    pub fn append(&mut self, other: Errors) {
        if let Some(e) = other.0 {
            self.push_error(e);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// `value` if no error was found. A phase that produced no value reports why, so a
    /// missing value without an error is a bug; it is still refused, at `span`.
    pub fn finish<T>(self, value: Option<T>, span: Span) -> Result<T, syn::Error> {
        match (self.0, value) {
            (None, Some(v)) => Ok(v),
            (Some(e), _) => Err(e),
            (None, None) => Err(syn::Error::new(span, "tile declaration rejected")),
        }
    }
}
