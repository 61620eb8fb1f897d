// pto/pto-inst.hpp -- STAND-IN, written by pypto_build. NOT PTO-ISA.
//
// Used on the `host` platform ONLY when no PTO-ISA checkout is configured, so
// that generated-style kernels whose bodies are plain C++ still compile
// (every PyPTO kernel wrapper includes <pto/pto-inst.hpp> and says
// `using namespace pto;`). It declares an empty `pto` namespace and nothing
// else: it implements no PTO instruction, tile type or intrinsic. A kernel
// that uses real PTO-ISA code fails to compile against it -- configure a
// PTO-ISA checkout for such kernels instead.

#ifndef PYPTO_BUILD_HOST_FALLBACK_PTO_INST_HPP_
#define PYPTO_BUILD_HOST_FALLBACK_PTO_INST_HPP_

#define PYPTO_BUILD_PTO_ISA_STAND_IN 1

namespace pto {}

#endif  // PYPTO_BUILD_HOST_FALLBACK_PTO_INST_HPP_
