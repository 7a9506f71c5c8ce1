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

# The ISA level of a kernel file is its name's suffix: foo_avx512.cpp gets the flags of
# "avx512". One entry per suffix (suffix, then its flags space-separated), per architecture;
# adding a level is one line here.
set(EDGEVL_FLAGS_AVX2 "-mavx2 -mfma -mf16c -mbmi2")
set(EDGEVL_FLAGS_AVX512 "${EDGEVL_FLAGS_AVX2} -mavx512f -mavx512bw -mavx512vl -mavx512dq")
set(EDGEVL_LEVEL_FLAGS_x86
  amx         "${EDGEVL_FLAGS_AVX512} -mavx512vnni -mavx512bf16 -mamx-tile -mamx-int8 -mamx-bf16"
  avx512bf16  "${EDGEVL_FLAGS_AVX512} -mavx512vnni -mavx512bf16"
  avx512vnni  "${EDGEVL_FLAGS_AVX512} -mavx512vnni -mavx512bf16"
  avx512      "${EDGEVL_FLAGS_AVX512}"
  avxvnni     "${EDGEVL_FLAGS_AVX2} -mavxvnni"
  avx2        "${EDGEVL_FLAGS_AVX2}")
# AArch64: the baseline (armv8-a) has NEON, so *_neon files need no flag. The others need
# armv8.2-a, not armv8-a plus the extension: GCC 12's arm_neon.h declares the dotprod / i8mm /
# bf16 intrinsics for "arch=armv8.2-a+...". armv8.2-a also allows LSE atomics, which an armv8.0
# core (Cortex-A53) lacks, in the inline library code of those files; tools/arm64-test.sh checks
# that the linked binaries contain none.
set(EDGEVL_LEVEL_FLAGS_arm
  bf16        "-march=armv8.2-a+dotprod+i8mm+bf16"
  fp16        "-march=armv8.2-a+fp16"
  i8mm        "-march=armv8.2-a+dotprod+i8mm"
  dotprod     "-march=armv8.2-a+dotprod")

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
  set(table ${EDGEVL_LEVEL_FLAGS_${EDGEVL_ARCH}})
  list(LENGTH table n)
  math(EXPR last "${n} - 2")
  foreach(src ${ARGN})
    get_filename_component(name ${src} NAME_WE)
    if(src MATCHES "/backend/cpu/(ref|x86|arm)/")
      # The level folders are never merged into unity batches: their kernels carry the names the
      # dispatch uses, and each level has its own flags.
      set_source_files_properties(${src} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
    # Only the architecture's kernel folder ("_bf16" also ends names that are no kernel files).
    if(n EQUAL 0 OR NOT src MATCHES "/backend/cpu/${EDGEVL_ARCH}/")
      continue()
    endif()
    foreach(i RANGE 0 ${last} 2)
      list(GET table ${i} suffix)
      if(name MATCHES "_${suffix}$")
        math(EXPR f "${i} + 1")
        list(GET table ${f} flags)
        separate_arguments(flags UNIX_COMMAND "${flags}")
        edgevl_set_isa_options(${src} ${flags})
        break()
      endif()
    endforeach()
  endforeach()
endfunction()
