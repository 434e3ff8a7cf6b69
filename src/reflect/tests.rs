use super::*;

#[test]
fn header_checks() {
    assert!(matches!(
        words_from_bytes(&[1, 2, 3]),
        Err(Error::InvalidSpirv { .. })
    ));
    assert!(matches!(
        words_from_bytes(&[0; 20]),
        Err(Error::InvalidSpirv { reason }) if reason.contains("magic")
    ));
    assert!(matches!(
        words_from_bytes(&MAGIC.to_le_bytes()),
        Err(Error::InvalidSpirv { reason }) if reason.contains("header")
    ));
    // A reserved schema word that is not 0.
    assert!(matches!(
        check_header(&[MAGIC, 0x0001_0000, 0, 10, 1]),
        Err(Error::InvalidSpirv { reason }) if reason.contains("schema")
    ));
    // A header followed by an instruction with word count 0.
    let w = [MAGIC, 0x0001_0000, 0, 10, 0, 0x0000_0011];
    assert!(check_header(&w).is_err());
    // An instruction claiming 9 words with 1 left.
    let w = [MAGIC, 0x0001_0000, 0, 10, 0, 0x0009_0011];
    assert!(check_header(&w).is_err());
    // A header alone passes the header walk, but is no module.
    let w = [MAGIC, 0x0001_0000, 0, 10, 0];
    assert!(check_header(&w).is_ok());
    assert!(matches!(
        reflect(&w, None),
        Err(Error::InvalidSpirv { reason }) if reason.contains("OpMemoryModel")
    ));
    // With a memory model but no entry point.
    let w = [
        MAGIC,
        0x0001_0000,
        0,
        10,
        0,
        (3 << 16) | OP_MEMORY_MODEL,
        0,
        1,
    ];
    assert!(matches!(
        reflect(&w, None),
        Err(Error::InvalidSpirv { reason }) if reason.contains("no entry point")
    ));
}

#[test]
fn big_endian_modules_are_swapped() {
    let w = [MAGIC, 0x0001_0000, 0, 10, 0];
    let be: Vec<u8> = w.iter().flat_map(|x| x.to_be_bytes()).collect();
    assert_eq!(words_from_bytes(&be).unwrap(), w);
}

#[test]
fn builtin_workgroup_size_resolution() {
    // OpDecorate %9 BuiltIn WorkgroupSize; OpDecorate %5 SpecId 7;
    // %5 = OpSpecConstant %u 64; %6 = OpConstant %u 1;
    // %9 = OpSpecConstantComposite %v3 %5 %6 %6
    let w = vec![
        MAGIC,
        0x0001_0000,
        0,
        10,
        0,
        (4 << 16) | OP_DECORATE,
        9,
        DECORATION_BUILTIN,
        BUILTIN_WORKGROUP_SIZE,
        (4 << 16) | OP_DECORATE,
        5,
        DECORATION_SPEC_ID,
        7,
        (4 << 16) | OP_SPEC_CONSTANT,
        2,
        5,
        64,
        (4 << 16) | OP_CONSTANT,
        2,
        6,
        1,
        (6 << 16) | OP_SPEC_CONSTANT_COMPOSITE,
        3,
        9,
        5,
        6,
        6,
    ];
    assert_eq!(
        builtin_workgroup_size(&w),
        Some(([64, 1, 1], [Some(7), None, None]))
    );
    assert_eq!(builtin_workgroup_size(&w[..21]), None);
}

/// Header, memory model, `OpEntryPoint GLCompute %4 "main"`, and a
/// function %4 whose body is `extra` (between OpLabel and OpReturn).
fn module(extra: &[u32], close: bool) -> Vec<u32> {
    let mut w = vec![MAGIC, 0x0001_0000, 0, 20, 0];
    w.extend([(3 << 16) | OP_MEMORY_MODEL, 0, 1]);
    // "main\0" padded to one more word.
    w.extend([(5 << 16) | OP_ENTRY_POINT, 5, 4, 0x6e69_616d, 0]);
    w.extend([(5 << 16) | OP_FUNCTION, 1, 4, 0, 2]);
    w.extend([(2 << 16) | 248, 3]);
    w.extend_from_slice(extra);
    w.push((1 << 16) | 253);
    if close {
        w.push((1 << 16) | OP_FUNCTION_END);
    }
    w
}

#[test]
fn structure_catches_truncated_modules() {
    assert!(check_structure(&module(&[], true)).is_ok());
    let unclosed = check_structure(&module(&[], false));
    assert!(
        matches!(unclosed, Err(Error::InvalidSpirv { reason }) if reason.contains("not closed"))
    );
    // A call to a function the module lacks.
    let call = [(4 << 16) | OP_FUNCTION_CALL, 1, 8, 9];
    let r = check_structure(&module(&call, true));
    assert!(matches!(r, Err(Error::InvalidSpirv { reason }) if reason.contains("%9")));
    // Every prefix that cuts into the function is rejected.
    let whole = module(&[], true);
    for len in 5..whole.len() {
        let prefix = &whole[..len];
        assert!(
            check_header(prefix).is_err() || check_structure(prefix).is_err(),
            "prefix of {len} words"
        );
    }
    // Two memory models, or a stray OpFunctionEnd.
    let mut two = module(&[], true);
    two.extend([(3 << 16) | OP_MEMORY_MODEL, 0, 1]);
    assert!(check_structure(&two).is_err());
    let mut stray = module(&[], true);
    stray.push((1 << 16) | OP_FUNCTION_END);
    assert!(check_structure(&stray).is_err());
}

#[test]
fn spec_ops_become_plain_constants() {
    let mut w = vec![MAGIC, 0x0001_0000, 0, 20, 0];
    w.extend([(4 << 16) | OP_TYPE_INT, 1, 32, 0]);
    w.extend([(2 << 16) | OP_TYPE_BOOL, 2]);
    w.extend([(4 << 16) | 23, 3, 1, 3]); // OpTypeVector %3 %1 3
    w.extend([(3 << 16) | OP_TYPE_FLOAT, 6, 64]);
    // %5 = OpSpecConstantOp %1 CompositeExtract %9 0
    w.extend([(6 << 16) | OP_SPEC_CONSTANT_OP, 1, 5, 81, 9, 0]);
    // %7 = OpSpecConstantOp %2 ULessThan %5 %5
    w.extend([(6 << 16) | OP_SPEC_CONSTANT_OP, 2, 7, 176, 5, 5]);
    // %8 = OpSpecConstantOp %3 VectorShuffle %9 %9 0 1 2
    w.extend([(9 << 16) | OP_SPEC_CONSTANT_OP, 3, 8, 79, 9, 9, 0, 1, 2]);
    // %10 = OpSpecConstantOp %6 FNegate %11
    w.extend([(5 << 16) | OP_SPEC_CONSTANT_OP, 6, 10, 127, 11]);
    let out = without_spec_ops(&w).unwrap();
    assert!(check_header(&out).is_ok());
    let tail = &out[5 + 4 + 2 + 4 + 3..];
    assert_eq!(
        tail,
        [
            (4 << 16) | OP_CONSTANT,
            1,
            5,
            1,
            (3 << 16) | OP_CONSTANT_TRUE,
            2,
            7,
            (3 << 16) | OP_CONSTANT_NULL,
            3,
            8,
            (5 << 16) | OP_CONSTANT,
            6,
            10,
            1,
            0
        ]
    );
    assert_eq!(without_spec_ops(&w[..5 + 4]), None);
}

#[test]
fn coopmat2_modules_skip_the_old_validator_and_reflect_without_their_ops() {
    // Header, OpCapability Shader, OpCapability TensorAddressingNV,
    // OpMemoryModel, then OpTypeTensorLayoutNV %5 and an unknown
    // function-body opcode (5367, OpCooperativeMatrixLoadTensorNV).
    let w = vec![
        MAGIC,
        0x0001_0600,
        0,
        10,
        0,
        (2 << 16) | 17,
        1,
        (2 << 16) | 17,
        5439,
        (3 << 16) | 14,
        0,
        1,
        (4 << 16) | 5370,
        5,
        6,
        7,
        (8 << 16) | 5367,
        1,
        2,
        3,
        4,
        5,
        6,
        7,
    ];
    assert!(declares_unknown_to_validator(&w));
    assert!(!declares_unknown_to_validator(&w[..7]));
    let out = without_unknown_ops(&w).expect("unknown ops replaced");
    assert_eq!(&out[..12], &w[..12]);
    assert_eq!(&out[12..], &[(2 << 16) | 4472, 5]);
    // Nothing unknown: nothing to replace.
    assert!(without_unknown_ops(&w[..12]).is_none());
}
