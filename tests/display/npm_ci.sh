#!/bin/sh
# npm_ci.sh SRC DEST -- install the browser tests' node packages (playwright-core, pinned by
# SRC/package-lock.json) into DEST, inside the build tree, with the npm cache there too.
# Run by ctest as the setup of the browser tests, so a clean clone needs no manual step.
# Without npm it skips (77) and the browser tests then skip too; a failing `npm ci` fails.
set -u
src=$1
dest=$2
if ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: npm not found (scripts/install-deps.sh installs nodejs and npm)"
    exit 77
fi
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
cd "$dest" || exit 1
if [ -d node_modules/playwright-core ] && cmp -s package-lock.json .installed-lock.json; then
    echo "node packages already installed from this package-lock.json"
    exit 0
fi
if ! npm ci --no-audit --no-fund --ignore-scripts --loglevel=error --cache "$dest/npm-cache"; then
    echo "FAIL: npm ci failed in $dest (is the npm registry reachable?)"
    exit 1
fi
cp package-lock.json .installed-lock.json
echo "installed: $(ls node_modules | tr '\n' ' ')"
