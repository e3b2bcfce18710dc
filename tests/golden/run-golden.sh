#!/usr/bin/env bash
# Runs the `// RUN:` lines of one golden test file, lit-style:
#   %s -> the test file, %S -> its folder, %t -> a scratch path, FileCheck -> the FileCheck binary,
#   kiln-dump / kiln-run -> the built tools, `not CMD` -> succeeds when CMD fails cleanly
#   (exit 1-127; a crash, exit >= 128, is a failure too). A RUN line ending in '\' continues
#   on the next.
# usage: run-golden.sh FILE TOOL_DIR FILECHECK
set -euo pipefail
file=$1 tooldir=$2 filecheck=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/bin"
cat > "$scratch/bin/not" <<'NOT'
#!/usr/bin/env bash
status=0
"$@" || status=$?
if [ "$status" -eq 0 ]; then
  echo "not: '$*' succeeded but was expected to fail" >&2
  exit 1
fi
if [ "$status" -ge 128 ]; then
  echo "not: '$*' crashed (exit status $status)" >&2
  exit 1
fi
exit 0
NOT
chmod +x "$scratch/bin/not"
export PATH="$tooldir:$scratch/bin:$PATH"
cmds=$(sed -n 's@^[[:space:]]*//[[:space:]]*RUN:[[:space:]]*@@p' "$file" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
if [ -z "$cmds" ]; then
  echo "no RUN lines in $file" >&2
  exit 1
fi
while IFS= read -r cmd; do
  cmd=${cmd//%s/$file}
  cmd=${cmd//%S/$(dirname "$file")}
  cmd=${cmd//%t/$scratch/t}
  cmd=${cmd//FileCheck/$filecheck}
  echo "RUN: $cmd"
  bash -o pipefail -c "$cmd"
done <<< "$cmds"
