# DTR_BUILD_PYTHON: AUTO builds bindings/python when Python 3 (interpreter and
# development headers) and nanobind (`python3 -m nanobind`) are found; ON
# requires them; OFF skips. Python3_EXECUTABLE picks the interpreter.
if(NOT DTR_BUILD_PYTHON STREQUAL "OFF")
  set(_dtr_py_required)
  if(DTR_BUILD_PYTHON STREQUAL "ON")
    set(_dtr_py_required REQUIRED)
  endif()
  if(Python3_EXECUTABLE AND NOT Python_EXECUTABLE)
    set(Python_EXECUTABLE "${Python3_EXECUTABLE}")
  endif()
  find_package(Python 3.8 COMPONENTS Interpreter Development.Module ${_dtr_py_required})
  if(Python_FOUND AND NOT nanobind_DIR)
    execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
                    OUTPUT_VARIABLE _dtr_nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _dtr_nanobind_rc ERROR_QUIET)
    if(_dtr_nanobind_rc EQUAL 0)
      set(nanobind_DIR "${_dtr_nanobind_dir}" CACHE PATH "nanobind's CMake package")
    endif()
  endif()
  if(Python_FOUND)
    find_package(nanobind CONFIG QUIET)
  endif()
  if(Python_FOUND AND nanobind_FOUND)
    message(STATUS "dtr: Python package with ${Python_EXECUTABLE} and nanobind ${nanobind_VERSION}")
    add_subdirectory(bindings/python)
  elseif(DTR_BUILD_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "DTR_BUILD_PYTHON=ON: nanobind not found for ${Python_EXECUTABLE} "
                        "(pip install nanobind, or set nanobind_DIR)")
  else()
    message(STATUS "dtr: no Python package (needs Python 3 headers and nanobind; "
                   "./dtr.sh build makes build/venv with them)")
  endif()
endif()
