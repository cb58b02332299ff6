//! Names that reach generated CUDA: tile names (`struct tma_<name>`) and dim names (comments
//! and, later, coordinate fields). Every such string must be a plain C identifier that no
//! C, C++ or CUDA compiler reads as anything else, so nothing a user writes can inject code
//! (a newline in a name would otherwise start a new line of CUDA).

/// Why a string is not usable as a name in generated CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameProblem {
    /// Empty.
    Empty,
    /// Not of the form `[A-Za-z_][A-Za-z0-9_]*`.
    NotIdentifier,
    /// A C / C++20 keyword or alternative token (`int`, `class`, `and`, ...).
    Keyword,
    /// Reserved to the implementation: contains `__`, or starts with `_` and an uppercase
    /// letter (C++ [lex.name]).
    Reserved,
    /// A CUDA built-in variable (`threadIdx`, `blockIdx`, `blockDim`, `gridDim`, `warpSize`).
    CudaBuiltin,
}

impl NameProblem {
    /// The rule in words, for findings.
    pub fn describe(self) -> &'static str {
        match self {
            NameProblem::Empty => "is empty",
            NameProblem::NotIdentifier => {
                "is not a C identifier ([A-Za-z_][A-Za-z0-9_]*, ASCII only)"
            }
            NameProblem::Keyword => "is a C/C++ keyword",
            NameProblem::Reserved => {
                "is reserved to the compiler (C++ reserves names containing `__` or starting with `_` and an uppercase letter)"
            }
            NameProblem::CudaBuiltin => "is a CUDA built-in variable",
        }
    }
}

/// C++20 keywords, alternative tokens, and the C keywords C++ lacks ([lex.key], [lex.digraph];
/// C11 6.4.1). Sorted, for the binary search.
const KEYWORDS: &[&str] = &[
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Bool",
    "_Complex",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "char8_t",
    "class",
    "co_await",
    "co_return",
    "co_yield",
    "compl",
    "concept",
    "const",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "final",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "import",
    "inline",
    "int",
    "long",
    "module",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "override",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
];

/// CUDA's built-in variables: a name that shadows one is legal C++ but confuses every reader.
const CUDA_BUILTINS: [&str; 5] = ["blockDim", "blockIdx", "gridDim", "threadIdx", "warpSize"];

/// Dim names a tile's generated CUDA cannot take, each with the generated name it would
/// collide with: a dim `<d>` gets a coordinate field `<d>` and the constants `BOX_<d>` and
/// `EXTENT_<d>` in the tile's struct, which already has `BOX_BYTES` and `BOX_DATA_BYTES`.
pub const RESERVED_DIM_NAMES: [(&str, &str); 2] =
    [("BYTES", "BOX_BYTES"), ("DATA_BYTES", "BOX_DATA_BYTES")];

/// The prefix of the generated code's own names (`tma_<tile>`, `tma_positional`, ...): a dim
/// name may not start with it.
pub const GENERATED_PREFIX: &str = "tma_";

/// Why a dim name (already a C identifier, see [`check_name`]) would collide with a name the
/// generated tile struct holds: `None` when it is free.
pub fn dim_name_collision(name: &str) -> Option<String> {
    if let Some((_, taken)) = RESERVED_DIM_NAMES.iter().find(|(n, _)| *n == name) {
        return Some(format!(
            "its constant `BOX_{name}` would collide with the tile's `{taken}`"
        ));
    }
    if name.starts_with(GENERATED_PREFIX) {
        return Some(format!(
            "names starting with `{GENERATED_PREFIX}` belong to the generated code (its coordinate struct has a member `tma_positional`)"
        ));
    }
    None
}

/// Checks one name that will appear in generated CUDA.
pub fn check_name(name: &str) -> Result<(), NameProblem> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(NameProblem::Empty);
    };
    if !(first.is_ascii_alphabetic() || first == '_')
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(NameProblem::NotIdentifier);
    }
    if KEYWORDS.binary_search(&name).is_ok() {
        return Err(NameProblem::Keyword);
    }
    let bytes = name.as_bytes();
    if name.contains("__") || (bytes[0] == b'_' && bytes.get(1).is_some_and(u8::is_ascii_uppercase))
    {
        return Err(NameProblem::Reserved);
    }
    if CUDA_BUILTINS.contains(&name) {
        return Err(NameProblem::CudaBuiltin);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_sorted_for_the_binary_search() {
        assert!(
            KEYWORDS.windows(2).all(|w| w[0] < w[1]),
            "KEYWORDS out of order"
        );
    }

    #[test]
    fn names() {
        for ok in ["a", "mpk_a", "H", "_x", "x_", "C8", "tma_tile"] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        let cases = [
            ("", NameProblem::Empty),
            ("a\n#error x", NameProblem::NotIdentifier),
            ("1a", NameProblem::NotIdentifier),
            ("a-b", NameProblem::NotIdentifier),
            ("naïve", NameProblem::NotIdentifier),
            ("a*/", NameProblem::NotIdentifier),
            ("int", NameProblem::Keyword),
            ("class", NameProblem::Keyword),
            ("and", NameProblem::Keyword),
            ("_Bool", NameProblem::Keyword),
            ("__x", NameProblem::Reserved),
            ("a__b", NameProblem::Reserved),
            ("_X", NameProblem::Reserved),
            ("threadIdx", NameProblem::CudaBuiltin),
        ];
        for (name, want) in cases {
            assert_eq!(check_name(name), Err(want), "{name:?}");
        }
    }

    #[test]
    fn dim_names_that_collide_with_generated_names() {
        for free in ["M", "K", "coords", "box", "BOX", "row", "d0", "tma"] {
            assert_eq!(dim_name_collision(free), None, "{free}");
        }
        for taken in ["BYTES", "DATA_BYTES", "tma_positional", "tma_x"] {
            assert!(dim_name_collision(taken).is_some(), "{taken}");
        }
    }
}
