// out (cols x rows) = transpose of in (rows x cols), row-major. A 32 x 32
// tile goes through shared memory padded to 33 columns (no bank conflicts
// on the transposed read); each of the 32 x 8 invocations moves 4 elements.
#version 450
layout(local_size_x = 32, local_size_y = 8) in;
layout(set = 0, binding = 0) readonly buffer In { float src[]; };
layout(set = 0, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint rows; uint cols; };

shared float tile[32][33];

void main() {
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint c0 = gl_WorkGroupID.x * 32u, r0 = gl_WorkGroupID.y * 32u;
    for (uint j = ty; j < 32u; j += 8u) {
        uint r = r0 + j, c = c0 + tx;
        if (r < rows && c < cols) tile[j][tx] = src[r * cols + c];
    }
    barrier();
    for (uint j = ty; j < 32u; j += 8u) {
        uint c = c0 + j, r = r0 + tx;  // out row c, out column r
        if (c < cols && r < rows) dst[c * rows + r] = tile[tx][j];
    }
}
