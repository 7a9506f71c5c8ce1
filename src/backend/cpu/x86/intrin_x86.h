#pragma once
// <immintrin.h> for the AVX-512 / AMX files. GCC 12 warns (-Wmaybe-uninitialized) inside its
// own AVX-512 intrinsics, which start from an "undefined" vector (GCC bug 105593, fixed in 13):
// the warning is silenced for the intrinsic headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
