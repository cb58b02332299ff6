//! The tera templates of the generated CUDA (`tma-core/templates/`), embedded: the renderer
//! parses them ([`crate::render`]) and [`crate::ident::generated`] reads from the same texts
//! every identifier and macro they emit, so a helper added to a template is reserved from
//! user names without anyone listing it.

/// Every template, by the name the renderer registers it under. A template the renderer uses
/// must be listed here (the engine is built from this list).
pub(crate) const ALL: [(&str, &str); 24] = [
    (
        "components.tera",
        include_str!("../templates/components.tera"),
    ),
    (
        "prelude.cuh.tera",
        include_str!("../templates/prelude.cuh.tera"),
    ),
    (
        "shapes.cuh.tera",
        include_str!("../templates/shapes.cuh.tera"),
    ),
    (
        "kernel.cuh.tera",
        include_str!("../templates/kernel.cuh.tera"),
    ),
    (
        "shape.cuh.tera",
        include_str!("../templates/shape.cuh.tera"),
    ),
    ("tile.cuh.tera", include_str!("../templates/tile.cuh.tera")),
    (
        "im2col.cuh.tera",
        include_str!("../templates/im2col.cuh.tera"),
    ),
    (
        "map_update.cuh.tera",
        include_str!("../templates/map_update.cuh.tera"),
    ),
    (
        "host_tile.cuh.tera",
        include_str!("../templates/host_tile.cuh.tera"),
    ),
    ("set.cuh.tera", include_str!("../templates/set.cuh.tera")),
    (
        "exercise.cu.tera",
        include_str!("../templates/exercise.cu.tera"),
    ),
    ("warp.cuh.tera", include_str!("../templates/warp.cuh.tera")),
    (
        "pipeline.cuh.tera",
        include_str!("../templates/pipeline.cuh.tera"),
    ),
    (
        "roles.cuh.tera",
        include_str!("../templates/roles.cuh.tera"),
    ),
    ("plan.cuh.tera", include_str!("../templates/plan.cuh.tera")),
    (
        "encode.cuh.tera",
        include_str!("../templates/encode.cuh.tera"),
    ),
    (
        "encode_tile.cuh.tera",
        include_str!("../templates/encode_tile.cuh.tera"),
    ),
    (
        "encode_im2col_tile.cuh.tera",
        include_str!("../templates/encode_im2col_tile.cuh.tera"),
    ),
    ("mpk.cuh.tera", include_str!("../templates/mpk.cuh.tera")),
    (
        "mpk_tile.cuh.tera",
        include_str!("../templates/mpk_tile.cuh.tera"),
    ),
    (
        "wgmma.cuh.tera",
        include_str!("../templates/wgmma.cuh.tera"),
    ),
    (
        "wgmma_ops.cuh.tera",
        include_str!("../templates/wgmma_ops.cuh.tera"),
    ),
    (
        "operand.cuh.tera",
        include_str!("../templates/operand.cuh.tera"),
    ),
    (
        "wgmma_exercise.cu.tera",
        include_str!("../templates/wgmma_exercise.cu.tera"),
    ),
];
