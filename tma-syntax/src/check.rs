//! Meaning: each tile's entries -> [`tma_core::TileSpec`] -> [`tma_core::validate()`] -> its
//! rendered CUDA helpers, every error at the token that caused it; for the derive, then
//! the struct's shared-memory layout. The checks are `tma_core`'s own: the same function the
//! runtime calls, run at expansion time. Everything that can fail happens here, so
//! expansion cannot.
//!
//! [`entries`] builds the spec from the entries (syntax-level errors); [`spans`] points
//! validation findings at their tokens.

pub mod entries;
pub mod im2col;
pub mod kernel;
pub mod pipeline;
pub mod spans;

use crate::errors::Errors;
use crate::parse::{TileDecl, TilesStruct};
use entries::TileInput;
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::Ident;
use tma_core::echo::shown;
use tma_core::render::{RenderError, TileCode, TileSetCode};
use tma_core::smem::SmemLayout;
use tma_core::{validate, Arch, ValidSpec};

/// A tile that passed every rule, with its rendered CUDA helpers.
pub struct Checked {
    pub valid: ValidSpec,
    /// Validation warnings, at their tokens.
    pub warnings: Vec<(Span, String)>,
    /// The flags given, in order.
    pub flags: Vec<Ident>,
    /// The helper's struct/namespace name, `tma_<name>`.
    pub cuda_name: String,
    pub cuda_source: String,
    /// Where `target = ..` was written, if it was.
    pub target: Option<Span>,
}

/// One `#[tma(..)]` field of a `#[derive(TmaTiles)]` struct that passed every rule.
pub struct CheckedField<'a> {
    pub ident: &'a Ident,
    pub ty: &'a syn::Type,
    pub tile: Checked,
    /// Byte offset of the tile in the struct's shared-memory layout.
    pub smem_offset: u64,
}

/// A `#[derive(TmaTiles)]` struct whose every tile passed, laid out in shared memory.
pub struct CheckedStruct<'a> {
    /// The `#[tma(..)]` fields, in field order.
    pub fields: Vec<CheckedField<'a>>,
    /// The set's name: the struct's in snake case (`struct tma_<set>` in CUDA).
    pub set_name: String,
    /// The rendered tile set (`struct tma_<set>`, `TMA_<SET>_PARAMS`).
    pub set: TileSetCode,
    /// Bytes from the base to the end of the last tile.
    pub smem_bytes: u64,
    /// The largest tile alignment: the base's.
    pub smem_align: u64,
}

/// `tma_Nd! { .. }`: the declaration's one tile.
pub fn tile_macro(rank: usize, mac: &'static str, decl: &TileDecl) -> syn::Result<Checked> {
    let mut errs = Errors::default();
    let input = TileInput {
        ident: &decl.ident,
        default_name: snake_case(&decl.ident.unraw().to_string()),
        dtype: Some(&decl.dtype),
        entries: &decl.entries,
        rank: Some((rank, mac)),
        flags: &[],
    };
    let checked = tile(input, 0, None, &mut errs);
    errs.finish(checked, decl.ident.span())
}

/// `#[derive(TmaTiles)]`: every field's tile (each field's errors reported, whatever the
/// other fields hold), then the struct's shared-memory layout.
pub fn derive(s: TilesStruct<'_>) -> syn::Result<CheckedStruct<'_>> {
    let mut errs = Errors::default();
    let struct_name = snake_case(&s.ident.unraw().to_string());
    let mut fields = Vec::new();
    for field in s.fields {
        if let Some(e) = field.error {
            errs.push_error(e);
        }
        let Some(entries) = &field.entries else {
            continue;
        };
        // The field names the tile in the set struct (`tma_<set>::<field>`) and its map
        // parameter (`<field>_map`).
        let field_name = field.ident.unraw().to_string();
        if let Err(problem) = tma_core::ident::check_name(&field_name) {
            errs.push(
                field.ident.span(),
                format!(
                    "the field name names the tile in generated CUDA (`tma_{}::{}`); it {}",
                    shown(&struct_name),
                    shown(&field_name),
                    problem.describe()
                ),
            );
        }
        let input = TileInput {
            ident: field.ident,
            default_name: format!("{struct_name}_{}", field.ident.unraw()),
            dtype: None,
            entries,
            rank: None,
            flags: &["load", "store"],
        };
        if let Some(tile) = tile(input, fields.len() as u32, None, &mut errs) {
            fields.push(CheckedField {
                ident: field.ident,
                ty: field.ty,
                tile,
                smem_offset: 0,
            });
        }
    }
    if fields.is_empty() && errs.is_empty() {
        errs.push(
            s.ident.span(),
            "`TmaTiles` found no tile: annotate fields with `#[tma(dtype = .., global = [..], boxed = [..])]`",
        );
    }
    if !errs.is_empty() {
        return errs.finish(None, s.ident.span());
    }
    let layout = SmemLayout::new(fields.iter().map(|f| f.tile.valid.plan())).map_err(|o| {
        let at = fields
            .get(o.index)
            .map_or(s.ident.span(), |f| f.ident.span());
        syn::Error::new(
            at,
            format!(
                "the tiles up to this field span {} bytes of shared memory: more than any GPU has",
                o.span
            ),
        )
    })?;
    for (field, offset) in fields.iter_mut().zip(&layout.offsets) {
        field.smem_offset = *offset;
    }
    let names: Vec<String> = fields.iter().map(|f| f.ident.unraw().to_string()).collect();
    let members: Vec<(&str, &ValidSpec)> = names
        .iter()
        .map(String::as_str)
        .zip(fields.iter().map(|f| &f.tile.valid))
        .collect();
    let set = TileSetCode::new(&struct_name, &members).map_err(|e| {
        // A member name the set struct already uses points at its field; the rest at the struct.
        let at = match &e {
            RenderError::NameTaken { name, .. }
            | RenderError::InvalidName { name, .. }
            | RenderError::GeneratedName { name, .. } => fields
                .iter()
                .find(|f| f.ident.unraw() == name.as_str())
                .map_or(s.ident.span(), |f| f.ident.span()),
            _ => s.ident.span(),
        };
        syn::Error::new(at, format!("the tile set's CUDA: {e}"))
    })?;
    Ok(CheckedStruct {
        fields,
        set_name: struct_name,
        set,
        smem_bytes: layout.total_bytes,
        smem_align: layout.align_bytes,
    })
}

/// Checks one tile: syntax-level errors first (unknown keys, bad values), then, if those
/// are clean, `tma_core::validate` with each finding at its token, then renders its CUDA
/// helpers as tile `tile_id` of a translation unit. A tile that names no `target` gets
/// `default_target` where one is given (a pipeline's tiles take the pipeline's). Appends this
/// tile's errors to `errs`; errors already there (another field's) do not stop the checks.
pub(crate) fn tile(
    input: TileInput<'_>,
    tile_id: u32,
    default_target: Option<Arch>,
    errs: &mut Errors,
) -> Option<Checked> {
    let ident = input.ident.span();
    let mut own = Errors::default();
    let read = entries::read(input, &mut own);
    errs.append(own);
    let mut read = read?;
    if let (Some(arch), None) = (default_target, read.spans.target) {
        read.spec.target = arch;
    }
    let valid = match validate(&read.spec) {
        Ok(valid) => valid,
        Err(e) => {
            spans::report(&e.errors, &read.spans, errs);
            return None;
        }
    };
    let code = match TileCode::new(&valid, tile_id) {
        Ok(code) => code,
        Err(e) => {
            errs.push(ident, format!("rendering the CUDA helpers failed: {e}"));
            return None;
        }
    };
    let warnings = valid
        .warnings()
        .iter()
        .map(|w| (spans::span_of(w, &read.spans), w.to_string()))
        .collect();
    Some(Checked {
        cuda_name: code.cuda_name(),
        cuda_source: code.source().to_owned(),
        valid,
        warnings,
        flags: read.flags,
        target: read.spans.target,
    })
}

/// `DeformValue` -> `deform_value`, `QKVTile` -> `qkv_tile`.
pub(crate) fn snake_case(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            let boundary = match prev {
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(|n| n.is_lowercase()),
                _ => false,
            };
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn snake() {
        assert_eq!(snake_case("DeformValue"), "deform_value");
        assert_eq!(snake_case("QKVTile"), "qkv_tile");
        assert_eq!(snake_case("A2B"), "a2_b");
        assert_eq!(snake_case("already_snake"), "already_snake");
        assert_eq!(snake_case("Attn"), "attn");
    }
}
