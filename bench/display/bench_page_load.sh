#!/bin/sh
# bench_page_load.sh -- PerfDisplay with 10,000 and 100,000 workers (the bounded report) against
# 1024 (ratios, same run; the goals load <= 3 s, views <= 1 s at 100k), in
# headless Chromium; see page_load.js. Run by `make bench` (scripts/bench.sh) from the repo
# root with PT_CLI set; installs playwright-core into the build tree like the browser tests.
set -eu
cli=${PT_CLI:-build/bin/perftracker}
build=$(dirname "$(dirname "$cli")")
if ! command -v node >/dev/null 2>&1 || [ ! -x /usr/bin/chromium ]; then
    echo "skipped: needs node and /usr/bin/chromium (scripts/install-deps.sh installs them)"
    exit 0
fi
node_dir=$build/tests/display/node
sh tests/display/npm_ci.sh tests/display "$node_dir" >/dev/null
exec node bench/display/page_load.js --perftracker "$cli" --work "$build/bench/display/work" \
    --node-modules "$node_dir/node_modules"
