//! The tera engine: the templates, parsed once per process, and small context helpers.

use super::*;

pub(super) const PRELUDE_TEMPLATE: &str = include_str!("../../templates/prelude.cuh.tera");
pub(super) const SHAPES_TEMPLATE: &str = include_str!("../../templates/shapes.cuh.tera");
pub(super) const KERNEL_TEMPLATE: &str = include_str!("../../templates/kernel.cuh.tera");
pub(super) const COMPONENTS_TEMPLATE: &str = include_str!("../../templates/components.tera");
pub(super) const SHAPE_TEMPLATE: &str = include_str!("../../templates/shape.cuh.tera");
pub(super) const TILE_TEMPLATE: &str = include_str!("../../templates/tile.cuh.tera");
pub(super) const HOST_TILE_TEMPLATE: &str = include_str!("../../templates/host_tile.cuh.tera");
pub(super) const SET_TEMPLATE: &str = include_str!("../../templates/set.cuh.tera");
pub(super) const ENCODE_TEMPLATE: &str = include_str!("../../templates/encode.cuh.tera");
pub(super) const ENCODE_TILE_TEMPLATE: &str = include_str!("../../templates/encode_tile.cuh.tera");
pub(super) const MPK_TEMPLATE: &str = include_str!("../../templates/mpk.cuh.tera");
pub(super) const MPK_TILE_TEMPLATE: &str = include_str!("../../templates/mpk_tile.cuh.tera");
pub(super) const WGMMA_TEMPLATE: &str = include_str!("../../templates/wgmma.cuh.tera");
pub(super) const WGMMA_OPS_TEMPLATE: &str = include_str!("../../templates/wgmma_ops.cuh.tera");
pub(super) const WGMMA_EXERCISE_TEMPLATE: &str =
    include_str!("../../templates/wgmma_exercise.cu.tera");
pub(super) const OPERAND_TEMPLATE: &str = include_str!("../../templates/operand.cuh.tera");
pub(super) const EXERCISE_TEMPLATE: &str = include_str!("../../templates/exercise.cu.tera");
pub(super) const WARP_TEMPLATE: &str = include_str!("../../templates/warp.cuh.tera");
pub(super) const PIPELINE_TEMPLATE: &str = include_str!("../../templates/pipeline.cuh.tera");
pub(super) const ROLES_TEMPLATE: &str = include_str!("../../templates/roles.cuh.tera");
pub(super) const PLAN_TEMPLATE: &str = include_str!("../../templates/plan.cuh.tera");

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
    tera.add_raw_templates([
        ("components.tera", COMPONENTS_TEMPLATE),
        ("prelude.cuh.tera", PRELUDE_TEMPLATE),
        ("shapes.cuh.tera", SHAPES_TEMPLATE),
        ("kernel.cuh.tera", KERNEL_TEMPLATE),
        ("shape.cuh.tera", SHAPE_TEMPLATE),
        ("tile.cuh.tera", TILE_TEMPLATE),
        ("host_tile.cuh.tera", HOST_TILE_TEMPLATE),
        ("set.cuh.tera", SET_TEMPLATE),
        ("exercise.cu.tera", EXERCISE_TEMPLATE),
        ("warp.cuh.tera", WARP_TEMPLATE),
        ("pipeline.cuh.tera", PIPELINE_TEMPLATE),
        ("roles.cuh.tera", ROLES_TEMPLATE),
        ("plan.cuh.tera", PLAN_TEMPLATE),
        ("encode.cuh.tera", ENCODE_TEMPLATE),
        ("encode_tile.cuh.tera", ENCODE_TILE_TEMPLATE),
        ("mpk.cuh.tera", MPK_TEMPLATE),
        ("mpk_tile.cuh.tera", MPK_TILE_TEMPLATE),
        ("wgmma.cuh.tera", WGMMA_TEMPLATE),
        ("wgmma_ops.cuh.tera", WGMMA_OPS_TEMPLATE),
        ("operand.cuh.tera", OPERAND_TEMPLATE),
        ("wgmma_exercise.cu.tera", WGMMA_EXERCISE_TEMPLATE),
    ])
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
