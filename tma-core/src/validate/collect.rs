//! Collecting findings (every violation at once) and naming the field each is about.

use crate::error::{Field, Severity, SpecError, SpecErrors};
use crate::rules::Rule;
use crate::spec::TileSpec;

/// Collects findings so every violation is reported at once.
pub(super) struct Collector {
    pub(super) findings: Vec<SpecError>,
}

impl Collector {
    pub(super) fn new() -> Self {
        Collector {
            findings: Vec::new(),
        }
    }
    pub(super) fn push(
        &mut self,
        severity: Severity,
        field: Field,
        value: impl ToString,
        rule: Rule,
        message: String,
    ) {
        self.findings.push(SpecError {
            field,
            // A huge name or value is cut: findings repeat it in messages.
            value: crate::echo::shown(&value.to_string()),
            rule,
            message,
            severity,
        });
    }
    pub(super) fn error(
        &mut self,
        field: Field,
        value: impl ToString,
        rule: Rule,
        message: String,
    ) {
        self.push(Severity::Error, field, value, rule, message);
    }
    pub(super) fn warning(
        &mut self,
        field: Field,
        value: impl ToString,
        rule: Rule,
        message: String,
    ) {
        self.push(Severity::Warning, field, value, rule, message);
    }
    pub(super) fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
    pub(super) fn split(self) -> (Vec<SpecError>, Vec<SpecError>) {
        self.findings
            .into_iter()
            .partition(|f| f.severity == Severity::Error)
    }
    pub(super) fn finish(self, spec: &TileSpec) -> SpecErrors {
        SpecErrors {
            tile: crate::echo::shown(&spec.name),
            errors: self.split().0,
        }
    }
    /// [`Collector::into_result`] for a tile known by its name only.
    pub(super) fn into_result_named(self, tile: &str) -> Result<(), SpecErrors> {
        let errors = self.split().0;
        if errors.is_empty() {
            Ok(())
        } else {
            Err(SpecErrors {
                tile: crate::echo::shown(tile),
                errors,
            })
        }
    }
    pub(super) fn into_result(self, spec: &TileSpec) -> Result<(), SpecErrors> {
        let errs = self.finish(spec);
        if errs.errors.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

pub(super) fn name_of(spec: &TileSpec, d: usize) -> Option<String> {
    spec.dim_name(d).map(str::to_owned)
}
pub(super) fn field_global(spec: &TileSpec, d: usize) -> Field {
    Field::Global {
        dim: d,
        name: name_of(spec, d),
    }
}
pub(super) fn field_stride(spec: &TileSpec, d: usize) -> Field {
    Field::Stride {
        dim: d,
        name: name_of(spec, d),
    }
}
pub(super) fn field_box(spec: &TileSpec, d: usize) -> Field {
    Field::Box {
        dim: d,
        name: name_of(spec, d),
    }
}
pub(super) fn field_estride(spec: &TileSpec, d: usize) -> Field {
    Field::ElementStride {
        dim: d,
        name: name_of(spec, d),
    }
}
pub(super) fn field_repeat(spec: &TileSpec, d: usize) -> Field {
    Field::Repeat {
        dim: d,
        name: name_of(spec, d),
    }
}
