// Whether this translation unit is built with AddressSanitizer, for both
// compilers: GCC defines __SANITIZE_ADDRESS__, clang answers
// __has_feature(address_sanitizer) (and defines the macro only from clang 16).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DTR_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTR_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef DTR_ADDRESS_SANITIZER
#define DTR_ADDRESS_SANITIZER 0
#endif
