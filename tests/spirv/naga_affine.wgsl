// y[i] = scale * x[i] + bias, as a wgpu user writes it.
struct Params {
    scale: f32,
    bias: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i < arrayLength(&y) {
        y[i] = params.scale * x[i] + params.bias;
    }
}
