// A field must give its tile's run-time shape (`tma::TileArg`): the error is on its type.
#[derive(tma::TmaTiles)]
struct Attn {
    #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [128, 64], swizzle = 128, load)]
    q: f32,
}

fn main() {}
