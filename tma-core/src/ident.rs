//! Names that reach generated CUDA: tile, dim, pipeline, member, warp roles, named barrier,
//! tile set, kernel plan, plan region and alias names. Every such string must be a plain C identifier that no C, C++ or
//! CUDA compiler reads as anything else ([`check_name`]), so nothing a user writes can inject
//! code (a newline in a name would otherwise start a new line of CUDA), and must not meet what
//! the generated code already calls by name ([`generated`], read from the templates).

pub mod generated;

pub use generated::{
    encode_param, generated_clash, generated_names, shared_generated_name, ClashHow,
    GeneratedClash, GeneratedName, NameKind,
};

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
    /// Starts or ends with `_`: the generated code joins names to its own with `_`
    /// (`tma_<name>`, `TMA_TILE_<name>_DEFINED`, `stride_<dim>`), which would make a name
    /// containing `__`.
    EdgeUnderscore,
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
            NameProblem::EdgeUnderscore => {
                "starts or ends with `_`: joined to the generated code's own names (`tma_<name>`, `TMA_TILE_<name>_DEFINED`) it would contain `__`, which C++ reserves"
            }
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
    if name.starts_with('_') || name.ends_with('_') {
        return Err(NameProblem::EdgeUnderscore);
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
        for ok in ["a", "mpk_a", "H", "x_1", "C8", "tma_tile"] {
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
            ("_x", NameProblem::EdgeUnderscore),
            ("x_", NameProblem::EdgeUnderscore),
            ("_", NameProblem::EdgeUnderscore),
        ];
        for (name, want) in cases {
            assert_eq!(check_name(name), Err(want), "{name:?}");
        }
    }
}
