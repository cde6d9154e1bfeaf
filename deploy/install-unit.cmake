# Run at install time (install(SCRIPT) from CMakeLists.txt): writes the systemd unit with the
# installed paths and the example configuration. CMAKE_INSTALL_PREFIX is the prefix given to
# `cmake --install --prefix` (or `make install PREFIX=...`); DESTDIR is honoured.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(confdir "/etc/gregor")
else()
  set(confdir "${CMAKE_INSTALL_PREFIX}/etc/gregor")
endif()
set(bindir "${CMAKE_INSTALL_PREFIX}/bin")
set(unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
set(dest "$ENV{DESTDIR}")
configure_file("${GR_SOURCE_DIR}/deploy/gregord.service.in" "${dest}${unitdir}/gregord.service" @ONLY)
message(STATUS "Installing: ${dest}${unitdir}/gregord.service")
file(MAKE_DIRECTORY "${dest}${confdir}")
configure_file("${GR_SOURCE_DIR}/config/server-production.properties"
               "${dest}${confdir}/server.properties.example" COPYONLY)
message(STATUS "Installing: ${dest}${confdir}/server.properties.example")
