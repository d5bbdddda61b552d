# fetch_charts.cmake -- build step: `npm ci` the page's chart library into the build tree.
#
#   cmake -DWEB_DIR=web -DOUT_DIR=build/web -DNPM=/usr/bin/npm -DSTAMP=... -P fetch_charts.cmake
#
# It never fails the build: without npm or without the registry, the binary bundles the
# page without charts (tables and the canvas heatmap still work, and the page says so).
# The npm cache lives in the build tree, so nothing is written outside it.
file(COPY ${WEB_DIR}/package.json ${WEB_DIR}/package-lock.json DESTINATION ${OUT_DIR})
set(library ${OUT_DIR}/node_modules/echarts/dist/echarts.min.js)
if(NPM)
  execute_process(
    COMMAND ${NPM} ci --no-audit --no-fund --ignore-scripts --loglevel=error
            --fetch-retries=1 --fetch-timeout=30000 --cache ${OUT_DIR}/npm-cache
    WORKING_DIRECTORY ${OUT_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
    TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(WARNING "PerfDisplay: `npm ci` failed (${rc}); the page is built without charts.\n${out}")
    file(REMOVE_RECURSE ${OUT_DIR}/node_modules)
  endif()
else()
  message(WARNING "PerfDisplay: npm not found; the page is built without charts.")
  file(REMOVE_RECURSE ${OUT_DIR}/node_modules)
endif()
file(TOUCH ${STAMP})
