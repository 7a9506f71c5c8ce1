# `cmake --install build [--prefix P]`: the CLI, libedgevl.so / .a, include/edgevl.h and a
# pkg-config file; `cd build && cpack -G DEB` packs the same into an installable .deb.
include(GNUInstallDirs)
install(TARGETS edgevl_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS edgevl_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES $<TARGET_FILE:edgevl> DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/edgevl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
configure_file(${CMAKE_SOURCE_DIR}/cmake/edgevl.pc.in ${CMAKE_BINARY_DIR}/edgevl.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/edgevl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

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
