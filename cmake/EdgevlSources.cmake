# Source collection and per-ISA compile flags.
#
# Kernels are chosen at run time from CPUID (x86) or the auxiliary vector's HWCAPs (AArch64),
# so the build never uses -march=native. A file opts into an instruction set by its name
# suffix; only that file gets the flags, and the dispatcher calls into it only when the CPU
# reports the features. Kernel folders are per architecture: src/backend/cpu/x86/ builds only
# for x86-64, src/backend/cpu/arm/ only for AArch64.

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(EDGEVL_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64|ARM64")
  set(EDGEVL_ARCH arm)
else()
  set(EDGEVL_ARCH none)  # the scalar kernels only
endif()
if(EDGEVL_ARCH STREQUAL arm)
  # GCC contracts a * b + c into one FMA in C++ by default, and every AArch64 core has scalar
  # FMA: the scalar reference kernels would round differently from x86 (no FMA in the x86-64
  # baseline) and from the SIMD kernels they must equal bit for bit (the A8 scaling, RoPE).
  # The SIMD kernels call FMA explicitly where they want one.
  add_compile_options(-ffp-contract=off)
endif()

function(edgevl_collect_sources out_var)
  set(all)
  foreach(dir ${ARGN})
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cpp)
    list(APPEND all ${found})
  endforeach()
  foreach(arch x86 arm)
    if(NOT EDGEVL_ARCH STREQUAL arch)
      list(FILTER all EXCLUDE REGEX "/src/backend/cpu/${arch}/")
    endif()
  endforeach()
  set(${out_var} ${all} PARENT_SCOPE)
endfunction()

set(EDGEVL_FLAGS_AVX2 "-mavx2;-mfma;-mf16c;-mbmi2")
set(EDGEVL_FLAGS_AVX512 "${EDGEVL_FLAGS_AVX2};-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
set(EDGEVL_FLAGS_AVX512VNNI "${EDGEVL_FLAGS_AVX512};-mavx512vnni;-mavx512bf16")
set(EDGEVL_FLAGS_AVX512BF16 "${EDGEVL_FLAGS_AVX512};-mavx512vnni;-mavx512bf16")
set(EDGEVL_FLAGS_AMX "${EDGEVL_FLAGS_AVX512VNNI};-mamx-tile;-mamx-int8;-mamx-bf16")
set(EDGEVL_FLAGS_AVXVNNI "${EDGEVL_FLAGS_AVX2};-mavxvnni")
# AArch64: the baseline (armv8-a) has NEON, so *_neon files need no flag. The others need
# armv8.2-a, not armv8-a plus the extension: GCC 12's arm_neon.h declares the dotprod / i8mm /
# bf16 intrinsics for "arch=armv8.2-a+...". armv8.2-a also allows LSE atomics, which an armv8.0
# core (Cortex-A53) lacks, in the inline library code of those files; tools/arm64-test.sh checks
# that the linked binaries contain none.
set(EDGEVL_FLAGS_DOTPROD "-march=armv8.2-a+dotprod")
set(EDGEVL_FLAGS_FP16 "-march=armv8.2-a+fp16")
set(EDGEVL_FLAGS_I8MM "-march=armv8.2-a+dotprod+i8mm")
set(EDGEVL_FLAGS_BF16 "-march=armv8.2-a+dotprod+i8mm+bf16")

function(edgevl_set_isa_options src)
  # Sanitized builds compile the library at -O1 (CMakeLists.txt); its kernels need -O2 to round
  # as in the release build (GCC contracts a * b + c into FMA from -O2). -O2 and -O3 round the
  # same (neither reassociates), and under ASan -O2 compiles kernels_avx512.cpp in 44 s, -O3 in
  # 140 s.
  if(EDGEVL_SANITIZE AND src MATCHES "^${CMAKE_SOURCE_DIR}/src/")
    list(PREPEND ARGN -O2)
  endif()
  set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${ARGN}")
endfunction()

function(edgevl_apply_isa_flags)
  foreach(src ${ARGN})
    get_filename_component(name ${src} NAME_WE)
    if(src MATCHES "/backend/cpu/(ref|x86|arm)/")
      # The level folders are never merged into unity batches: their kernels carry the names the
      # dispatch uses, and each level has its own flags.
      set_source_files_properties(${src} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
    if(EDGEVL_ARCH STREQUAL arm)
      if(NOT src MATCHES "/backend/cpu/arm/")
        continue()  # "_bf16" also ends names that are no kernel files
      elseif(name MATCHES "_bf16$")
        edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_BF16})
      elseif(name MATCHES "_fp16$")
        edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_FP16})
      elseif(name MATCHES "_i8mm$")
        edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_I8MM})
      elseif(name MATCHES "_dotprod$")
        edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_DOTPROD})
      endif()
      continue()
    endif()
    if(NOT EDGEVL_ARCH STREQUAL x86)
      continue()
    endif()
    if(name MATCHES "_amx$")
      edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_AMX})
    elseif(name MATCHES "_avx512bf16$")
      edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_AVX512BF16})
    elseif(name MATCHES "_avx512vnni$")
      edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_AVX512VNNI})
    elseif(name MATCHES "_avx512$")
      edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_AVX512})
    elseif(name MATCHES "_avxvnni$")
      edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_AVXVNNI})
    elseif(name MATCHES "_avx2$")
      edgevl_set_isa_options(${src} ${EDGEVL_FLAGS_AVX2})
    endif()
  endforeach()
endfunction()
