//! Several tiles in one block's shared memory: [`TileSetCode`].

use super::*;
use crate::ident::{generated_clash, shared_generated_name, NameKind};
use crate::size::Size;

/// Several tiles laid out in one block's shared memory: `struct tma_<set>` with each member's
/// tile struct (as a member type), its `OFFSET_<member>` from the aligned base, `SMEM_BYTES`,
/// `SMEM_ALIGN`, `DYNAMIC_SMEM_BYTES`, and the macro `TMA_<SET>_PARAMS`, the kernel's
/// parameter list (`const __grid_constant__ CUtensorMap <member>_map, ..`). The layout is
/// the members' [`SmemLayout`]. The tiles' own helpers are not included (see
/// [`KernelSource::tile_set`]).
///
/// ```
/// use tma_core::{render::TileSetCode, validate, DType, Swizzle, TileSpec};
/// let q = validate(&TileSpec::new("q", DType::BF16, [4096, 64], [64, 64]).swizzle(Swizzle::B128))?;
/// let k = validate(&TileSpec::new("k", DType::BF16, [4096, 64], [64, 64]).swizzle(Swizzle::B128))?;
/// let set = TileSetCode::new("attn", &[("q", &q), ("k", &k)])?;
/// assert!(set.source().contains("static constexpr unsigned OFFSET_k = 8192u;"));
/// assert_eq!(set.params_macro(), "TMA_ATTN_PARAMS");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileSetCode {
    name: String,
    layout: SmemLayout,
    source: String,
}

impl TileSetCode {
    /// Renders set `name` of `members` (member name, tile), laid out in this order. Member
    /// names name the tile's type and offset in the struct and its map parameter
    /// (`<member>_map`): each a C identifier, no two alike.
    pub fn new(name: &str, members: &[(&str, &ValidSpec)]) -> Result<TileSetCode, RenderError> {
        if let Err(problem) = check_name(name) {
            return Err(RenderError::InvalidName {
                what: "tile set",
                name: name.to_string(),
                problem,
            });
        }
        if let Some(clash) = generated_clash(NameKind::TileSet, name) {
            return Err(RenderError::GeneratedName {
                what: "tile set",
                name: name.to_string(),
                clash,
            });
        }
        for (i, (member, _)) in members.iter().enumerate() {
            if let Err(problem) = check_name(member) {
                return Err(RenderError::InvalidName {
                    what: "tile set member",
                    name: member.to_string(),
                    problem,
                });
            }
            if let Some(clash) = generated_clash(NameKind::SetMember, member) {
                return Err(RenderError::GeneratedName {
                    what: "tile set member",
                    name: member.to_string(),
                    clash,
                });
            }
            let earlier = &members[..i];
            let taken = if earlier.iter().any(|(m, _)| m == member) {
                Some(format!("set `{name}` has two members of this name"))
            } else {
                earlier.iter().find_map(|(m, _)| {
                    shared_generated_name(NameKind::SetMember, m, member).map(|ident| {
                        format!("member `{m}` of set `{name}` gives the set a `{ident}` too")
                    })
                })
            };
            if let Some(by) = taken {
                return Err(RenderError::NameTaken {
                    what: "tile set member",
                    name: member.to_string(),
                    by,
                });
            }
        }
        let layout = SmemLayout::new(members.iter().map(|(_, v)| v.plan())).map_err(|o| {
            RenderError::TileSetOverflow {
                set: name.to_string(),
                member: members
                    .get(o.index)
                    .map_or_else(String::new, |(m, _)| m.to_string()),
            }
        })?;
        // One block's shared memory holds what the set's launch asks for (its rendered
        // DYNAMIC_SMEM_BYTES: the tiles and the base-alignment slack), on the smallest block of
        // the members' targets. The finding names the first member that does not fit.
        let smallest = members
            .iter()
            .map(|(_, v)| v.spec().target)
            .min_by_key(|t| t.max_smem_per_block());
        if let Some(target) = smallest {
            let limit = target.max_smem_per_block();
            let slack = layout.dynamic_smem_bytes() - layout.total_bytes;
            let past = members
                .iter()
                .zip(&layout.offsets)
                .find_map(|((member, v), &offset)| {
                    let end = Size::new(offset) + v.plan().footprint_bytes + slack;
                    (!end.is_below(limit + 1)).then(|| (member, end.get().unwrap_or(u64::MAX)))
                });
            if let Some((member, bytes)) = past {
                return Err(RenderError::TileSetTooLarge {
                    set: name.to_string(),
                    member: member.to_string(),
                    bytes,
                    limit,
                    target,
                });
            }
        }
        let rows: Vec<SetMember> = members
            .iter()
            .zip(&layout.offsets)
            .map(|((member, valid), offset)| {
                let plan = valid.plan();
                SetMember {
                    name: member.to_string(),
                    cuda: format!("tma_{}", valid.spec().name),
                    offset: *offset,
                    bytes: plan.footprint_bytes,
                    align: plan.align_bytes,
                    tx: plan.tx_bytes,
                }
            })
            .collect();
        let ctx = SetContext {
            name,
            cuda: format!("tma_{name}"),
            params_macro: params_macro(name),
            total: layout.total_bytes,
            align: layout.align_bytes,
            dynamic: layout.dynamic_smem_bytes(),
            members: rows,
        };
        let source = render("set.cuh.tera", &ctx)?;
        Ok(TileSetCode {
            name: name.to_string(),
            layout,
            source,
        })
    }

    /// The struct, its comment and the parameter macro.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The struct name: `tma_<name>`.
    pub fn cuda_name(&self) -> String {
        format!("tma_{}", self.name)
    }

    /// The parameter-list macro: `TMA_<NAME>_PARAMS` (the name upper-cased).
    pub fn params_macro(&self) -> String {
        params_macro(&self.name)
    }

    /// The layout the struct states.
    pub fn layout(&self) -> &SmemLayout {
        &self.layout
    }
}

/// A member of a tile set: its name, its tile's struct, where it sits and what it moves.
#[derive(Serialize)]
struct SetMember {
    name: String,
    cuda: String,
    offset: u64,
    bytes: u64,
    align: u64,
    tx: u64,
}

/// The context of `set.cuh.tera`.
#[derive(Serialize)]
struct SetContext<'a> {
    name: &'a str,
    cuda: String,
    params_macro: String,
    total: u64,
    align: u64,
    dynamic: u64,
    members: Vec<SetMember>,
}

pub(super) fn params_macro(set: &str) -> String {
    format!("TMA_{}_PARAMS", set.to_ascii_uppercase())
}

/// A tile set declared on a [`KernelSource`]: its name and, per member, the member name and
/// the index of its tile.
#[derive(Clone, Debug)]
pub(super) struct SetDecl {
    pub(super) name: String,
    pub(super) members: Vec<(String, usize)>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{validate, Arch, DType, TileSpec};

    /// `rows` rows of 1 KB.
    fn tile(name: &str, rows: u32, target: Arch) -> ValidSpec {
        validate(&TileSpec::new(name, DType::F32, [4096, 4096], [rows, 256]).target(target))
            .unwrap()
    }

    /// A set no block can hold is refused, naming the member that ends past the block, not
    /// rendered: two 128 KB tiles were `SMEM_BYTES = 262144u`, and 32769 of them wrapped the
    /// struct's `unsigned` constants (2^32 + 128 KB rendered past `u32`).
    #[test]
    fn a_set_larger_than_a_block_is_refused() {
        let (a, b) = (tile("a", 128, Arch::Sm90a), tile("b", 128, Arch::Sm90a));
        assert!(TileSetCode::new("one", &[("a", &a)]).is_ok());
        let e = TileSetCode::new("two", &[("a", &a), ("b", &b)]).unwrap_err();
        assert_eq!(
            e,
            RenderError::TileSetTooLarge {
                set: "two".into(),
                member: "b".into(),
                bytes: 2 * 131072 + 128,
                limit: 227 * 1024,
                target: Arch::Sm90a,
            }
        );
        // What the launch asks for counts, the base-alignment slack included: a 227 KB tile
        // (align 128) needs 227 KB + 128 B.
        let full = tile("full", 227, Arch::Sm90a);
        assert!(matches!(
            TileSetCode::new("full", &[("f", &full)]),
            Err(RenderError::TileSetTooLarge { bytes, .. }) if bytes == 227 * 1024 + 128
        ));
        assert!(TileSetCode::new("near", &[("n", &tile("n", 226, Arch::Sm90a))]).is_ok());
        // The smallest block of the members' targets: beside a 64 KB sm_120 tile, the 128 KB
        // one is past its 99 KB.
        let small = tile("s", 64, Arch::Sm120a);
        let e = TileSetCode::new("mixed", &[("a", &a), ("s", &small)]).unwrap_err();
        assert!(
            matches!(&e, RenderError::TileSetTooLarge { member, limit, .. } if member == "a" && *limit == 99 * 1024),
            "{e}"
        );
        assert!(e.to_string().contains("sm_120a"), "{e}");
        // KernelSource renders its sets through the same check.
        let source = KernelSource::new().tile_set("two", &[("a", &a), ("b", &b)]);
        assert!(matches!(
            source.build(),
            Err(RenderError::TileSetTooLarge { .. })
        ));
    }
}
