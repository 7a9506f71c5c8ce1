# `cmake --install build [--prefix P]`: the CLI, libedgevl.so / .a, include/edgevl.h and a
# pkg-config file; `cd build && cpack -G DEB` packs the same into an installable .deb.
include(GNUInstallDirs)
install(TARGETS edgevl_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS edgevl_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES $<TARGET_FILE:edgevl> DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/edgevl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# pkg-config: installed into /usr (the .deb) the file says prefix=/usr, as Debian's own do;
# anywhere else it finds its prefix from its own place (${pcfiledir}), so `cmake --install
# --prefix P` and a tree moved after installing both work.
file(RELATIVE_PATH EDGEVL_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" EDGEVL_PC_UP "${EDGEVL_PC_UP}")
foreach(kind relocatable usr)
  if(kind STREQUAL "usr")
    set(EDGEVL_PC_PREFIX "/usr")
  else()
    set(EDGEVL_PC_PREFIX "\${pcfiledir}/${EDGEVL_PC_UP}")
  endif()
  configure_file(${CMAKE_SOURCE_DIR}/cmake/edgevl.pc.in ${CMAKE_BINARY_DIR}/pc/${kind}/edgevl.pc
                 @ONLY)
endforeach()
install(CODE "
  set(edgevl_pc \"${CMAKE_BINARY_DIR}/pc/relocatable/edgevl.pc\")
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(edgevl_pc \"${CMAKE_BINARY_DIR}/pc/usr/edgevl.pc\")
  endif()
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
       TYPE FILE FILES \"\${edgevl_pc}\")
")

set(CPACK_PACKAGE_NAME edgevl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "edgevl maintainers <edgevl@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Vision-language and language models compiled to one binary, run on CPUs")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# The library's runtime dependencies (libfmt, libpcre2-8, libjpeg) read off the binaries.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_GENERATOR DEB)
include(CPack)
