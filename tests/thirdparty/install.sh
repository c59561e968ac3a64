#!/usr/bin/env bash
# Install the real third-party MCP servers the tests and benchmarks start, into .thirdparty/
# at the repo root (gitignored), apart from agtool's own venv so their pins never meet ours:
#   .thirdparty/py         a venv with the official Python servers on the mcp 2.x SDK
#   .thirdparty/py-sqlite  mcp-server-sqlite alone: its last release (the server is archived)
#                          breaks on mcp 2.x (`Server` has no `list_resources`), so it keeps mcp 1.x
#   .thirdparty/npm  an npm prefix with the official TypeScript servers and the TypeScript SDK
# Idempotent: a part whose pins are already installed is left as it is. Run by .ci/run;
# developers run `bash tests/thirdparty/install.sh`. tests/thirdparty/servers.py reads these paths.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=.thirdparty

# Pinned so a registry release never changes what the tests see; bump deliberately.
PY_PINS=(
    mcp-server-time==2026.10.19
    mcp-server-git==2026.10.19
)
SQLITE_PINS=(
    mcp-server-sqlite==2025.4.25
    'mcp[cli]==1.30.0'
)
NPM_PINS=(
    @modelcontextprotocol/server-filesystem@2026.8.31
    @modelcontextprotocol/server-memory@2026.8.31
    @modelcontextprotocol/server-everything@2026.8.31
    @modelcontextprotocol/sdk@1.32.2
)

# A part is up to date when its stamp holds exactly the pins it was installed with.
up_to_date() { [ -f "$1/.pins" ] && [ "$(cat "$1/.pins")" = "$2" ]; }

# install_venv DIR PIN...: a venv at DIR holding exactly these pins.
install_venv() {
    local dir="$1"; shift
    local pins="$*"
    if up_to_date "$dir" "$pins"; then echo "thirdparty: $dir up to date"; return; fi
    rm -f "$dir/.pins"
    [ -x "$dir/bin/python" ] || python3 -m venv "$dir"
    # The machine's pip config may name local indexes that do not exist; their warnings are noise.
    "$dir/bin/pip" install -q --disable-pip-version-check "$@" 2> >(grep -v "is ignored: it is neither" >&2)
    echo "$pins" > "$dir/.pins"
    echo "thirdparty: installed $pins into $dir"
}

install_npm() {
    local dir="$DEST/npm" pins="${NPM_PINS[*]}"
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "thirdparty: node/npm not found, npm servers not installed (their tests skip, or fail under CI=true; apt-get install nodejs npm)"
        return
    fi
    if up_to_date "$dir" "$pins"; then echo "thirdparty: npm servers up to date"; return; fi
    rm -f "$dir/.pins"
    mkdir -p "$dir"
    # --ignore-scripts: no package's install hook runs on the machine; the servers need none.
    npm install --prefix "$dir" --save-exact --ignore-scripts --no-audit --no-fund \
        --loglevel=error "${NPM_PINS[@]}" >/dev/null
    echo "$pins" > "$dir/.pins"
    echo "thirdparty: installed ${NPM_PINS[*]}"
}

install_venv "$DEST/py" "${PY_PINS[@]}"
install_venv "$DEST/py-sqlite" "${SQLITE_PINS[@]}"
install_npm
