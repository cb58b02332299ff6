//! The tera engine: the templates, parsed once per process, and small context helpers.

use super::*;

/// The template engine, parsed once per process: every tile declared with a macro renders
/// through it at expansion time, so parsing per call would cost every build.
pub(super) fn engine() -> Result<&'static Tera, RenderError> {
    static ENGINE: std::sync::OnceLock<Result<Tera, RenderError>> = std::sync::OnceLock::new();
    ENGINE
        .get_or_init(build_engine)
        .as_ref()
        .map_err(Clone::clone)
}

pub(super) fn build_engine() -> Result<Tera, RenderError> {
    let mut tera = Tera::new();
    // CUDA is not HTML: never escape.
    tera.autoescape_on(Vec::<&str>::new());
    tera.add_raw_templates(crate::templates::ALL)
        .map_err(|e| template_error("templates", &e))?;
    Ok(tera)
}

pub(super) fn template_error(template: &str, e: &tera::Error) -> RenderError {
    // tera's Display is short; walk the sources for the detail.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    RenderError::Template {
        template: template.to_string(),
        message,
    }
}

/// Renders `template` from its typed context: one `#[derive(Serialize)]` struct per template
/// (its fields are the template's variables), so a misspelt or missing variable is a compile
/// error here rather than a string key that silently renders nothing.
pub(super) fn render<C: Serialize>(template: &str, ctx: &C) -> Result<String, RenderError> {
    let ctx = Context::from_serialize(ctx).map_err(|e| template_error(template, &e))?;
    engine()?
        .render(template, &ctx)
        .map_err(|e| template_error(template, &e))
}

/// The context of a template that takes no variables.
#[derive(Serialize)]
pub(super) struct NoContext {}

/// Serializes `None` as `false`: what the templates test (`{% if wgmma %}`) for a part that
/// may be absent.
pub(super) fn or_false<T: Serialize, S: serde::Serializer>(
    value: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => v.serialize(s),
        None => s.serialize_bool(false),
    }
}

pub(super) fn list_text<T: std::fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}
