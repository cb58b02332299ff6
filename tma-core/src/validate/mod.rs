//! Validation: every TMA rule, every violation at once. Only a [`ValidSpec`] can be
//! rendered; only a [`BoundSpec`] (a valid spec with concrete global dims and strides)
//! can be laid out, encoded or modelled.

mod collect;
mod global_rules;
mod im2col;
mod map_update;
mod operand_rules;
mod proof;
mod static_rules;

pub use global_rules::dense_strides;
pub use im2col::{validate_im2col, BoundIm2col, ValidIm2col};
pub use map_update::{MapUpdate, MAX_UPDATE_GLOBAL_DIM};
pub use proof::{BoundSpec, ValidSpec};

use collect::Collector;
use global_rules::{check_global, dense_overflow};
use static_rules::{check_plan, check_shape_lists, check_static};

use crate::error::{Field, SpecErrors};
use crate::rules::Rule;
use crate::spec::TileSpec;

/// Checks every rule on `spec`. Global dims/strides are checked when static; run-time
/// ones are checked by [`ValidSpec::bind`] with the same code.
pub fn validate(spec: &TileSpec) -> Result<ValidSpec, SpecErrors> {
    let mut c = Collector::new();
    if !check_shape_lists(spec, &mut c) {
        return Err(c.finish(spec));
    }
    check_static(spec, &mut c);
    let plan = crate::smem::plan(spec);
    check_plan(spec, &plan, &mut c);
    operand_rules::check_operand(spec, &mut c);
    let all_static = spec.global.iter().all(|e| e.get().is_some())
        && spec
            .strides
            .as_ref()
            .is_none_or(|s| s.iter().all(|e| e.get().is_some()));
    let mut global_warnings = Vec::new();
    if all_static {
        let global: Vec<u64> = spec.global.iter().filter_map(|e| e.get()).collect();
        let mut g = Collector::new();
        let strides: Option<Vec<u64>> = match &spec.strides {
            Some(s) => Some(s.iter().filter_map(|e| e.get()).collect()),
            None => dense_strides(&global, spec.inner_unit_elements()),
        };
        match strides {
            Some(strides) => {
                check_global(spec, &global, &strides, &mut g);
            }
            None => dense_overflow(spec, &global, &mut g),
        }
        let (errs, warns) = g.split();
        c.findings.extend(errs);
        global_warnings = warns;
    }
    let fitted = plan.fit();
    if fitted.is_none() && !c.has_errors() {
        // Every size above is bounded by a limit checked in `check_plan`; this is a
        // safety net, not a finding anyone should meet.
        c.error(
            Field::SmemFootprint,
            "?",
            Rule::SizeOverflow,
            "a shared-memory size of one call does not fit in 64 bits".into(),
        );
    }
    let (errors, mut warnings) = c.split();
    match fitted {
        Some(plan) if errors.is_empty() => {
            warnings.extend(global_warnings);
            Ok(ValidSpec {
                spec: spec.clone(),
                plan,
                warnings,
                im2col: None,
            })
        }
        _ => Err(SpecErrors {
            tile: spec.name.clone(),
            errors,
        }),
    }
}
