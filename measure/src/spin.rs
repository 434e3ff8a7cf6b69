//! A long-running kernel whose every result the CPU can check: `SPIN`
//! runs `iters` rounds of xorshift32 on each element, and [`xorshift`] /
//! [`xorshift_n`] compute the same on the CPU (the latter for any number
//! of rounds, by squaring xorshift32's GF(2) matrix). Shared by the tests
//! and `measure/examples/streams`.

/// Each invocation runs `iters` (push constant) rounds of xorshift32 on
/// its `uint` element. (Lavapipe stops any loop after about 65535
/// iterations, so a long job is many invocations of a loop below that,
/// not one long loop.)
pub const SPIN: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer S { uint s[]; };
layout(push_constant) uniform P { uint iters; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= s.length()) return;
    uint v = s[i];
    for (uint k = 0u; k < iters; k++) {
        v ^= v << 13;
        v ^= v >> 17;
        v ^= v << 5;
    }
    s[i] = v;
}
"#;

/// One round of xorshift32.
fn step(mut v: u32) -> u32 {
    v ^= v << 13;
    v ^= v >> 17;
    v ^= v << 5;
    v
}

/// `iters` rounds of xorshift32 on `v`, as `SPIN` computes them.
pub fn xorshift(v: u32, iters: u32) -> u32 {
    (0..iters).fold(v, |v, _| step(v))
}

/// xorshift32 as a GF(2)-linear map: the images of the 32 unit vectors.
type BitMatrix = [u32; 32];

fn apply(m: &BitMatrix, v: u32) -> u32 {
    (0..32)
        .filter(|b| v >> b & 1 == 1)
        .fold(0, |acc, b| acc ^ m[b])
}

fn compose(a: &BitMatrix, b: &BitMatrix) -> BitMatrix {
    std::array::from_fn(|j| apply(a, b[j]))
}

/// xorshift32 applied `n` times to each of `seeds`, by squaring its
/// matrix (any `n`, in O(log n) matrix products).
pub fn xorshift_n(seeds: &[u32], mut n: u64) -> Vec<u32> {
    let mut base: BitMatrix = std::array::from_fn(|b| step(1 << b));
    let mut acc: BitMatrix = std::array::from_fn(|b| 1 << b);
    while n > 0 {
        if n & 1 == 1 {
            acc = compose(&base, &acc);
        }
        base = compose(&base, &base);
        n >>= 1;
    }
    seeds.iter().map(|&v| apply(&acc, v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_power_equals_the_rounds() {
        let seeds = [1u32, 0xdead_beef, 12345, u32::MAX];
        for n in [0u32, 1, 2, 7, 1000] {
            let want: Vec<u32> = seeds.iter().map(|&v| xorshift(v, n)).collect();
            assert_eq!(xorshift_n(&seeds, u64::from(n)), want, "n = {n}");
        }
    }
}
