// Whether this test binary was built with AddressSanitizer (tools/sanitize.sh).
// Such builds reserve terabytes of address space and run the numeric kernels
// unvectorised and checked, so a few tests adapt: they skip what a sanitizer
// cannot run, or repeat less of what they already cover once.
#pragma once

namespace cubeforge::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

}  // namespace cubeforge::testing
