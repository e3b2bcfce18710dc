#!/usr/bin/env bash
# Runs the `// RUN:` lines of one golden test file, lit-style:
#   %s -> the test file, %t -> a scratch path, FileCheck -> the FileCheck binary,
#   kiln-dump / kiln-run -> the built tools. A RUN line ending in '\' continues on the next.
# usage: run-golden.sh FILE TOOL_DIR FILECHECK
set -euo pipefail
file=$1 tooldir=$2 filecheck=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export PATH="$tooldir:$PATH"
cmds=$(sed -n 's@^[[:space:]]*//[[:space:]]*RUN:[[:space:]]*@@p' "$file" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
if [ -z "$cmds" ]; then
  echo "no RUN lines in $file" >&2
  exit 1
fi
while IFS= read -r cmd; do
  cmd=${cmd//%s/$file}
  cmd=${cmd//%t/$scratch/t}
  cmd=${cmd//FileCheck/$filecheck}
  echo "RUN: $cmd"
  bash -o pipefail -c "$cmd"
done <<< "$cmds"
