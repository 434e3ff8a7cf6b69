//! SPIR-V from other toolchains: checked-in modules (tests/spirv/) as
//! glslang (Vulkan 1.0, storage blocks as BufferBlock), naga, DXC, Slang and
//! rust-gpu write them, each loaded, reflected and run. All compute
//! `y[i] = scale * x[i] + bias` over `arrayLength(y)` elements, with
//! (scale, bias) in a uniform buffer (binding 2) or in push constants.
//!
//! The glslang and naga modules are those tools' own output; the DXC, Slang
//! and rust-gpu ones are written by hand in those compilers' idioms
//! (none of them is packaged here). scripts/test_spirv.sh assembles them from
//! their `.spvasm` sources and sets each header's generator word to its
//! producer's, which the test checks against the SPIR-V registry's tool ids.

mod common;

use common::{assert_clean, gpu};
use vkcompute::{reflect_spirv, BindingKind, Device, Kernel};

/// Where the parameters go.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Params {
    /// A uniform buffer at binding 2.
    Uniform,
    /// An 8-byte push-constant block.
    PushConstants,
}

/// One checked-in module and what reflection must find in it.
struct Module {
    file: &'static str,
    bytes: &'static [u8],
    /// The tool id registered for its producer in the SPIR-V registry's
    /// generator list (spir-v.xml).
    tool: u32,
    /// The SPIR-V version in its header, as (major, minor).
    version: (u32, u32),
    entry: &'static str,
    /// Names of the bindings, in binding order.
    names: [&'static str; 2],
    params: Params,
}

const MODULES: [Module; 5] = [
    Module {
        file: "glslang_affine.spv",
        bytes: include_bytes!("spirv/glslang_affine.spv"),
        tool: 8, // Khronos Glslang Reference Front End
        version: (1, 0),
        entry: "main",
        // glslang names the blocks' instances, which are anonymous here.
        names: ["", ""],
        params: Params::Uniform,
    },
    Module {
        file: "naga_affine.spv",
        bytes: include_bytes!("spirv/naga_affine.spv"),
        tool: 28, // gfx-rs community Naga
        version: (1, 3),
        entry: "main",
        // naga's CLI writes no debug names by default.
        names: ["", ""],
        params: Params::Uniform,
    },
    Module {
        file: "dxc_affine.spv",
        bytes: include_bytes!("spirv/dxc_affine.spv"),
        tool: 14, // Google spiregg (DXC's SPIR-V back end)
        version: (1, 5),
        entry: "main",
        names: ["input", "output"],
        params: Params::Uniform,
    },
    Module {
        file: "slang_affine.spv",
        bytes: include_bytes!("spirv/slang_affine.spv"),
        tool: 40, // Khronos Slang Compiler
        version: (1, 5),
        entry: "main",
        names: ["input", "output"],
        params: Params::PushConstants,
    },
    Module {
        file: "rustgpu_affine.spv",
        bytes: include_bytes!("spirv/rustgpu_affine.spv"),
        tool: 27, // Embark Studios Rust GPU Compiler Backend
        version: (1, 5),
        entry: "main_cs",
        names: ["", ""],
        params: Params::PushConstants,
    },
];

/// The producer's tool id from header word 2. The registry puts it in the
/// high 16 bits (the low 16 are the tool's own version); naga writes its id
/// as the whole word, as Slang did before 2025, so a word with an empty
/// high half is read as the id itself.
fn tool_id(bytes: &[u8]) -> u32 {
    let word = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if word >> 16 == 0 {
        word
    } else {
        word >> 16
    }
}

#[test]
fn each_module_names_its_producer_in_the_header() {
    for m in &MODULES {
        assert_eq!(
            &m.bytes[..4],
            &0x0723_0203u32.to_le_bytes(),
            "{}: magic",
            m.file
        );
        assert_eq!(tool_id(m.bytes), m.tool, "{}: generator tool id", m.file);
        let version = u32::from_le_bytes(m.bytes[4..8].try_into().unwrap());
        assert_eq!(
            ((version >> 16) & 0xff, (version >> 8) & 0xff),
            m.version,
            "{}: SPIR-V version",
            m.file
        );
    }
}

#[test]
fn each_module_reflects_without_a_device() {
    for m in &MODULES {
        let r = reflect_spirv(m.bytes, Some(m.entry)).unwrap_or_else(|e| panic!("{}: {e}", m.file));
        assert_eq!(r.entry_point, m.entry, "{}", m.file);
        assert_eq!(r.workgroup_size, [64, 1, 1], "{}", m.file);
        let mut want = vec![
            (0, BindingKind::Storage, true),
            (1, BindingKind::Storage, false),
        ];
        if m.params == Params::Uniform {
            want.push((2, BindingKind::Uniform, true));
        }
        let got: Vec<_> = r
            .bindings
            .iter()
            .map(|b| (b.binding, b.kind, b.read_only))
            .collect();
        assert_eq!(got, want, "{}: bindings", m.file);
        for (b, name) in r.bindings.iter().zip(m.names) {
            let got = b.name.as_deref().unwrap_or("");
            assert_eq!(got, name, "{}: binding {} name", m.file, b.binding);
        }
        let push = match m.params {
            Params::Uniform => 0,
            Params::PushConstants => 8,
        };
        assert_eq!(r.push_constant_size, push, "{}: push constants", m.file);
    }
}

/// Runs `k` over `n` elements with 1024 invocations (the kernel's guard
/// stops the extra ones) and checks `y = 3x - 1`.
fn run_affine(gpu: &Device, m: &Module, k: &Kernel) {
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let xs = gpu.upload(&x).unwrap();
    let ys = gpu.upload(&vec![f32::NAN; n]).unwrap();
    let (scale, bias) = (3.0f32, -1.0f32);
    let uniform = gpu.upload(&[scale, bias]).unwrap();
    let mut pc = scale.to_le_bytes().to_vec();
    pc.extend_from_slice(&bias.to_le_bytes());
    let mut b = gpu.batch().unwrap();
    match m.params {
        Params::Uniform => b.run(k, &[&xs, &ys, &uniform], 1024),
        Params::PushConstants => b.run_with_push_constants(k, &[&xs, &ys], 1024, &pc),
    }
    .unwrap_or_else(|e| panic!("{}: {e}", m.file));
    b.submit().unwrap();
    let y = ys.download().unwrap();
    for (i, (got, x)) in y.iter().zip(&x).enumerate() {
        assert_eq!(*got, scale * x + bias, "{}: y[{i}]", m.file);
    }
}

#[test]
fn each_module_runs() {
    let gpu = gpu();
    for m in &MODULES {
        let k = Kernel::builder(&gpu)
            .spirv(m.bytes)
            .entry(m.entry)
            .label(m.file)
            .build()
            .unwrap_or_else(|e| panic!("{}: {e}", m.file));
        run_affine(&gpu, m, &k);
    }
    assert_clean(&gpu);
}

#[test]
fn rust_gpu_output_loads_as_the_docs_say() {
    // What the README shows for a spirv-builder build: the module's bytes
    // and its entry point's Rust name.
    let gpu = gpu();
    let bytes: &[u8] = include_bytes!("spirv/rustgpu_affine.spv");
    let k = Kernel::builder(&gpu)
        .spirv(bytes)
        .entry("main_cs")
        .build()
        .unwrap();
    assert_eq!(k.reflection().entry_point, "main_cs");
    // The module's only compute entry point is found without its name too.
    let same = Kernel::from_spirv(&gpu, bytes).unwrap();
    assert_eq!(same.reflection().entry_point, "main_cs");
    run_affine(&gpu, &MODULES[4], &same);
    assert_clean(&gpu);
}
