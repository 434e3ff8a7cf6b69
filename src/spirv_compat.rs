//! What other toolchains write that a driver or validator may refuse
//! although it means nothing to a kernel, removed before anything else
//! reads a module given as SPIR-V.
//!
//! - DXC's `-fspv-reflect` keeps HLSL semantics, resource types and counter
//!   buffers as decorations (`UserSemantic`, `UserTypeGOOGLE`,
//!   `CounterBuffer`) under the extensions `SPV_GOOGLE_hlsl_functionality1`,
//!   `SPV_GOOGLE_user_type` and `SPV_GOOGLE_decorate_string`. They exist for
//!   reflection tools only, yet a module declaring them needs the matching
//!   `VK_GOOGLE_*` device extensions, which many drivers (lavapipe among
//!   them) lack: the extensions and those decorations are dropped.
//! - `OpSource` names the source language, which has no semantics; releases
//!   of SPIRV-Tools (and of the validation layer, which embeds it) from
//!   before a language was registered refuse its number, as this system's
//!   do for Slang's (11). A language past WGSL (10), the last one every
//!   SPIRV-Tools of the Vulkan 1.3 era knows, is rewritten as Unknown (0).
//!
//! Nothing else changes: ids, the bound and every other instruction stay.
//! The input's header and instruction walk must already have been checked
//! ([`crate::reflect`]'s header check); a malformed module comes back
//! unchanged.

const OP_SOURCE: u32 = 3;
const OP_EXTENSION: u32 = 10;
const OP_DECORATE_ID: u32 = 332;
const OP_DECORATE_STRING: u32 = 5632;
const OP_MEMBER_DECORATE_STRING: u32 = 5633;

const DECORATION_COUNTER_BUFFER: u32 = 5634;
const DECORATION_USER_SEMANTIC: u32 = 5635;
const DECORATION_USER_TYPE: u32 = 5636;

/// The last source language every SPIRV-Tools of the Vulkan 1.3 era knows
/// (WGSL).
const LAST_KNOWN_SOURCE_LANGUAGE: u32 = 10;

/// Extensions that only carry reflection data.
const REFLECTION_EXTENSIONS: [&str; 3] = [
    "SPV_GOOGLE_hlsl_functionality1",
    "SPV_GOOGLE_user_type",
    "SPV_GOOGLE_decorate_string",
];

/// The string literal starting at `words[0]` (nul-terminated, packed four
/// bytes a word, little end first), if it is valid UTF-8.
fn literal(words: &[u32]) -> Option<String> {
    let mut bytes = Vec::new();
    for w in words {
        for b in w.to_le_bytes() {
            if b == 0 {
                return String::from_utf8(bytes).ok();
            }
            bytes.push(b);
        }
    }
    None
}

/// What to do with one instruction.
enum Action {
    Keep,
    Drop,
    /// Rewrite word `.0` of the instruction to `.1`.
    Set(usize, u32),
}

fn action(inst: &[u32]) -> Action {
    let decoration_at = |i: usize| inst.get(i).copied();
    match inst[0] & 0xffff {
        OP_EXTENSION => match literal(&inst[1..]) {
            Some(name) if REFLECTION_EXTENSIONS.contains(&name.as_str()) => Action::Drop,
            _ => Action::Keep,
        },
        OP_DECORATE_STRING | OP_DECORATE_ID
            if matches!(
                decoration_at(2),
                Some(DECORATION_COUNTER_BUFFER | DECORATION_USER_SEMANTIC | DECORATION_USER_TYPE)
            ) =>
        {
            Action::Drop
        }
        OP_MEMBER_DECORATE_STRING
            if matches!(
                decoration_at(3),
                Some(DECORATION_USER_SEMANTIC | DECORATION_USER_TYPE)
            ) =>
        {
            Action::Drop
        }
        OP_SOURCE if inst.len() >= 2 && inst[1] > LAST_KNOWN_SOURCE_LANGUAGE => Action::Set(1, 0),
        _ => Action::Keep,
    }
}

/// `words` without what the module documentation lists, or `None` when it
/// holds none of it (the common case: nothing is copied).
pub(crate) fn portable(words: &[u32]) -> Option<Vec<u32>> {
    let mut out: Option<Vec<u32>> = None;
    let mut i = 5;
    while i < words.len() {
        let count = ((words[i] >> 16) as usize).max(1);
        // A truncated module comes back unchanged.
        let inst = words.get(i..i + count)?;
        match action(inst) {
            Action::Keep => {
                if let Some(out) = &mut out {
                    out.extend_from_slice(inst);
                }
            }
            change => {
                let out = out.get_or_insert_with(|| words[..i].to_vec());
                if let Action::Set(at, value) = change {
                    out.extend_from_slice(inst);
                    let n = out.len();
                    out[n - count + at] = value;
                }
            }
        }
        i += count;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_words(s: &str) -> Vec<u32> {
        let mut bytes = s.as_bytes().to_vec();
        bytes.push(0);
        while bytes.len() % 4 != 0 {
            bytes.push(0);
        }
        bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn inst(op: u32, operands: &[u32]) -> Vec<u32> {
        let mut w = vec![((operands.len() as u32 + 1) << 16) | op];
        w.extend_from_slice(operands);
        w
    }

    const HEADER: [u32; 5] = [0x0723_0203, 0x0001_0500, 0x000e_0000, 20, 0];

    #[test]
    fn plain_modules_are_not_copied() {
        let mut w = HEADER.to_vec();
        w.extend(inst(17, &[1])); // OpCapability Shader
        w.extend(inst(
            OP_EXTENSION,
            &string_words("SPV_KHR_storage_buffer_storage_class"),
        ));
        w.extend(inst(OP_SOURCE, &[5, 600])); // HLSL
        w.extend(inst(71, &[3, 33, 0])); // OpDecorate %3 Binding 0
        assert_eq!(portable(&w), None);
    }

    #[test]
    fn reflection_decorations_and_extensions_go() {
        let keep_ext = inst(OP_EXTENSION, &string_words("SPV_KHR_vulkan_memory_model"));
        let binding = inst(71, &[3, 33, 0]);
        let counter_id = inst(OP_DECORATE_ID, &[3, DECORATION_COUNTER_BUFFER, 4]);
        let other_id = inst(OP_DECORATE_ID, &[3, 6363, 4]);
        let mut semantic = vec![3, DECORATION_USER_SEMANTIC];
        semantic.extend(string_words("SV_DispatchThreadID"));
        let mut member_type = vec![3, 0, DECORATION_USER_TYPE];
        member_type.extend(string_words("structuredbuffer:<float>"));
        let mut w = HEADER.to_vec();
        w.extend(inst(
            OP_EXTENSION,
            &string_words("SPV_GOOGLE_hlsl_functionality1"),
        ));
        w.extend(&keep_ext);
        w.extend(inst(OP_EXTENSION, &string_words("SPV_GOOGLE_user_type")));
        w.extend(inst(OP_DECORATE_STRING, &semantic));
        w.extend(&binding);
        w.extend(inst(OP_MEMBER_DECORATE_STRING, &member_type));
        w.extend(&counter_id);
        w.extend(&other_id);
        let mut want = HEADER.to_vec();
        want.extend(&keep_ext);
        want.extend(&binding);
        want.extend(&other_id);
        assert_eq!(portable(&w), Some(want));
    }

    #[test]
    fn late_source_languages_become_unknown() {
        let mut w = HEADER.to_vec();
        w.extend(inst(OP_SOURCE, &[11, 1])); // Slang 1
        let mut want = HEADER.to_vec();
        want.extend(inst(OP_SOURCE, &[0, 1]));
        assert_eq!(portable(&w), Some(want));
        let mut wgsl = HEADER.to_vec();
        wgsl.extend(inst(OP_SOURCE, &[10, 100]));
        assert_eq!(portable(&wgsl), None);
    }

    #[test]
    fn truncated_modules_come_back_unchanged() {
        let mut w = HEADER.to_vec();
        w.extend(inst(OP_SOURCE, &[11, 1]));
        w.push((9 << 16) | OP_EXTENSION);
        assert_eq!(portable(&w), None);
    }
}
