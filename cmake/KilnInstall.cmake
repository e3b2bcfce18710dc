# What `cmake --install build --prefix P` puts under P, for C++ projects that use kiln through
# find_package(kiln) (tests/package/ is one):
#   include/kiln/<folder>/...        every header of the libraries, and the .def tables they
#                                    include; users write <kiln/codegen/CompileModel.h>
#   lib/libkiln_<folder>.a           the libraries (static)
#   lib/cmake/kiln/                  kilnConfig.cmake, its version file and the exported targets:
#                                    kiln::kiln (everything) and kiln::core, ::ir, ::runtime,
#                                    ::frontend, ::onnx, ::passes, ::codegen
#   bin/kiln-run, kiln-dump, kiln-compile  (tools/CMakeLists.txt)
# Nothing installed names the source or build folder: codegen carries runtime/KernelAbi.h in
# itself (see the top-level CMakeLists.txt), and the exported paths are relative to P, so the
# installed tree can move.
include(CMakePackageConfigHelpers)

set(kiln_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

install(TARGETS kiln kiln_core kiln_ir kiln_runtime kiln_frontend kiln_onnx kiln_passes kiln_codegen
        EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The headers keep their folders, since they include each other from the root ("ir/Graph.h"):
# the exported targets put include/kiln on the include path for that, and include for users.
install(DIRECTORY core ir frontend passes codegen runtime
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${kiln_config_dir})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kilnConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${kiln_config_dir})
# 0.x: a minor version may change any interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${kiln_config_dir})
