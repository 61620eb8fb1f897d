// kernels/common.h -- helper shared by some kernels of this synthetic build
// (written by pypto_build.synth).
#ifndef SYNTH_KERNELS_COMMON_H_
#define SYNTH_KERNELS_COMMON_H_

static inline float synth_scale(float x, float s) { return x * s; }

#endif  // SYNTH_KERNELS_COMMON_H_
