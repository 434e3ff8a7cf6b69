// Element-wise functions with relative accuracy near 1e-7 over the whole
// range (no cancellation near zero or for large negative inputs).
#ifndef VKC_ACTIVATIONS_GLSL
#define VKC_ACTIVATIONS_GLSL

// tanh: Cephes' odd polynomial below 0.625, 1 - 2/(e^2|x| + 1) above.
float vkc_tanh(float x) {
    float a = abs(x);
    float r;
    if (a < 0.625) {
        float z = x * x;
        r = ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z
              + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;
    } else {
        r = sign(x) * (1.0 - 2.0 / (exp(2.0 * a) + 1.0));
    }
    return r;
}

float vkc_sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

// erfc(z) for z >= 0 (Numerical Recipes' erfcc, fractional error < 1.2e-7).
float vkc_erfc_pos(float z) {
    float t = 1.0 / (1.0 + 0.5 * z);
    float p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
            + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
            + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(-z * z + p);
}

// GELU, exact form: x * Phi(x) = 0.5 x erfc(-x / sqrt 2).
float vkc_gelu_erf(float x) {
    float z = abs(x) * 0.70710678118654752;
    float e = vkc_erfc_pos(z);
    return x >= 0.0 ? 0.5 * x * (2.0 - e) : 0.5 * x * e;
}

// GELU, tanh form: 0.5 x (1 + tanh(u)) = x * sigmoid(2u),
// u = sqrt(2/pi) (x + 0.044715 x^3).
float vkc_gelu_tanh(float x) {
    float u = 0.79788456080286536 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}
#endif
