//! Bandwidth: saxpy over 64 Mi f32 (a user GLSL kernel with vec4 loads and a
//! grid-stride loop over a grid sized to the machine, in slices where a
//! binding would pass `maxStorageBufferRange`), a 1 GiB buffer-to-buffer
//! copy, and 256 MiB host upload and download to device-local memory.
//!
//! Saxpy and copy are timed on the GPU (timestamps around the work); host
//! transfers by the wall clock. Throughput is in GB/s (10^9 bytes), bytes
//! counted as CUDA's anchor counts them (saxpy 12 per element, copy read +
//! write). `cargo bench --bench bandwidth`; `VKCOMPUTE_QUICK=1` shrinks
//! every size (lavapipe, CI). The workloads are `measure/src/bandwidth.rs`.

use vkcompute_measure::bandwidth;

use std::time::Duration;

use bandwidth::{quick, Copy, Saxpy, Transfer};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use vkcompute::Device;

fn bench(c: &mut Criterion) {
    let gpu = Device::new().expect("device");
    let info = gpu.info().clone();
    let samples = if quick() { 10 } else { 30 };
    let time = Duration::from_secs(if quick() { 1 } else { 3 });

    let n = bandwidth::saxpy_elements();
    let ilp = bandwidth::env_num("VKCOMPUTE_SAXPY_ILP").unwrap_or(1);
    let saxpy = Saxpy::new(&gpu, n, 0, None, None, ilp).expect("saxpy");
    saxpy.run_gpu(1).expect("saxpy run");
    saxpy.check(0, 1).expect("saxpy result");
    println!(
        "adapter: {}; saxpy: {} Mi f32, {} slice(s), {} workgroups of {} per slice, ilp {}",
        info.name,
        n >> 20,
        saxpy.slices.len(),
        saxpy.slices[0].workgroups,
        bandwidth::WORKGROUP,
        ilp
    );
    let mut g = c.benchmark_group("bandwidth");
    g.sample_size(samples)
        .measurement_time(time)
        .warm_up_time(Duration::from_millis(if quick() { 100 } else { 1000 }))
        .sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::BytesDecimal(saxpy.bytes()));
    g.bench_function(format!("saxpy_{}Mi_f32_gpu", n >> 20), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| saxpy.run_gpu(1).expect("saxpy")).sum())
    });
    drop(saxpy);

    let bytes = bandwidth::copy_bytes(&info);
    let copy = Copy::new(&gpu, bytes).expect("copy buffers");
    copy.run_gpu().expect("copy");
    copy.check().expect("copy result");
    g.throughput(Throughput::BytesDecimal(copy.bytes()));
    g.bench_function(format!("copy_{}MiB_gpu", bytes >> 20), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| copy.run_gpu().expect("copy")).sum())
    });
    drop(copy);

    let mut t = Transfer::new(&gpu, bandwidth::transfer_bytes()).expect("transfer buffer");
    t.check().expect("transfer round trip");
    let mib = t.bytes() >> 20;
    g.throughput(Throughput::BytesDecimal(t.bytes()));
    g.bench_function(format!("upload_{mib}MiB_wall"), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| t.upload().expect("upload")).sum())
    });
    g.bench_function(format!("download_{mib}MiB_wall"), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| t.download().expect("download")).sum())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
