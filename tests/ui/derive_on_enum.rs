#[derive(tma::TmaTiles)]
enum Attn {
    Q,
}

fn main() {}
