//! Element types at record time: where a kernel's binding is a runtime
//! array of scalars or vectors and the buffer's element type is one the
//! crate can name (f32, F16, Bf16, f64, u8..u64, i8..i64 and arrays of 2
//! to 4 of them), a different scalar kind (float32, float16, bfloat16,
//! float64, signed or unsigned integer), or element sizes of which neither divides the other,
//! is a typed error naming the kernel, the binding and both types. Packed
//! reads (u8 data read as `uint` words, f32 data as `vec4`), user structs
//! on either side, and kernels marked raw pass.

mod common;
use common::*;

use vkcompute::bytemuck::{Pod, Zeroable};
use vkcompute::ops::{Bf16, F16};
use vkcompute::{Batch, Device, Error, GpuBuf, Kernel};

/// Declares one buffer of `ty` elements and touches it.
fn kernel_of(gpu: &Device, ty: &str) -> Kernel {
    let src = format!(
        r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B {{ {ty} data[]; }};
void main() {{ data[0] = data[1]; }}
"#
    );
    Kernel::builder(gpu)
        .glsl(&src)
        .label(&format!("{ty}[]"))
        .build()
        .unwrap()
}

/// Runs `k` over `buf` in a fresh batch (not submitted).
fn run(gpu: &Device, k: &Kernel, buf: &dyn GpuBuf) -> vkcompute::Result<()> {
    let mut b: Batch = gpu.batch().unwrap();
    b.run(k, &[buf], 1).map(|_| ())
}

/// The error of a refused binding; fails the test when it was accepted.
fn refused(r: vkcompute::Result<()>, what: &str) -> Error {
    match r {
        Ok(()) => panic!("{what}: accepted, expected an element-type error"),
        Err(e) => e,
    }
}

/// A user's element type: not one the crate names.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Particle {
    pos: [f32; 3],
    id: u32,
}

#[test]
fn a_different_scalar_kind_is_a_typed_error() {
    let gpu = gpu();
    let float = kernel_of(&gpu, "float");
    let uint = kernel_of(&gpu, "uint");
    let u = gpu.alloc::<u32>(8).unwrap();
    let i = gpu.alloc::<i32>(8).unwrap();
    let h = gpu.alloc::<F16>(8).unwrap();

    let e = refused(run(&gpu, &float, &u), "u32 on float[]");
    let msg = e.to_string();
    for part in ["float[]", "binding 0", "float", "u32"] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    match e {
        Error::ElementMismatch {
            kernel,
            binding,
            declared,
            buffer,
            detail,
        } => {
            assert_eq!(kernel, "float[]");
            assert_eq!(binding, 0);
            assert_eq!((declared.as_str(), buffer.as_str()), ("float", "u32"));
            assert!(detail.contains("scalar kinds"), "{detail}");
        }
        other => panic!("expected ElementMismatch, got {other}"),
    }
    let e = refused(run(&gpu, &uint, &i), "i32 on uint[]");
    assert!(e.to_string().contains("i32"), "{e}");
    let e = refused(run(&gpu, &float, &h), "F16 on float[]");
    assert!(e.to_string().contains("F16"), "{e}");
    // bfloat16 is its own kind: not float, not raw 16-bit words.
    let bf = gpu.alloc::<Bf16>(8).unwrap();
    for (k, what) in [(&float, "Bf16 on float[]"), (&uint, "Bf16 on uint[]")] {
        let e = refused(run(&gpu, k, &bf), what).to_string();
        assert!(e.contains("Bf16") && e.contains("bfloat16"), "{e}");
    }
    // Through a slice too.
    let s = u.slice(4..).unwrap();
    refused(run(&gpu, &float, &s), "u32 slice on float[]");
    assert_clean(&gpu);
}

#[test]
fn element_sizes_that_do_not_divide_are_a_typed_error() {
    let gpu = gpu();
    let vec4 = kernel_of(&gpu, "vec4");
    let v3 = gpu.alloc::<[f32; 3]>(8).unwrap();
    let e = refused(run(&gpu, &vec4, &v3), "[f32; 3] on vec4[]");
    assert!(
        matches!(&e, Error::ElementMismatch { declared, buffer, detail, .. }
            if declared == "vec4" && buffer == "[f32; 3]" && detail.contains("16 and 12")),
        "{e}"
    );
    assert_clean(&gpu);
}

#[test]
fn matching_packed_and_user_types_pass() {
    let gpu = gpu();
    let float = kernel_of(&gpu, "float");
    let vec4 = kernel_of(&gpu, "vec4");
    let uint = kernel_of(&gpu, "uint");
    let int = kernel_of(&gpu, "int");
    let f = gpu.alloc::<f32>(16).unwrap();
    let f4 = gpu.alloc::<[f32; 4]>(4).unwrap();
    let bytes = gpu.alloc::<u8>(64).unwrap();
    let halves = gpu.alloc::<u16>(32).unwrap();
    let u2 = gpu.alloc::<[u32; 2]>(8).unwrap();
    let i = gpu.alloc::<i32>(16).unwrap();
    let parts = gpu.alloc::<Particle>(4).unwrap();
    run(&gpu, &float, &f).unwrap();
    run(&gpu, &float, &f4).unwrap();
    run(&gpu, &vec4, &f).unwrap();
    run(&gpu, &uint, &bytes).unwrap();
    run(&gpu, &uint, &halves).unwrap();
    run(&gpu, &uint, &u2).unwrap();
    run(&gpu, &int, &i).unwrap();
    // A user struct on the buffer side is the user's business.
    run(&gpu, &float, &parts).unwrap();
    // So is a struct on the kernel side.
    let structs = Kernel::builder(&gpu)
        .glsl(
            r#"
#version 450
layout(local_size_x = 1) in;
struct P { vec3 pos; uint id; };
layout(set = 0, binding = 0) buffer B { P data[]; };
void main() { data[0].id = 1u; }
"#,
        )
        .build()
        .unwrap();
    run(&gpu, &structs, &f).unwrap();
    run(&gpu, &structs, &parts).unwrap();
    assert_clean(&gpu);
}

#[test]
fn a_second_kernel_over_the_same_buffers_is_checked_too() {
    let gpu = gpu();
    let uint = kernel_of(&gpu, "uint");
    let float = kernel_of(&gpu, "float");
    let u = gpu.alloc::<u32>(8).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&uint, &[&u], 1).unwrap();
    // Same layout, same buffer: the descriptors bound for `uint` would
    // serve, but the element type does not.
    let r = b.run(&float, &[&u], 1).map(|_| ());
    refused(r, "u32 on float[] after uint[]");
    // The batch stays usable.
    b.run(&uint, &[&u], 1).unwrap();
    b.submit().unwrap();
    assert_clean(&gpu);
}

#[test]
fn types_already_checked_in_a_batch_do_not_let_others_through() {
    let gpu = gpu();
    let uint = kernel_of(&gpu, "uint");
    let float = kernel_of(&gpu, "float");
    let f1 = gpu.alloc::<f32>(8).unwrap();
    let f2 = gpu.alloc::<f32>(8).unwrap();
    let u = gpu.alloc::<u32>(8).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&float, &[&f1], 1).unwrap();
    // Another buffer of the type already checked at this binding.
    b.run(&float, &[&f2], 1).unwrap();
    // Another kernel still checks the type the first one passed.
    let r = b.run(&uint, &[&f2], 1).map(|_| ());
    refused(r, "f32 on uint[] after float[]");
    // The same kernel still checks another type.
    b.run(&float, &[&f1], 1).unwrap();
    let r = b.run(&float, &[&u], 1).map(|_| ());
    refused(r, "u32 on float[] after f32 buffers");
    b.run(&float, &[&f2], 1).unwrap();
    b.submit().unwrap();
    assert_clean(&gpu);
}

#[test]
fn raw_kernels_and_the_copy_kernel_take_any_element_type() {
    let gpu = gpu();
    let raw = Kernel::builder(&gpu)
        .glsl(
            r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { float data[]; };
void main() { data[0] = data[1]; }
"#,
        )
        .raw_elements()
        .build()
        .unwrap();
    let u = gpu.upload(&[7u32, 9]).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&raw, &[&u], 1).unwrap();
    b.submit().unwrap();
    assert_eq!(u.download().unwrap(), [9, 9]);

    // The built-in copy kernel reads 16-byte words of any element type.
    let copy = vkcompute::ops::builtin_kernel(&gpu, "copy", &[]).unwrap();
    let src = gpu.upload(&[-3i32, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    let dst = gpu.alloc::<i32>(8).unwrap();
    let words = 2u32;
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&copy, &[&src, &dst], words, &words.to_le_bytes())
        .unwrap();
    b.submit().unwrap();
    assert_eq!(dst.download().unwrap(), src.download().unwrap());
    // Batch::copy's kernel path (1 MiB and more) copies f32 and i8 alike.
    let n = 1 << 20;
    let f = gpu.upload(&vec![1.5f32; n / 4]).unwrap();
    let g = gpu.alloc::<f32>(n / 4).unwrap();
    let bytes = gpu.upload(&vec![-1i8; n]).unwrap();
    let bytes2 = gpu.alloc::<i8>(n).unwrap();
    let mut b = gpu.batch().unwrap();
    b.copy(&f, &g).unwrap();
    b.copy(&bytes, &bytes2).unwrap();
    b.submit().unwrap();
    assert!(g.download().unwrap().iter().all(|&v| v == 1.5));
    assert!(bytes2.download().unwrap().iter().all(|&v| v == -1));
    assert_clean(&gpu);
}
