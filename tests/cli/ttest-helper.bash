# Shared by the Bats tests of ttest: a scratch folder $W and `mk` to write
# small test programs into it.
load helper

setup() {
    W=$BATS_TEST_TMPDIR/w
    mkdir -p "$W"
    cd "$W"
}

# mk NAME: writes standard input to $W/NAME as an executable sh script.
mk() {
    { echo '#!/bin/sh'; cat; } >"$W/$1"
    chmod +x "$W/$1"
}

# The value of a field of the JSON object on line $2 of file $1.
jfield() {
    python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])])[sys.argv[3]])' "$@"
}

# The JSON lines of file $1 as "name result attempts passed failed skipped", sorted.
jsummary() {
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in sorted(rows, key=lambda r: r["name"]):
    print(r["name"], r["result"], r["attempts"], r["passed"], r["failed"], r["skipped"])
' "$1"
}
