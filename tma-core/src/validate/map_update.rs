//! A device-side map update checked on the host ([`ValidSpec::map_update`]): the new base,
//! dims and strides a kernel's `T::update_global` / `T::update_shared` will write, held to
//! every rule the encode holds them to, plus the device update's own (its dims are 32-bit
//! operands). The fields it yields come from [`EncodeArgs`], the one place dims are reversed.

use super::collect::*;
use super::proof::{BoundSpec, ValidSpec};
use crate::encode_args::EncodeArgs;
use crate::error::{Field, SpecErrors};
use crate::rules::Rule;

/// The largest global dim a device-side update can write: `tensormap.replace.global_dim`
/// takes a `.b32` value, so 2^32 (which the host encode takes) does not fit.
pub const MAX_UPDATE_GLOBAL_DIM: u64 = u32::MAX as u64;

/// New fields for a tile's map, checked: what a kernel passes to `T::update_global` (its
/// `map_shape` and base) and what the map then holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MapUpdate {
    base: u64,
    bound: BoundSpec,
}

impl MapUpdate {
    /// The new global base address.
    pub fn base(&self) -> u64 {
        self.base
    }
    /// The spec bound to the new dims and strides (the host encode of the same arguments).
    pub fn bound(&self) -> &BoundSpec {
        &self.bound
    }
    /// The `map_shape` fields in declaration order: the dims (user order), then the outer
    /// dims' strides (elements, user order).
    pub fn shape_fields(&self) -> Vec<u64> {
        let rank = self.bound.global().len();
        let mut out = self.bound.global().to_vec();
        out.extend_from_slice(&self.bound.strides()[..rank - 1]);
        out
    }
    /// The map's fields after the update, as the driver takes them (TMA order, strides in
    /// bytes without dim 0).
    pub fn encode_args(&self) -> EncodeArgs {
        EncodeArgs::new(&self.bound)
    }
}

impl ValidSpec {
    /// Checks a device-side update of this tile's map to `base` with `dims` (user order) and
    /// the outer dims' `strides` (elements, user order: `rank - 1` of them, the innermost
    /// being 1), the `map_shape` of `T::update_global`. Every finding names its field: the
    /// encode's rules ([`ValidSpec::bind`], the base's alignment) and the update's own dim
    /// limit ([`MAX_UPDATE_GLOBAL_DIM`], [`Rule::GlobalDimRange`]).
    pub fn map_update(
        &self,
        base: u64,
        dims: &[u64],
        strides: &[u64],
    ) -> Result<MapUpdate, SpecErrors> {
        let spec = self.spec();
        let rank = spec.rank();
        let mut c = Collector::new();
        if strides.len() + 1 != rank {
            c.error(
                Field::List("strides"),
                strides.len(),
                Rule::RuntimeShapeMismatch,
                format!(
                    "a map update of a rank-{rank} tile takes the {} outer dims' strides (the innermost is 1)",
                    rank - 1
                ),
            );
            return Err(c.finish(spec));
        }
        for (d, &v) in dims.iter().enumerate() {
            if v > MAX_UPDATE_GLOBAL_DIM {
                c.error(
                    field_global(spec, d),
                    v,
                    Rule::GlobalDimRange,
                    "a device-side map update writes dims as 32-bit values (tensormap.replace.global_dim .b32): at most 2^32 - 1".into(),
                );
            }
        }
        let mut all = strides.to_vec();
        all.push(1);
        let bound = self.bind(dims, Some(&all));
        let address = self.check_base_address(base);
        let mut errors = c.finish(spec).errors;
        for e in [bound.as_ref().err(), address.as_ref().err()]
            .into_iter()
            .flatten()
        {
            errors.extend(e.errors.iter().cloned());
        }
        match bound {
            Ok(bound) if errors.is_empty() => Ok(MapUpdate { base, bound }),
            _ => Err(SpecErrors {
                tile: spec.name.clone(),
                errors,
            }),
        }
    }
}
