# Source collection and per-ISA compile flags.
#
# Kernels are chosen at run time from CPUID, so the build never uses -march=native.
# A file opts into an instruction set by its name suffix; only that file gets the flags,
# and the dispatcher calls into it only when the CPU reports the features.

function(edgevl_collect_sources out_var)
  set(all)
  foreach(dir ${ARGN})
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cpp)
    list(APPEND all ${found})
  endforeach()
  set(${out_var} ${all} PARENT_SCOPE)
endfunction()

set(EDGEVL_FLAGS_AVX2 "-mavx2;-mfma;-mf16c;-mbmi2")
set(EDGEVL_FLAGS_AVX512 "${EDGEVL_FLAGS_AVX2};-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
set(EDGEVL_FLAGS_AVX512VNNI "${EDGEVL_FLAGS_AVX512};-mavx512vnni;-mavx512bf16")
set(EDGEVL_FLAGS_AVX512BF16 "${EDGEVL_FLAGS_AVX512};-mavx512vnni;-mavx512bf16")
set(EDGEVL_FLAGS_AMX "${EDGEVL_FLAGS_AVX512VNNI};-mamx-tile;-mamx-int8;-mamx-bf16")
set(EDGEVL_FLAGS_AVXVNNI "${EDGEVL_FLAGS_AVX2};-mavxvnni")

function(edgevl_apply_isa_flags)
  foreach(src ${ARGN})
    get_filename_component(name ${src} NAME_WE)
    if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
      continue()
    endif()
    if(name MATCHES "_amx$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EDGEVL_FLAGS_AMX}")
    elseif(name MATCHES "_avx512bf16$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EDGEVL_FLAGS_AVX512BF16}")
    elseif(name MATCHES "_avx512vnni$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EDGEVL_FLAGS_AVX512VNNI}")
    elseif(name MATCHES "_avx512$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EDGEVL_FLAGS_AVX512}")
    elseif(name MATCHES "_avxvnni$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EDGEVL_FLAGS_AVXVNNI}")
    elseif(name MATCHES "_avx2$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EDGEVL_FLAGS_AVX2}")
    endif()
  endforeach()
endfunction()
